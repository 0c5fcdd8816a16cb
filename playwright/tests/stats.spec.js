"use strict";
const { test, expect } = require("@playwright/test");
const { api, base, uniqueName, createDatabase, deleteDatabase, putDocs, waitLive, shot } = require("./helpers");

const num = async (locator) => Number((await locator.textContent()).replace(/,/g, ""));

test.describe("Stats page", () => {
  let db;
  test.beforeEach(async () => {
    db = uniqueName("pwstats");
    await createDatabase(db);
  });
  test.afterEach(async () => {
    await deleteDatabase(db);
  });

  test("counts, rate and sparkline move live while documents are written", async ({ page }) => {
    await page.goto(base() + "/studio/db/" + db + "/stats");
    await expect(page.getByTestId("nav-stats")).toHaveAttribute("aria-current", "page");
    await expect(page.getByTestId("stats-docs")).toHaveText("0");
    await expect(page.getByTestId("stats-collections")).toHaveText("0");
    await waitLive(page);
    const dbid = (await page.getByTestId("stats-dbid").textContent()).trim();
    expect(dbid).not.toBe("");

    // Write for about 3 s in the background while the page is watched.
    let written = 0;
    const writer = (async () => {
      const until = Date.now() + 3000;
      while (Date.now() < until) {
        const batch = [];
        for (let i = 0; i < 25; i++) {
          written++;
          batch.push({ id: "events/" + written, body: { n: written, "@metadata": { "@collection": written % 2 ? "Events" : "Logs" } } });
        }
        await putDocs(db, batch);
        await new Promise((r) => setTimeout(r, 50));
      }
    })();

    // The rate and the count move while the writes go on, without a reload.
    await expect.poll(() => num(page.getByTestId("stats-rate")), { timeout: 5000 }).toBeGreaterThan(0);
    const seen = await num(page.getByTestId("stats-docs"));
    expect(seen).toBeGreaterThan(0);
    await expect.poll(() => num(page.getByTestId("stats-docs")), { timeout: 5000 }).toBeGreaterThan(seen);
    await expect(page.getByTestId("stats-sparkline").locator("polyline")).toHaveCount(1);
    await shot(page, "stats");
    await writer;

    // Once they stop, the figures settle on the engine's.
    const stats = await api("GET", "/databases/" + db + "/stats");
    expect(stats.json.CountOfDocuments).toBe(written);
    await expect(page.getByTestId("stats-docs")).toHaveText(written.toLocaleString("en-US"));
    await expect(page.getByTestId("stats-collections")).toHaveText("2");
    await expect(page.getByTestId("stats-etag")).toHaveText(String(stats.json.LastDocEtag));
    await expect(page.getByTestId("stats-cv")).toContainText("A:" + stats.json.LastDocEtag + "-");
    await expect(page.getByTestId("stats-dbid")).toHaveText(dbid);
    expect(await num(page.getByTestId("stats-peak"))).toBeGreaterThan(0);
    expect(Number(await page.getByTestId("stats-sparkline").getAttribute("data-samples"))).toBeGreaterThanOrEqual(3);
    // Writes stopped: the current rate falls back to 0 within a couple of seconds.
    await expect(page.getByTestId("stats-rate")).toHaveText("0", { timeout: 5000 });
  });
});
