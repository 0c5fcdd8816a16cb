// Issue 12, points 7, 3 (the dashboard's node states) and 2 (the
// replication matrix), on a real three-node cluster: the dashboard's charts
// are drawn with axes, units and hover values; B's dashboard shows C
// unreachable (never "Follower") after kill -9 and reachable again after a
// restart; the replication matrix on a follower has all six links with
// their lag.
"use strict";
const { test, expect } = require("@playwright/test");
const { Cluster } = require("./cluster3");
const { shot, until } = require("./helpers");

const DB = "dash";

test.describe.serial("dashboard and replication matrix on three nodes", () => {
  test.setTimeout(180_000);
  const cluster = new Cluster("dashboard");
  let writer = null;
  let stopWriting = false;

  test.beforeAll(async () => {
    test.setTimeout(180_000);
    // Charts sampled every second so the test need not wait 5 s a point.
    await cluster.start(["--history-interval", "1s"]);
    await cluster.createDatabase(DB);
    const r = await cluster.api("A", "PUT", "/databases/" + DB + "/subscriptions", { Query: "from Orders", Name: "feed" });
    if (r.status !== 201) throw new Error("subscription: " + r.status + " " + JSON.stringify(r.body));
    // Writes go on throughout, on A.
    let n = 0;
    writer = (async () => {
      while (!stopWriting) {
        const cmds = [];
        for (let i = 0; i < 5; i++, n++) cmds.push({ Id: "orders/" + n, Type: "PUT", Document: { Total: n, "@metadata": { "@collection": "Orders" } } });
        try {
          await cluster.api("A", "POST", "/databases/" + DB + "/bulk_docs", { Commands: cmds });
        } catch (e) {}
        await new Promise((r) => setTimeout(r, 200));
      }
    })();
  });

  test.afterAll(async () => {
    stopWriting = true;
    if (writer) await writer;
    await cluster.stop();
  });

  const chart = (page, id) => page.getByTestId(id);

  test("charts have axes with units, one line per row on a shared scale, and values on hover", async ({ page }) => {
    await page.setViewportSize({ width: 1440, height: 1000 });
    await page.goto(cluster.nodes.B.url + "/studio/");
    for (const [id, unit] of [["chart-writes", "writes/s"], ["chart-repl-items", "items"], ["chart-repl-seconds", "seconds"], ["chart-sub-backlog", "docs"]]) {
      const c = chart(page, id);
      await expect(c).toHaveAttribute("data-drawn", "true", { timeout: 30_000 });
      // uPlot's axis elements, its tick labels and the unit of the y axis.
      await expect(c.locator(".u-axis")).toHaveCount(2);
      await expect(c).toHaveAttribute("data-y-label", unit);
      await expect(c).toHaveAttribute("data-y-ticks", /^0(,[0-9.kM]+)+$/);
      expect(Number(await c.getAttribute("data-x-ticks"))).toBeGreaterThanOrEqual(2);
      await expect(c.locator("[data-chart-plot]")).toHaveAttribute("aria-label", new RegExp("^Time on x, " + unit.replace("/", "\\/") + " on y"));
    }
    // Every link of the cluster on one chart (six: A→B, A→C, B→A, ...).
    await expect(chart(page, "chart-repl-items")).toHaveAttribute("data-series", "6", { timeout: 30_000 });
    const legend = chart(page, "chart-repl-items").locator(".u-legend .u-series .u-label");
    await expect(legend).toHaveCount(7); // time + six links
    await expect(legend.filter({ hasText: "A → B · " + DB })).toHaveCount(1);
    await expect(legend.filter({ hasText: "C → A · " + DB })).toHaveCount(1);
    // One y scale for the six lines: the plot has a single y axis.
    await expect(chart(page, "chart-repl-items").locator(".u-axis")).toHaveCount(2);
    await expect(chart(page, "chart-sub-backlog").locator(".u-legend .u-label").filter({ hasText: "feed · " + DB })).toHaveCount(1);

    // Hover: the legend shows the values under the pointer, with the unit.
    const writes = chart(page, "chart-writes");
    await expect.poll(async () => Number(await writes.getAttribute("data-points")), { timeout: 20_000 }).toBeGreaterThanOrEqual(4);
    const over = writes.locator(".u-over");
    const box = await over.boundingBox();
    await page.mouse.move(box.x + box.width - 4, box.y + box.height / 2);
    await expect(writes.locator(".u-legend .u-series").nth(1).locator(".u-value")).toHaveText(/^[0-9.,kM]+ writes\/s$/);
    await expect(writes.locator(".u-legend .u-series").first().locator(".u-value")).not.toHaveText("--");
    await shot(page, "dashboard-1440");

    // The charts fit a phone's width and keep drawing.
    await page.setViewportSize({ width: 390, height: 900 });
    await expect.poll(async () => (await writes.locator("canvas").boundingBox()).width).toBeLessThanOrEqual(390);
    await shot(page, "dashboard-390");
  });

  test("B's dashboard shows C unreachable after kill -9, and reachable again after a restart", async ({ page }) => {
    await page.setViewportSize({ width: 1440, height: 1000 });
    await page.goto(cluster.nodes.B.url + "/studio/");
    const rowC = page.locator("[data-testid=node-row][data-node=C]");
    await expect(rowC).toHaveAttribute("data-reachable", "true");
    await expect(rowC.getByTestId("node-state")).toHaveText(/^(Follower|Leader)$/);

    await cluster.kill9("C");
    await expect(rowC).toHaveAttribute("data-reachable", "false", { timeout: 15_000 });
    await expect(rowC.getByTestId("node-state")).toHaveText("Unreachable");
    await expect(rowC).not.toContainText("Follower");
    await expect(rowC.getByTestId("node-since")).toContainText(/since \d\d:\d\d:\d\d UTC/);
    await expect(page.getByTestId("dash-nodes-unreachable")).toHaveText("1 unreachable");
    // The lag charts say C did not answer instead of drawing its links as 0.
    await expect(page.getByTestId("chart-repl-items-note")).toContainText("Node C did not answer", { timeout: 15_000 });
    // The same on A's dashboard: every node's dashboard tells the truth.
    const pageA = await page.context().newPage();
    await pageA.goto(cluster.nodes.A.url + "/studio/");
    await expect(pageA.locator("[data-testid=node-row][data-node=C]")).toHaveAttribute("data-reachable", "false", { timeout: 15_000 });
    await pageA.close();
    await shot(page, "dashboard-node-down-1440");

    cluster.startNode("C");
    await cluster.ready("C");
    await expect(rowC).toHaveAttribute("data-reachable", "true", { timeout: 30_000 });
    await expect(rowC.getByTestId("node-state")).toHaveText(/^(Follower|Leader)$/);
    await expect(rowC.getByTestId("node-since")).toContainText("reachable since");
    await expect(page.getByTestId("dash-nodes-unreachable")).toHaveCount(0);
  });

  test("the replication matrix on a follower shows all six links with their lag", async ({ page }) => {
    const leader = await cluster.leader();
    const follower = ["A", "B", "C"].find((t) => t !== leader);
    await page.setViewportSize({ width: 1440, height: 1000 });
    await page.goto(cluster.nodes[follower].url + "/studio/db/" + DB + "/replication");
    const cells = page.getByTestId("repl-cell");
    await expect(cells).toHaveCount(6);
    for (const src of ["A", "B", "C"]) {
      for (const dst of ["A", "B", "C"]) {
        if (src === dst) continue;
        const cell = page.locator(`[data-testid=repl-cell][data-source="${src}"][data-destination="${dst}"]`);
        await expect(cell).toHaveAttribute("data-state", "connected", { timeout: 30_000 });
        await expect(cell).toHaveAttribute("data-items", /^\d+$/);
        await expect(cell).toHaveAttribute("data-seconds", /^\d+\.\d{3}$/);
        await expect(cell).toContainText(/\d+ items/);
      }
    }
    await expect(page.locator("[data-testid=repl-matrix-row][data-reachable=true]")).toHaveCount(3);
    await expect(page.getByTestId("chart-repl-items")).toHaveAttribute("data-series", "6", { timeout: 30_000 });
    await shot(page, "replication-1440");
    await page.setViewportSize({ width: 390, height: 900 });
    await shot(page, "replication-390");
  });
});
