"use strict";
const { test, expect } = require("@playwright/test");
const { base, uniqueName, createDatabase, deleteDatabase, putDocs, waitLive, shot } = require("./helpers");

// nextRange asks for a HiLo range the way the npm client does.
async function nextRange(db, tag, last) {
  const q = new URLSearchParams({
    tag,
    lastBatchSize: String(last ? last.LastSize : 0),
    lastRangeAt: last ? last.LastRangeAt : "1970-01-01T00:00:00.0000000Z",
    identityPartsSeparator: "/",
    lastMax: String(last ? last.High : 0),
  });
  const r = await fetch(base() + "/databases/" + db + "/hilo/next?" + q, { headers: { "Raven-Client-Version": "7.2.2" } });
  expect(r.status).toBe(201);
  return r.json();
}

function idsOf(range, count) {
  const out = [];
  for (let n = range.Low; n < range.Low + count; n++) {
    out.push({ id: range.Prefix + n + "-" + range.ServerTag, body: { n, "@metadata": { "@collection": "Users" } } });
  }
  return out;
}

test.describe("HiLo page", () => {
  let db;
  test.beforeEach(async () => {
    db = uniqueName("pwhilo");
    await createDatabase(db);
  });
  test.afterEach(async () => {
    await deleteDatabase(db);
  });

  test("a client's new ranges and ids appear live", async ({ page }) => {
    await page.goto(base() + "/studio/db/" + db + "/hilo");
    await expect(page.getByTestId("nav-hilo")).toHaveAttribute("aria-current", "page");
    await expect(page.getByTestId("hilo-empty")).toBeVisible();
    await waitLive(page);

    // Act as a client: take a range, then store documents with its ids.
    const first = await nextRange(db, "users");
    expect(first.Low).toBe(1);
    const row = page.locator('[data-testid=hilo-row][data-tag="users"]');
    await expect(row.getByTestId("hilo-max")).toHaveText("32");
    await putDocs(db, idsOf(first, 5));
    await expect(row.getByTestId("hilo-range")).toHaveText("1–32");
    await expect(row.getByTestId("hilo-client")).toContainText("(ravendb 7.2.2)");
    await expect(row.getByTestId("hilo-client")).toContainText("node A");
    await expect(row.getByTestId("hilo-docs")).toHaveText("5");
    await expect(row.getByTestId("hilo-max-id")).toContainText("highest number 5");

    // The range is used up quickly: the next one doubles.
    const second = await nextRange(db, "users", first);
    expect(second.Low).toBe(33);
    expect(second.High).toBe(96);
    await putDocs(db, idsOf(second, 10));
    await expect(row.getByTestId("hilo-max")).toHaveText("96");
    await expect(row.getByTestId("hilo-range")).toHaveText("33–96");
    await expect(row.getByTestId("hilo-sizes")).toHaveText("32 → 64");
    await expect(row.getByTestId("hilo-trend")).toHaveText("doubling");
    await expect(row.getByTestId("hilo-docs")).toHaveText("15");
    await expect(row.getByTestId("hilo-max-id")).toContainText("highest number 42");
    await expect(row.getByTestId("hilo-call")).toHaveCount(2);

    // The store closes and gives back the unused end of its range.
    const ret = await fetch(base() + "/databases/" + db + "/hilo/return?tag=users&end=96&last=42", {
      method: "PUT",
      headers: { "Raven-Client-Version": "7.2.2" },
    });
    expect(ret.status).toBe(204);
    await expect(row.getByTestId("hilo-max")).toHaveText("42");
    await expect(row.locator("[data-testid=hilo-call][data-op=return]")).toContainText("used up to 42");
    await shot(page, "hilo");
  });

  test("an unknown database reads as such", async ({ page }) => {
    const r = await page.goto(base() + "/studio/db/" + db + "-missing/hilo");
    expect(r.status()).toBe(404);
    await expect(page.getByTestId("message")).toContainText("No such database");
  });
});
