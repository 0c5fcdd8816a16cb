// The documents grid on a three-node cluster (issue 12, points 4 and 5):
// real conflicts made by writing the same ids on two nodes while
// replication is cut are visible on every node, with a badge linking to
// their resolution, and counted in the collection list and on Stats; the
// column chooser, page size and go to id work and stay in the URL; rows
// stay one line.
//
// Replication between the nodes goes through small TCP proxies
// (--replication-peers), one per destination node, that this spec can cut.
"use strict";
const { test, expect } = require("@playwright/test");
const net = require("node:net");
const { Cluster } = require("./cluster3");
const { waitLive, shot, until } = require("./helpers");

const DB = "pwgrid";

// A TCP proxy to a node's HTTP port (looked up when a connection comes, as
// the cluster picks its ports when it starts). Cut: it refuses connections
// and drops the open ones.
async function startProxy(target) {
  const p = { cut: false, open: new Set() };
  p.server = net.createServer((client) => {
    if (p.cut) {
      client.destroy();
      return;
    }
    const upstream = net.connect(target(), "127.0.0.1");
    const pair = () => {
      client.destroy();
      upstream.destroy();
      p.open.delete(pair);
    };
    p.open.add(pair);
    client.pipe(upstream);
    upstream.pipe(client);
    for (const s of [client, upstream]) {
      s.on("error", pair);
      s.on("close", pair);
    }
  });
  await new Promise((resolve) => p.server.listen(0, "127.0.0.1", resolve));
  p.port = p.server.address().port;
  p.setCut = (cut) => {
    p.cut = cut;
    if (cut) for (const pair of [...p.open]) pair();
  };
  return p;
}

const cluster = new Cluster("docsgrid");
const proxies = {};
const tags = ["A", "B", "C"];

async function stats(tag) {
  const r = await cluster.api(tag, "GET", "/databases/" + DB + "/stats");
  if (r.status !== 200) throw new Error("stats on " + tag + ": " + r.status);
  return r.body;
}

async function put(tag, id, body) {
  const r = await cluster.api(tag, "PUT", "/databases/" + DB + "/docs?id=" + encodeURIComponent(id), body);
  if (r.status !== 201) throw new Error("put " + id + " on " + tag + ": " + r.status + " " + JSON.stringify(r.body));
}

const row = (page, id) => page.locator(`[data-testid=doc-row][data-id="${id}"]`);
const conflicted = ["orders/2", "orders/10", "carts/1"];

test.describe.serial("documents grid on a three-node cluster", () => {
  test.setTimeout(180_000);

  test.beforeAll(async () => {
    test.setTimeout(180_000);
    for (const tag of tags) proxies[tag] = await startProxy(() => Number(cluster.nodes[tag].http.split(":")[1]));
    const peers = tags.map((t) => t + "=http://127.0.0.1:" + proxies[t].port).join(",");
    await cluster.start(["--replication-peers", peers]);
    await cluster.createDatabase(DB);
    // Keep conflicts for a person: the default would resolve them on arrival.
    const s = await cluster.api("A", "POST", "/admin/replication/conflicts/solver?name=" + DB, { ResolveToLatest: false });
    if (s.status !== 200) throw new Error("solver: " + s.status);
    for (const tag of tags) {
      await until("manual solver on " + tag, async () => {
        const r = await cluster.api(tag, "GET", "/databases/" + DB + "/replication/conflicts/solver");
        return r.status === 200 && r.body.ResolveToLatest === false;
      });
    }
    // 30 orders with nested and long values, 3 users; replicated everywhere.
    const commands = [];
    for (let i = 1; i <= 30; i++) {
      commands.push({ Id: "orders/" + i, Type: "PUT", Document: {
        Company: "companies/" + i, Lines: [{ p: 1 }, { p: 2 }, { p: 3 }], ShipTo: { City: "Oslo", Zip: "0150", Street: "Karl Johans gate " + i },
        Note: "a long note that goes on and on ".repeat(6) + i, Total: i * 10, "@metadata": { "@collection": "Orders" } } });
    }
    for (let i = 1; i <= 3; i++) commands.push({ Id: "users/" + i, Type: "PUT", Document: { Name: "U" + i, "@metadata": { "@collection": "Users" } } });
    const r = await cluster.api("A", "POST", "/databases/" + DB + "/bulk_docs", { Commands: commands });
    if (r.status !== 201) throw new Error("bulk_docs: " + r.status);
    for (const tag of tags) await until("33 documents on " + tag, async () => (await stats(tag)).CountOfDocuments === 33);

    // Real conflicts: replication cut, the same ids written on A and on B,
    // then let through; every node ends up holding the three conflicts.
    for (const tag of tags) proxies[tag].setCut(true);
    for (const [tag, who] of [["A", "A"], ["B", "B"]]) {
      await put(tag, "orders/2", { Company: "companies/2", Total: who === "A" ? 1 : 2, By: who, "@metadata": { "@collection": "Orders" } });
      await put(tag, "orders/10", { Company: "companies/10", Total: who === "A" ? 3 : 4, By: who, "@metadata": { "@collection": "Orders" } });
      await put(tag, "carts/1", { Items: who === "A" ? [1] : [1, 2], By: who, "@metadata": { "@collection": "Carts" } });
    }
    for (const tag of tags) proxies[tag].setCut(false);
    for (const tag of tags) {
      await until("3 conflicts on " + tag, async () => (await stats(tag)).CountOfDocumentsConflicts === 3, 60_000);
    }
  });

  test.afterAll(async () => {
    await cluster.stop();
    for (const p of Object.values(proxies)) {
      p.setCut(true);
      p.server.close();
    }
  });

  test("conflicted ids are visible with a badge and counted, on every node", async ({ page }) => {
    for (const tag of tags) {
      const url = cluster.nodes[tag].url;
      await page.goto(url + "/studio/db/" + DB + "/documents");
      await waitLive(page);
      for (const id of conflicted) {
        const r = row(page, id);
        await expect(r, id + " on " + tag).toHaveAttribute("data-conflict", "true");
        await expect(r).toHaveAttribute("data-key", id);
        const badge = r.getByTestId("doc-conflict-badge");
        await expect(badge).toBeVisible();
        await expect(badge).toHaveAttribute("href", "/studio/db/" + DB + "/conflicts/doc?id=" + encodeURIComponent(id));
        await expect(r.getByTestId("doc-row-cv")).toHaveText("2 versions");
      }
      await expect(page.locator("tbody[data-live-rows] tr[data-key]")).toHaveCount(34);
      // Counts: documents and conflicted ids, and how many are conflicted.
      const coll = (name) => page.locator(`[data-testid=collection-link][data-collection="${name}"]`);
      await expect(coll("").getByTestId("collection-count")).toHaveText("34");
      await expect(coll("").getByTestId("collection-conflicts")).toHaveText("3 conflicted");
      await expect(coll("Orders").getByTestId("collection-count")).toHaveText("30");
      await expect(coll("Orders").getByTestId("collection-conflicts")).toHaveText("2 conflicted");
      await expect(coll("Carts").getByTestId("collection-count")).toHaveText("1"); // all of it conflicted: still listed
      await expect(coll("Carts").getByTestId("collection-conflicts")).toHaveText("1 conflicted");
      await expect(coll("Users").getByTestId("collection-conflicts")).toHaveCount(0);
      await expect(page.getByTestId("documents-count")).toHaveText(/34 documents\s*·\s*3 conflicted/);

      // The badge leads to the resolution page of that id.
      await row(page, "carts/1").getByTestId("doc-conflict-badge").click();
      await expect(page).toHaveURL(/\/conflicts\/doc\?id=carts%2F1$/);

      // Stats: documents include them; the conflict counts.
      await page.goto(url + "/studio/db/" + DB + "/stats");
      await expect(page.getByTestId("stats-docs")).toHaveText("34");
      await expect(page.getByTestId("stats-conflicts")).toHaveText("3");
      await expect(page.getByTestId("stats-conflict-versions")).toHaveText("6 versions");
      await expect(page.locator("[data-testid=stats-collection-row][data-collection=Carts] [data-testid=stats-collection-conflicted]")).toHaveText("1");
      const api = await stats(tag);
      expect(api.CountOfDocumentsConflicts).toBe(3);
      expect(api.CountOfConflicts).toBe(6);
    }
  });

  test("rows stay one line; long values end in an ellipsis and show whole on hover", async ({ page }) => {
    await page.setViewportSize({ width: 1440, height: 900 });
    await page.goto(cluster.nodes.A.url + "/studio/db/" + DB + "/documents?collection=Orders");
    await waitLive(page);
    await expect(page.getByTestId("doc-column")).toHaveText(["Company", "Lines", "ShipTo", "Note"]);
    const r5 = row(page, "orders/5");
    await expect(r5.getByTestId("doc-cell").nth(1)).toHaveText("[3 items]");
    await expect(r5.getByTestId("doc-cell").nth(2)).toHaveText("{3 fields}");
    await expect(r5.getByTestId("doc-cell").nth(2)).toHaveAttribute("title", /"City":"Oslo"/);
    // The long note: cut by its width, whole in the tooltip.
    const note = r5.getByTestId("doc-cell").nth(3);
    await expect(note).toHaveAttribute("title", /on and on a long note/);
    expect(await note.evaluate((el) => el.scrollWidth > el.clientWidth && getComputedStyle(el).textOverflow === "ellipsis")).toBe(true);
    const cv = r5.getByTestId("doc-row-cv");
    expect(await cv.evaluate((el) => el.title.length > 0 && el.title === el.textContent)).toBe(true);
    // Every row is as high as a one-line row (a row with a short value).
    const oneLine = await page.evaluate(() => {
      const td = document.querySelector("[data-testid=doc-row] td");
      const lh = parseFloat(getComputedStyle(td).lineHeight);
      const pad = parseFloat(getComputedStyle(td).paddingTop) + parseFloat(getComputedStyle(td).paddingBottom);
      return lh + pad + 1; // + the row's border
    });
    const heights = await page.locator("[data-testid=doc-row]").evaluateAll((rows) => rows.map((r) => r.getBoundingClientRect().height));
    expect(heights.length).toBe(30);
    for (const h of heights) expect(h).toBeLessThanOrEqual(oneLine + 1);
    expect(Math.max(...heights) - Math.min(...heights)).toBeLessThanOrEqual(1);
    await shot(page, "documents-grid-1440");

    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(cluster.nodes.A.url + "/studio/db/" + DB + "/documents?collection=Orders");
    const heights390 = await page.locator("[data-testid=doc-row]").evaluateAll((rows) => rows.map((r) => r.getBoundingClientRect().height));
    expect(Math.max(...heights390) - Math.min(...heights390)).toBeLessThanOrEqual(1);
    // The grid scrolls inside its own box, not the page.
    const wrap = page.locator(".docs-scroll");
    expect(await wrap.evaluate((el) => getComputedStyle(el).overflowX)).toBe("auto");
    await shot(page, "documents-grid-390");
  });

  test("column chooser, page size and go to id stay in the URL, live updates keep them", async ({ page }) => {
    await page.setViewportSize({ width: 1440, height: 900 });
    const base = cluster.nodes.B.url + "/studio/db/" + DB + "/documents";
    await page.goto(base + "?collection=Orders");
    // Columns: Total and Company only.
    await page.getByTestId("column-chooser-open").click();
    for (const f of ["Lines", "ShipTo", "Note"]) await page.locator(`[data-testid=column-choice][data-field="${f}"]`).uncheck();
    await page.locator('[data-testid=column-choice][data-field="Total"]').check();
    await page.getByTestId("column-apply").click();
    await expect(page).toHaveURL(/col=Company&col=Total/);
    await expect(page.getByTestId("doc-column")).toHaveText(["Company", "Total"]);
    await expect(row(page, "orders/3").getByTestId("doc-cell").nth(1)).toHaveText("30");

    // Page size 25: 25 rows, the next page keeps size and columns.
    await page.locator("[data-testid=page-size][data-size='25']").click();
    await expect(page).toHaveURL(/size=25/);
    await expect(page.getByTestId("doc-row")).toHaveCount(25);
    await expect(page.locator("[data-testid=page-size][data-size='25']")).toHaveAttribute("aria-current", "page");
    await waitLive(page);
    // A write on another node arrives live: the chosen view stays.
    await put("C", "orders/31", { Company: "companies/31", Total: 310, "@metadata": { "@collection": "Orders" } });
    await expect(row(page, "orders/31")).toBeVisible();
    await expect(page.getByTestId("doc-column")).toHaveText(["Company", "Total"]);
    await expect(page.getByTestId("doc-row")).toHaveCount(25);
    await page.getByTestId("next-page").click();
    await expect(page).toHaveURL(/before=\d+/);
    await expect(page).toHaveURL(/size=25/);
    await expect(page.getByTestId("doc-column")).toHaveText(["Company", "Total"]);
    await expect(page.getByTestId("doc-row")).toHaveCount(6); // 31 rows: 25 + 6

    // Go to id: the page starting at that id, the row marked.
    await page.getByTestId("goto-id").fill("orders/7");
    await page.getByTestId("goto-submit").click();
    await expect(page).toHaveURL(/hl=orders%2F7/);
    await expect(page.getByTestId("doc-row").first()).toHaveAttribute("data-id", "orders/7");
    await expect(row(page, "orders/7")).toHaveClass(/row-current/);
    await expect(page.getByTestId("doc-column")).toHaveText(["Company", "Total"]);
    // A conflicted id too; an unknown one says so.
    await page.getByTestId("goto-id").fill("orders/10");
    await page.getByTestId("goto-submit").click();
    await expect(row(page, "orders/10")).toHaveClass(/row-current/);
    await expect(row(page, "orders/10")).toHaveAttribute("data-conflict", "true");
    await page.getByTestId("goto-id").fill("orders/999");
    await page.getByTestId("goto-submit").click();
    await expect(page.getByText('No document has the id "orders/999"')).toBeVisible();
    await shot(page, "documents-grid-options");
  });
});
