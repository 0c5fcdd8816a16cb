// Bulk conflict resolution and the cluster-wide resolution log (issue 12,
// point 8 and point 2's log) on a real three-node cluster. Replication
// between the nodes runs through small TCP proxies (each node's inbound
// traffic from its peers), so the spec can cut it: the same 190 carts and
// 5 users are written on A and on B while cut, then replication resumes
// and every node holds 195 conflicts (the solver is manual, so they stay).
"use strict";
const { test, expect } = require("@playwright/test");
const net = require("node:net");
const { Cluster } = require("./cluster3");
const { waitLive, shot, until } = require("./helpers");

const DB = "pwbulk";
const CARTS = 190;
const USERS = 5;

// A TCP proxy to a target port set later (refusing while cut or unset).
async function startProxy() {
  const p = { cut: true, target: 0, open: new Set() };
  p.server = net.createServer((client) => {
    if (p.cut || !p.target) {
      client.destroy();
      return;
    }
    const upstream = net.connect(p.target, "127.0.0.1");
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

const cluster = new Cluster("conflicts-bulk");
const proxies = {};

async function conflictTotal(tag) {
  const r = await cluster.api(tag, "GET", "/databases/" + DB + "/replication/conflicts");
  return r.status === 200 ? r.body.TotalResults : -1;
}

async function bulkPut(tag, docs) {
  const r = await cluster.api(tag, "POST", "/databases/" + DB + "/bulk_docs", {
    Commands: docs.map((d) => ({ Id: d.id, Type: "PUT", Document: d.body })),
  });
  if (r.status !== 201) throw new Error("bulk_docs on " + tag + ": " + r.status + " " + JSON.stringify(r.body));
}

function docsFrom(tag) {
  const out = [];
  for (let i = 1; i <= CARTS; i++) out.push({ id: "carts/" + i, body: { by: tag, n: i, "@metadata": { "@collection": "Carts" } } });
  for (let i = 1; i <= USERS; i++) out.push({ id: "users/" + i, body: { name: tag, "@metadata": { "@collection": "Users" } } });
  return out;
}

async function shots(page, name) {
  await page.setViewportSize({ width: 1440, height: 900 });
  await shot(page, name + "-1440");
  await page.setViewportSize({ width: 390, height: 844 });
  await shot(page, name + "-390");
  await page.setViewportSize({ width: 1440, height: 900 });
}

test.describe.serial("bulk conflict resolution on three nodes", () => {
  test.setTimeout(180_000);

  test.beforeAll(async () => {
    test.setTimeout(180_000);
    for (const tag of cluster.tags) proxies[tag] = await startProxy();
    const peers = cluster.tags.map((t) => t + "=http://127.0.0.1:" + proxies[t].port).join(",");
    await cluster.start(["--replication-peers", peers]);
    for (const tag of cluster.tags) {
      proxies[tag].target = Number(cluster.nodes[tag].http.split(":")[1]);
      proxies[tag].setCut(false);
    }
    await cluster.createDatabase(DB);
    const s = await cluster.api("A", "POST", "/admin/replication/conflicts/solver?name=" + DB, { ResolveToLatest: false });
    if (s.status !== 200) throw new Error("solver: " + s.status + " " + JSON.stringify(s.body));
    for (const tag of cluster.tags) {
      await until("manual on " + tag, async () => {
        const r = await cluster.api(tag, "GET", "/databases/" + DB + "/replication/conflicts/solver");
        return r.status === 200 && r.body.ResolveToLatest === false;
      });
    }
    // Concurrent writes of the same ids on A and B while replication is cut.
    for (const tag of cluster.tags) proxies[tag].setCut(true);
    await bulkPut("A", docsFrom("A"));
    await bulkPut("B", docsFrom("B"));
    for (const tag of cluster.tags) proxies[tag].setCut(false);
    for (const tag of cluster.tags) {
      await until(CARTS + USERS + " conflicts on " + tag, async () => (await conflictTotal(tag)) === CARTS + USERS, 90_000);
    }
  });

  test.afterAll(async () => {
    await cluster.stop();
    for (const p of Object.values(proxies)) {
      p.setCut(true);
      p.server.close();
    }
  });

  test("the summary comes first, the form above a list in natural order", async ({ page }) => {
    await page.goto(cluster.nodes.A.url + "/studio/db/" + DB + "/conflicts");
    await waitLive(page);
    const carts = page.locator("[data-testid=summary-row][data-collection=Carts]");
    await expect(carts).toHaveAttribute("data-count", String(CARTS));
    await expect(carts).toHaveAttribute("data-declined", String(CARTS)); // the solver is manual
    await expect(carts.getByTestId("summary-strategy")).toHaveText("manual");
    await expect(carts.getByTestId("summary-outcome")).toContainText(CARTS + " left for a person");
    await expect(page.locator("[data-testid=summary-row][data-collection=Users]")).toHaveAttribute("data-count", String(USERS));
    await expect(page.getByTestId("summary-total")).toHaveText(String(CARTS + USERS));
    // The summary, then the form, then the table.
    const y = async (loc) => (await loc.boundingBox()).y;
    const summaryY = await y(page.getByTestId("summary-table"));
    const formY = await y(page.getByTestId("bulk-form"));
    const tableY = await y(page.getByTestId("conflict-row").first());
    expect(summaryY).toBeLessThan(formY);
    expect(formY).toBeLessThan(tableY);
    // Natural id order: carts/2 before carts/10.
    const ids = await page.locator("[data-testid=conflict-row]").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-id")));
    expect(ids.slice(0, 11)).toEqual(["carts/1", "carts/2", "carts/3", "carts/4", "carts/5", "carts/6", "carts/7", "carts/8", "carts/9", "carts/10", "carts/11"]);
    await expect(page.locator("tbody[data-live-rows] > tr[data-key='carts/10']")).toHaveCount(1);
    await shots(page, "conflicts-bulk");
  });

  test("select all on the page, none, and all in the scope", async ({ page }) => {
    await page.goto(cluster.nodes.A.url + "/studio/db/" + DB + "/conflicts?collection=Carts");
    await waitLive(page);
    const boxes = page.getByTestId("conflict-select");
    await expect(boxes).toHaveCount(50);
    await page.getByTestId("select-all-page").click();
    await expect(page.locator("[data-testid=conflict-select]:checked")).toHaveCount(50);
    await expect(page.getByTestId("bulk-selected-count")).toHaveText("50");
    await expect(page.getByTestId("bulk-scope-selected")).toBeChecked();
    await page.getByTestId("select-none").click();
    await expect(page.locator("[data-testid=conflict-select]:checked")).toHaveCount(0);
    await expect(page.getByTestId("bulk-selected-count")).toHaveText("0");
    // The header box ticks the page too.
    await page.getByTestId("select-page").check();
    await expect(page.locator("[data-testid=conflict-select]:checked")).toHaveCount(50);
    await page.getByTestId("select-page").uncheck();
    await expect(page.locator("[data-testid=conflict-select]:checked")).toHaveCount(0);
    // All N in the scope: every id the filter matches, not only the 50 shown.
    await expect(page.getByTestId("select-all-scope")).toHaveText("All " + CARTS + " in the scope");
    await page.getByTestId("select-all-scope").click();
    await expect(page.getByTestId("bulk-scope-filter")).toBeChecked();
    await expect(page.getByTestId("select-status")).toHaveText("All " + CARTS + " conflicts the filter matches are selected.");
  });

  test("a preview covers all of them; apply runs with progress to the end", async ({ page }) => {
    await page.goto(cluster.nodes.A.url + "/studio/db/" + DB + "/conflicts?collection=Carts");
    await waitLive(page);
    await page.getByTestId("bulk-strategy").selectOption("node:B");
    await page.getByTestId("select-all-scope").click();
    await page.getByTestId("bulk-preview").click();
    await expect(page.getByTestId("preview-body")).toHaveAttribute("data-state", "done");
    await expect(page.getByTestId("preview-summary")).toHaveText(CARTS + " conflicted ids in scope, every one decided: " + CARTS + " would resolve.");
    const rows = page.getByTestId("preview-row");
    await expect(rows).toHaveCount(CARTS);
    const ids = await rows.evaluateAll((rs) => rs.map((r) => r.getAttribute("data-id")));
    expect(ids[0]).toBe("carts/1");
    expect(ids[1]).toBe("carts/2");
    expect(ids[9]).toBe("carts/10");
    expect(ids[CARTS - 1]).toBe("carts/" + CARTS);
    await expect(page.locator("[data-testid=preview-row][data-id='carts/10']").getByTestId("preview-outcome")).toContainText("wins");
    await expect(page.getByTestId("bulk-apply")).toHaveText("Apply to " + CARTS + " conflicts");
    await shots(page, "conflicts-bulk-preview");

    await page.getByTestId("bulk-apply").click();
    await expect(page.getByTestId("flash")).toContainText(/Operation \d+ started: node:B on 190 previewed conflicts/);
    await waitLive(page);
    const op = page.getByTestId("op").first();
    await expect(op.getByTestId("op-progress")).toHaveAttribute("max", String(CARTS));
    await expect(op).toHaveAttribute("data-state", "done");
    await expect(op.getByTestId("op-progress")).toHaveAttribute("value", String(CARTS));
    await expect(op.getByTestId("op-done")).toHaveText(CARTS + "/" + CARTS);
    await expect(op.getByTestId("op-resolved")).toHaveText(String(CARTS));
    await expect(page.getByTestId("conflicts-total")).toHaveText("0"); // the Carts filter: none left
    await shots(page, "conflicts-bulk-done");
    // The resolutions replicate: no cart is in conflict anywhere.
    for (const tag of cluster.tags) await until("carts resolved on " + tag, async () => (await conflictTotal(tag)) === USERS, 60_000);
  });

  test("the log on B lists A's resolutions, marked with node A; restore in one click", async ({ page }) => {
    await page.goto(cluster.nodes.B.url + "/studio/db/" + DB + "/conflicts/log?by=bulk");
    await expect(page.locator("[data-testid=log-node][data-node=A]")).toHaveAttribute("data-state", "answered");
    await expect(page.locator("[data-testid=log-node][data-node=B]")).toHaveAttribute("data-state", "answered");
    await expect(page.locator("[data-testid=log-node][data-node=C]")).toHaveAttribute("data-state", "answered");
    await expect(page.getByTestId("log-total")).toHaveText(String(CARTS));
    const entries = page.getByTestId("log-entry");
    await expect(entries).toHaveCount(25);
    const nodes = await entries.evaluateAll((rs) => rs.map((r) => r.getAttribute("data-node")));
    expect(new Set(nodes)).toEqual(new Set(["A"]));
    await expect(entries.first().getByTestId("log-entry-node")).toHaveText("A");
    await expect(entries.first().getByTestId("log-entry-by")).toContainText("bulk operation");
    await shots(page, "conflicts-bulk-log");

    // One click on carts/7's row restores A's version (node:B won).
    await page.goto(cluster.nodes.B.url + "/studio/db/" + DB + "/conflicts/log?id=carts/7");
    const entry = page.locator("[data-testid=log-entry][data-id='carts/7'][data-node=A]");
    await expect(entry).toHaveCount(1);
    await expect(entry.getByTestId("restore-submit")).toHaveCount(1);
    await entry.getByTestId("restore-submit").click();
    await expect(page.getByTestId("flash")).toContainText("on node A");
    for (const tag of cluster.tags) {
      await until("carts/7 restored on " + tag, async () => {
        const r = await cluster.api(tag, "GET", "/databases/" + DB + "/docs?id=carts/7");
        return r.status === 200 && r.body.Results[0].by === "A";
      });
    }
  });

  test("a node that does not answer is named, never shown as empty", async ({ page }) => {
    await cluster.kill9("C");
    await page.goto(cluster.nodes.B.url + "/studio/db/" + DB + "/conflicts/log");
    await expect(page.locator("[data-testid=log-node][data-node=C]")).toHaveAttribute("data-state", "unreachable");
    await expect(page.getByTestId("log-node-unreachable")).toContainText("unreachable");
    await expect(page.locator("[data-testid=log-node][data-node=A]")).toHaveAttribute("data-state", "answered");
  });
});
