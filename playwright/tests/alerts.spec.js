// The notification center on a real three-node cluster (cluster3.js):
// conflicts raise an alert that clears when they are resolved, kill -9 of
// a node raises "unreachable" on the others and its restart clears it, a
// leader change raises an alert, dismiss and postpone work and survive a
// restart of the node, and the header's Alerts link is reached with Tab.
"use strict";
const { test, expect } = require("@playwright/test");
const { Cluster } = require("./cluster3");
const { shot, until } = require("./helpers");

const cluster = new Cluster("alerts");
const DB = "pwalerts";
const CONFLICTS = "conflicts/" + DB;

const url = (tag, path) => cluster.nodes[tag].url + path;
const row = (page, key) => page.locator(`[data-testid=alert-row][data-key="${key}"]`);

async function notifications(tag, hidden) {
  const r = await cluster.api(tag, "GET", "/admin/notifications" + (hidden ? "?hidden=true" : ""));
  if (r.status !== 200) throw new Error("notifications on " + tag + ": " + r.status);
  return r.body;
}

async function entry(tag, key, hidden) {
  return (await notifications(tag, hidden)).Alerts.find((a) => a.Key === key);
}

async function conflictTotal(tag) {
  const r = await cluster.api(tag, "GET", "/databases/" + DB + "/replication/conflicts");
  return r.status === 200 ? r.body.TotalResults : -1;
}

// makeConflicts writes the same ids on A and B at once, each in one
// transaction, until replication meets concurrent versions (the database
// keeps conflicts for a person).
async function makeConflicts() {
  for (let round = 0; round < 10; round++) {
    const ids = Array.from({ length: 100 }, (_, i) => `orders/${round}-${i}`);
    const body = (tag) => ({ Commands: ids.map((id) => ({ Id: id, Type: "PUT", Document: { by: tag, "@metadata": { "@collection": "Orders" } } })) });
    const [a, b] = await Promise.all([
      cluster.api("A", "POST", "/databases/" + DB + "/bulk_docs", body("A")),
      cluster.api("B", "POST", "/databases/" + DB + "/bulk_docs", body("B")),
    ]);
    if (a.status !== 201 || b.status !== 201) throw new Error("bulk_docs: " + a.status + " " + b.status);
    try {
      await until("conflicts on A", async () => (await conflictTotal("A")) > 0, 5_000);
      return;
    } catch (e) {}
  }
  throw new Error("no conflict after 10 rounds of concurrent writes");
}

// reloadUntil reloads the page until fn holds (alerts of other nodes are
// fetched every 2 s; the page is live, but a reload also works whatever
// the live script does with new rows).
async function reloadUntil(page, what, fn, ms) {
  await until(what, async () => {
    await page.reload();
    return await fn();
  }, ms || 30_000);
}

test.describe.serial("alerts on a three-node cluster", () => {
  test.setTimeout(180_000);

  test.beforeAll(async () => {
    test.setTimeout(180_000);
    await cluster.start(["--alert-node-unreachable", "3s"]);
    await cluster.createDatabase(DB);
    const s = await cluster.api("A", "POST", "/admin/replication/conflicts/solver?name=" + DB, { ResolveToLatest: false });
    if (s.status !== 200) throw new Error("solver: " + s.status + " " + JSON.stringify(s.body));
    for (const tag of ["A", "B", "C"]) {
      await until(tag + " keeps conflicts", async () => {
        const r = await cluster.api(tag, "GET", "/databases/" + DB + "/replication/conflicts/solver");
        return r.status === 200 && r.body.ResolveToLatest === false;
      });
    }
  });

  test.afterAll(async () => {
    await cluster.stop();
  });

  test("conflicts raise an alert; dismiss, postpone and a restart of the node; resolved, it clears", async ({ page }) => {
    await makeConflicts();
    await page.goto(url("A", "/studio/alerts"));
    await expect(page.getByTestId("alerts-page")).toBeVisible();
    await reloadUntil(page, "the conflicts alert on A's page", async () => (await row(page, CONFLICTS).count()) === 1);
    const r = row(page, CONFLICTS);
    await expect(r.getByTestId("alert-level")).toHaveText("Warning");
    await expect(r.getByTestId("alert-title")).toContainText(/\d+ conflicted documents? in pwalerts/);
    await expect(r.getByTestId("alert-link")).toHaveAttribute("href", "/studio/db/" + DB + "/conflicts");
    await expect(r.getByTestId("alert-nodes")).toContainText("A");
    await expect(r.getByTestId("alert-first-seen")).toHaveAttribute("datetime", /T/);
    await expect(page.getByTestId("alerts-scope")).toContainText("A (this node)");
    const count = Number(await page.getByTestId("alerts-count").textContent());
    expect(count).toBeGreaterThanOrEqual(1);
    await expect(page.getByTestId("alerts-link")).toHaveAttribute("aria-label", "Alerts: " + count + " open");
    const firstSeen = await r.getByTestId("alert-first-seen").getAttribute("datetime");

    for (const [w, h] of [[1440, 900], [390, 844]]) {
      await page.setViewportSize({ width: w, height: h });
      // The page's own content never needs sideways scrolling (the header
      // and the sidebar at 390 px are the layout's: layout.spec.js).
      const sideways = await page.evaluate(() => {
        const m = document.getElementById("main");
        const body = document.getElementById("alerts-body");
        return Math.max(m.scrollWidth - m.clientWidth, body.scrollWidth - body.clientWidth);
      });
      expect(sideways, "horizontal scroll inside the page at " + w + " px").toBeLessThanOrEqual(0);
      await shot(page, "alerts-" + w);
    }
    await page.setViewportSize({ width: 1440, height: 900 });

    // Dismiss: hidden on every node that holds it, the count drops.
    await r.getByTestId("alert-dismiss").click();
    await expect(page.getByTestId("flash")).toContainText("Dismissed");
    await expect(row(page, CONFLICTS)).toHaveCount(0);
    await expect(page.getByTestId("alerts-count")).toHaveText(String(count - 1));
    // B merges the other nodes' lists as last fetched (every 2 s).
    await until("dismissed as seen from B", async () => {
      const d = await entry("B", CONFLICTS, true);
      return d && d.Hidden && d.Dismissed;
    }, 15_000);
    // Shown again.
    await page.getByTestId("alerts-show-hidden").click();
    await expect(row(page, CONFLICTS).getByTestId("alert-hidden-state")).toContainText("Dismissed until its condition clears");
    await row(page, CONFLICTS).getByTestId("alert-restore").click();
    await expect(page.getByTestId("flash")).toContainText("shows again");
    await page.goto(url("A", "/studio/alerts"));
    await expect(row(page, CONFLICTS)).toHaveCount(1);

    // Postpone for a day.
    await row(page, CONFLICTS).getByTestId("alert-postpone-for").selectOption("1d");
    await row(page, CONFLICTS).getByTestId("alert-postpone").click();
    await expect(page.getByTestId("flash")).toContainText("Postponed");
    await expect(row(page, CONFLICTS)).toHaveCount(0);
    const postponed = await entry("A", CONFLICTS, true);
    expect(postponed.Hidden && !postponed.Dismissed).toBeTruthy();
    expect(new Date(postponed.PostponedUntil).getTime()).toBeGreaterThan(Date.now() + 23 * 3600_000);

    // kill -9 of A and a restart: the alert, its first-seen time and its
    // postponement are still there.
    await cluster.kill9("A");
    cluster.startNode("A");
    await cluster.ready("A");
    await page.goto(url("A", "/studio/alerts?hidden=1"));
    await expect(row(page, CONFLICTS)).toHaveCount(1);
    await expect(row(page, CONFLICTS).getByTestId("alert-hidden-state")).toContainText("Postponed until");
    await expect(row(page, CONFLICTS).getByTestId("alert-first-seen")).toHaveAttribute("datetime", firstSeen);
    await row(page, CONFLICTS).getByTestId("alert-restore").click();
    await expect(page.getByTestId("flash")).toContainText("shows again");

    // Resolved (on A; the resolutions replicate): the alert clears on every node.
    const op = await cluster.api("A", "POST", "/databases/" + DB + "/conflicts/operations", { Strategy: "latest", Scope: {} });
    expect(op.status, JSON.stringify(op.body)).toBeLessThan(300);
    for (const tag of ["A", "B", "C"]) await until("no conflicts on " + tag, async () => (await conflictTotal(tag)) === 0, 60_000);
    await page.goto(url("A", "/studio/alerts"));
    await reloadUntil(page, "the conflicts alert clears", async () => (await row(page, CONFLICTS).count()) === 0);
    await until("cleared as seen from B", async () => (await entry("B", CONFLICTS, true)) === undefined, 15_000);
  });

  test("kill -9 of C raises 'node unreachable' on A and B; its restart clears it", async ({ page }) => {
    await cluster.kill9("C");
    await page.goto(url("A", "/studio/alerts"));
    await reloadUntil(page, "C unreachable on A's page", async () => (await row(page, "node-unreachable/C").count()) === 1);
    const r = row(page, "node-unreachable/C");
    await expect(r.getByTestId("alert-level")).toHaveText("Error");
    await expect(r.getByTestId("alert-title")).toHaveText("Node C is unreachable");
    await expect(r.getByTestId("alert-link")).toHaveAttribute("href", "/studio/cluster");
    await until("seen by A and B", async () => (await r.getByTestId("alert-nodes").textContent()) === "A, B");
    await expect(page.locator("[data-testid=alerts-node-missing][data-node=C]")).toBeVisible();
    await shot(page, "alerts-node-down-1440");
    await until("A and B as seen from B", async () => {
      const onB = await entry("B", "node-unreachable/C");
      return onB && onB.Nodes.join(",") === "A,B";
    }, 15_000);

    cluster.startNode("C");
    await cluster.ready("C");
    await reloadUntil(page, "C back: cleared", async () => (await row(page, "node-unreachable/C").count()) === 0);
    await until("cleared on B", async () => (await entry("B", "node-unreachable/C", true)) === undefined);
  });

  test("a leader change raises an alert on every node", async ({ page }) => {
    const before = await cluster.leader();
    const since = Date.now();
    const r = await cluster.api(before, "POST", "/admin/cluster/stepdown");
    expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
    let after;
    await until("a new leader", async () => {
      after = await cluster.leader();
      return after && after !== before;
    });
    for (const tag of ["A", "B", "C"]) {
      await until("the leader alert on " + tag, async () => {
        const e = await entry(tag, "cluster-leader/changes", true);
        return e && new Date(e.LastSeen).getTime() >= since - 1000 && e.Reports.some((x) => x.Node === tag);
      });
    }
    await page.goto(url("B", "/studio/alerts"));
    await reloadUntil(page, "the leader alert on B's page", async () => (await row(page, "cluster-leader/changes").count()) === 1);
    await expect(row(page, "cluster-leader/changes").getByTestId("alert-title")).toContainText(/Leader changed: node [A-C] leads|leader changes or elections|kept the lead/);
    await expect(row(page, "cluster-leader/changes").getByTestId("alert-nodes")).toHaveText("A, B, C");
  });

  test("the Alerts link is reached with the keyboard and opens the page", async ({ page }) => {
    await page.goto(url("A", "/studio/"));
    const link = page.getByTestId("alerts-link");
    await expect(link).toHaveAttribute("aria-label", /^Alerts: (none|\d+) open$/);
    let reached = false;
    for (let i = 0; i < 30 && !reached; i++) {
      await page.keyboard.press("Tab");
      reached = await link.evaluate((el) => document.activeElement === el);
    }
    expect(reached, "Tab reaches the Alerts link").toBe(true);
    await page.keyboard.press("Enter");
    await expect(page).toHaveURL(/\/studio\/alerts$/);
    await expect(page.getByTestId("alerts-page")).toBeVisible();
    await expect(page.getByTestId("alerts-announce")).toHaveAttribute("aria-live", "polite");
  });
});
