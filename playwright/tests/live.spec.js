// Live updates that do not fight the user (issue 12, point 1), on a real
// three-node cluster while documents and conflicts are written all the
// time: focus survives 200+ Tab presses and reaches the Conflicts page's
// Preview, a selected id survives updates and can be copied, the row under
// the pointer stays put while new rows are announced, and an idle page gets
// no websocket frames at all.
"use strict";
const { test, expect } = require("@playwright/test");
const { Cluster } = require("./cluster3");
const { waitLive, shot } = require("./helpers");

const DB = "livepw";
const cluster = new Cluster("live");

// The writer: several API writes a second on A (new documents), and every
// few rounds the same ids written on A and B at once (new conflicts, as
// replication brings the two versions together).
const writer = { on: false, docs: 0, rounds: 0, done: null };
async function bulk(tag, cmds) {
  const r = await cluster.api(tag, "POST", "/databases/" + DB + "/bulk_docs", { Commands: cmds });
  if (r.status !== 201) throw new Error("bulk_docs on " + tag + ": " + r.status + " " + JSON.stringify(r.body));
}
function doc(id, coll, body) {
  return { Id: id, Type: "PUT", Document: { ...body, "@metadata": { "@collection": coll } } };
}
async function conflictRound(r, n) {
  const ids = Array.from({ length: n }, (_, i) => "carts/" + (r * n + i));
  await Promise.all(["A", "B"].map((tag) => bulk(tag, ids.map((id) => doc(id, "Carts", { From: tag, Round: r })))));
}
function startWriter() {
  writer.on = true;
  writer.done = (async () => {
    while (writer.on) {
      writer.rounds++;
      const cmds = [];
      for (let i = 0; i < 2; i++) cmds.push(doc("items/" + ++writer.docs, "Items", { N: writer.docs, At: Date.now() }));
      await bulk("A", cmds);
      if (writer.rounds % 4 === 0) await conflictRound(1000 + writer.rounds, 2);
      await new Promise((r) => setTimeout(r, 150));
    }
  })();
}
async function stopWriter() {
  writer.on = false;
  if (writer.done) await writer.done;
}
async function conflictTotal() {
  const r = await cluster.api("A", "GET", "/databases/" + DB + "/replication/conflicts");
  return r.body && r.body.TotalResults;
}
async function liveUpdates(page) {
  return Number((await page.locator("body").getAttribute("data-live-updates")) || "0");
}

test.describe.serial("live updates on a busy cluster", () => {
  test.beforeAll(async () => {
    test.setTimeout(180_000);
    await cluster.start();
    await cluster.createDatabase(DB);
    // Keep conflicts (no automatic resolution), then make some.
    const s = await cluster.api("A", "POST", "/admin/replication/conflicts/solver?name=" + DB, { ResolveToLatest: false });
    if (s.status !== 200) throw new Error("solver: " + s.status);
    for (const tag of ["B", "C"]) {
      await expect.poll(async () => (await cluster.api(tag, "GET", "/databases/" + DB + "/replication/conflicts/solver")).body.Default, { timeout: 20_000 }).toBe("manual");
    }
    const docs = [];
    for (let i = 1; i <= 60; i++) docs.push(doc("items/" + ++writer.docs, "Items", { N: writer.docs }));
    await bulk("A", docs);
    for (let r = 0; r < 30 && (await conflictTotal()) < 70; r++) await conflictRound(r, 10);
    await expect.poll(conflictTotal, { timeout: 20_000 }).toBeGreaterThanOrEqual(60);
    startWriter();
  });
  test.afterAll(async () => {
    await stopWriter();
    await cluster.stop();
  });

  test("Tab goes through a live Conflicts page 240 times: focus never falls to the body and reaches Preview", async ({ page }) => {
    test.setTimeout(240_000); // 240 key presses on a machine shared with the three nodes
    await page.setViewportSize({ width: 1440, height: 900 });
    await page.goto(cluster.nodes.A.url + "/studio/db/" + DB + "/conflicts");
    await waitLive(page);
    await expect(page.getByTestId("conflict-row").first()).toBeVisible();
    // Watch focus between key presses too: focus on <body> while the
    // element that had it was removed is the failure; on <body> after the
    // last element of the page (still in place) is Tab leaving the page.
    await page.evaluate(() => {
      window.__focus = { lost: 0, wraps: 0, lostWhat: [] };
      let last = document.activeElement;
      const check = () => {
        const now = document.activeElement;
        if ((now === document.body || !now) && last && last !== document.body) {
          if (last.isConnected) window.__focus.wraps++;
          else {
            window.__focus.lost++;
            window.__focus.lostWhat.push(last.tagName + " " + (last.getAttribute("data-testid") || ""));
          }
        }
        last = now;
      };
      window.__focusCheck = check;
      setInterval(check, 2);
      document.addEventListener("focusin", check, true);
    });
    const before = await liveUpdates(page);
    let preview = 0;
    let bodyAfterTab = 0;
    const seen = new Set();
    for (let i = 0; i < 240; i++) {
      await page.keyboard.press("Tab");
      const f = await page.evaluate(() => {
        window.__focusCheck();
        const a = document.activeElement;
        return { body: !a || a === document.body, testid: (a && a.getAttribute("data-testid")) || "" };
      });
      if (f.body) bodyAfterTab++;
      if (f.testid === "bulk-preview") preview++;
      seen.add(f.testid);
      if (i % 40 === 0) await page.waitForTimeout(150); // let updates land mid-way
    }
    const focus = await page.evaluate(() => window.__focus);
    const after = await liveUpdates(page);
    expect(after - before, "live updates during the Tab presses").toBeGreaterThanOrEqual(5);
    expect(focus.lost, "focus lost to <body> by an update: " + focus.lostWhat.join(", ")).toBe(0);
    expect(bodyAfterTab, "Tab presses that landed on <body> other than leaving the page at its end").toBeLessThanOrEqual(focus.wraps);
    expect(preview, "the Preview button reached by Tab").toBeGreaterThanOrEqual(1);
    expect(seen.has("conflict-link")).toBe(true);
  });

  test("a selected id survives live updates and Control+C copies it", async ({ page, context }) => {
    await context.grantPermissions(["clipboard-read", "clipboard-write"]);
    await page.setViewportSize({ width: 1440, height: 900 });
    await page.goto(cluster.nodes.A.url + "/studio/db/" + DB + "/conflicts");
    await waitLive(page);
    const link = page.getByTestId("conflict-link").nth(3);
    const id = (await link.textContent()).trim();
    await link.evaluate((a) => {
      const r = document.createRange();
      r.selectNodeContents(a);
      const s = window.getSelection();
      s.removeAllRanges();
      s.addRange(r);
    });
    const before = await liveUpdates(page);
    const total0 = await page.getByTestId("conflicts-total").textContent();
    await page.waitForTimeout(3500);
    expect(await liveUpdates(page), "live updates while the id was selected").toBeGreaterThanOrEqual(before + 3);
    expect(await page.evaluate(() => window.getSelection().toString())).toBe(id);
    await page.keyboard.press("Control+C");
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(id);
    // The rest of the page kept moving: the conflicts count (outside the
    // selected element) went on updating, or the region held only while
    // the row's text changed.
    await page.evaluate(() => window.getSelection().removeAllRanges());
    await expect.poll(() => page.getByTestId("conflicts-total").textContent(), { timeout: 15_000 }).not.toBe(total0);
  });

  test("the row under the pointer stays while new documents are announced; Show inserts them", async ({ page }) => {
    test.setTimeout(120_000);
    await page.setViewportSize({ width: 1440, height: 900 });
    await page.goto(cluster.nodes.A.url + "/studio/db/" + DB + "/documents?collection=Items");
    await waitLive(page);
    // Measure and scroll in one step: rows still move until the pointer
    // is on the table.
    const box = await page.evaluate(() => {
      const r = document.querySelectorAll("[data-testid=doc-row]")[4];
      r.scrollIntoView({ block: "center" });
      const b = r.getBoundingClientRect();
      return { x: b.x, y: b.y, height: b.height };
    });
    const x = box.x + 40;
    const y = box.y + box.height / 2;
    await page.mouse.move(x, y);
    const underPointer = () => page.evaluate(([px, py]) => {
      const el = document.elementFromPoint(px, py);
      const tr = el && el.closest("tr[data-key]");
      return tr ? tr.getAttribute("data-key") : null;
    }, [x, y]);
    // The row the pointer landed on (rows may have moved just before).
    const key = await underPointer();
    expect(key).toBeTruthy();
    const row = page.locator('tr[data-key="' + key + '"]');
    const top = (await row.boundingBox()).y;
    const firstKey = await page.getByTestId("doc-row").first().getAttribute("data-key");
    const ann = page.getByTestId("live-new-rows");
    await expect(ann).toBeVisible({ timeout: 15_000 });
    await expect(ann).toHaveText(/^\d+ new/);
    // Keep watching through several more updates.
    for (let i = 0; i < 6; i++) {
      expect(await underPointer()).toBe(key);
      expect((await row.boundingBox()).y).toBe(top);
      await page.waitForTimeout(300);
    }
    expect(await page.getByTestId("doc-row").first().getAttribute("data-key"), "no row inserted above while hovering").toBe(firstKey);
    const announced = Number((await ann.textContent()).match(/^(\d+)/)[1]);
    expect(announced).toBeGreaterThanOrEqual(1);
    await shot(page, "live-new-rows-1440");
    const keys = () => page.getByTestId("doc-row").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-key")));
    const before = new Set(await keys());
    await ann.click();
    await expect(page.getByTestId("doc-row").first()).not.toHaveAttribute("data-key", firstKey, { timeout: 20_000 });
    const shown = await keys();
    expect(before.has(shown[0]), "the first row is a new one").toBe(false);
    expect(shown.filter((k) => !before.has(k)).length, "new rows shown").toBeGreaterThanOrEqual(Math.min(announced, shown.length));
    // Focus went to the first new row, not to the body.
    expect(await page.evaluate(() => document.activeElement !== document.body)).toBe(true);
  });

  // Conflicts wakes on every commit; Indexes also ticks every second: idle,
  // neither sends a frame (before, each tick resent the Indexes page whole).
  for (const [name, path] of [["Conflicts", "/studio/db/" + DB + "/conflicts"], ["Indexes", "/studio/db/" + DB + "/indexes"]]) {
    test("an idle " + name + " page receives no websocket frames", async ({ page }) => {
      await stopWriter();
      const frames = [];
      page.on("websocket", (ws) => ws.on("framereceived", (f) => frames.push({ at: Date.now(), size: (f.payload || "").length, head: String(f.payload).slice(0, 80) })));
      await page.goto(cluster.nodes.A.url + path);
      await waitLive(page);
      await expect.poll(() => frames.length, { timeout: 10_000 }).toBeGreaterThanOrEqual(1); // the first message
      // Replication settling after the last writes, and the conflicts
      // summary, recomputed at most every 2 s, catching up once more.
      await page.waitForTimeout(4500);
      const from = Date.now();
      await page.waitForTimeout(3500);
      const during = frames.filter((f) => f.at >= from);
      expect(during, "frames on an idle page").toEqual([]);
    });
  }
});
