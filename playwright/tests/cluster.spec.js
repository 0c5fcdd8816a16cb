// The Cluster page against a real three-node cluster started by this spec
// (the global setup's single node is not used): A bootstraps, B and C join
// it. The page is watched from B while the leader is killed, stepped down
// from the page, and a dead node is removed and added back.
"use strict";
const { test, expect } = require("@playwright/test");
const { spawn } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { waitLive, shot, freePort, until, studioBinary } = require("./helpers");

async function status(url) {
  const r = await fetch(url + "/admin/cluster/status", { signal: AbortSignal.timeout(1000) });
  if (r.status !== 200) throw new Error("status " + r.status);
  return r.json();
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "rookery-pw-cluster-"));
const nodes = {}; // tag -> {tag, url, http, raft, dir, proc}
let bin;

function start(n, join) {
  const args = ["serve", "--http", n.http, "--data-dir", n.dir, "--node-tag", n.tag, "--raft-addr", n.raft];
  if (join) args.push("--join", join);
  const log = fs.openSync(path.join(tmp, n.tag + ".log"), "a");
  n.proc = spawn(bin, args, { stdio: ["ignore", log, log] });
  n.exited = new Promise((resolve) => n.proc.on("exit", resolve));
}

function kill9(n) {
  if (n.proc && n.proc.exitCode === null && n.proc.signalCode === null) n.proc.kill("SIGKILL");
  return n.exited;
}

async function ready(n) {
  await until(n.tag + " ready", async () => (await fetch(n.url + "/readyz")).status === 200);
}

const row = (page, tag) => page.locator(`[data-testid=cluster-node-row][data-tag="${tag}"]`);

test.describe.serial("cluster page on a three-node cluster", () => {
  test.setTimeout(120_000);

  test.beforeAll(async () => {
    test.setTimeout(120_000);
    bin = studioBinary(tmp);
    for (const tag of ["A", "B", "C"]) {
      const hp = await freePort();
      const rp = await freePort();
      nodes[tag] = { tag, http: "127.0.0.1:" + hp, url: "http://127.0.0.1:" + hp, raft: "127.0.0.1:" + rp, dir: path.join(tmp, tag) };
    }
    start(nodes.A);
    await ready(nodes.A);
    start(nodes.B, nodes.A.url);
    start(nodes.C, nodes.A.url);
    await ready(nodes.B);
    await ready(nodes.C);
    await until("three members with a leader", async () => {
      const s = await status(nodes.B.url);
      return s.Nodes.length === 3 && s.Leader !== "" && s.Nodes.every((n) => n.Url);
    });
    // web/server.go wakes ticking pages once a second per database only, so
    // a server-wide page on a node without databases never ticks; a
    // database on every node keeps the Cluster page's figures moving.
    const r = await fetch(nodes.A.url + "/admin/databases?name=pwcluster", {
      method: "PUT",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ DatabaseName: "pwcluster" }),
    });
    if (r.status !== 201) throw new Error("create database: " + r.status + " " + (await r.text()));
  });

  test.afterAll(async () => {
    await Promise.all(Object.values(nodes).map(kill9));
    if (process.env.ROOKERY_SERVER_LOG) {
      for (const tag of ["A", "B", "C"]) {
        const f = path.join(tmp, tag + ".log");
        if (fs.existsSync(f)) process.stderr.write("--- " + tag + "\n" + fs.readFileSync(f, "utf8"));
      }
    }
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  test("three nodes, one leader; killing the leader elects another, live", async ({ page }) => {
    await page.goto(nodes.B.url + "/studio/cluster");
    await expect(page.getByTestId("nav-cluster")).toHaveAttribute("aria-current", "page");
    await waitLive(page);
    const rows = page.getByTestId("cluster-node-row");
    await expect(rows).toHaveCount(3);
    for (const tag of ["A", "B", "C"]) {
      await expect(row(page, tag).getByTestId("node-state")).toHaveText("voter");
      await expect(row(page, tag).getByTestId("node-term")).toHaveText(/^\d+$/);
      await expect(row(page, tag).getByTestId("node-last-index")).toHaveText(/^\d+$/);
      await expect(row(page, tag).getByTestId("node-commit")).toHaveText(/^\d+$/);
      await expect(row(page, tag).getByTestId("node-applied")).toHaveText(/^\d+$/);
    }
    await expect(page.locator("[data-testid=node-role]", { hasText: /^leader$/ })).toHaveCount(1);
    await expect(page.locator("[data-testid=node-role]", { hasText: /^follower$/ })).toHaveCount(2);
    await expect(page.getByTestId("election")).toHaveCount(0);
    const leader = (await page.getByTestId("cluster-leader").textContent()).trim();
    expect(["A", "B", "C"]).toContain(leader);
    await expect(row(page, leader).getByTestId("node-role")).toHaveText("leader");
    await expect(row(page, leader).getByTestId("node-last-contact")).toHaveText("leads");
    const follower = ["A", "B", "C"].find((t) => t !== leader);
    await expect(row(page, follower).getByTestId("node-last-contact")).toHaveText(/^\d+ ms ago$/);
    await shot(page, "cluster");

    // The page (on B, or on whichever node survives) follows the election
    // without a reload.
    let watched = page;
    if (leader === "B") {
      await page.goto(nodes.C.url + "/studio/cluster");
      await waitLive(page);
    }
    const before = Number(await watched.locator("body").getAttribute("data-live-updates"));
    await kill9(nodes[leader]);
    await expect(row(watched, leader).getByTestId("node-state")).toHaveText("unreachable", { timeout: 5_000 });
    await expect(watched.getByTestId("cluster-leader")).not.toHaveText(leader, { timeout: 8_000 });
    await expect(watched.getByTestId("cluster-leader")).toHaveText(/^(A|B|C)$/, { timeout: 8_000 });
    const next = (await watched.getByTestId("cluster-leader").textContent()).trim();
    expect(next).not.toBe(leader);
    await expect(row(watched, next).getByTestId("node-role")).toHaveText("leader");
    await expect(row(watched, leader).getByTestId("node-role")).toHaveText("unknown");
    await expect(watched.getByTestId("election")).toHaveCount(0);
    expect(Number(await watched.locator("body").getAttribute("data-live-updates"))).toBeGreaterThan(before);
    expect(watched.url()).toMatch(/\/studio\/cluster$/);
    await shot(watched, "cluster-failover");
    nodes.dead = leader;
  });

  test("step down from the page, with its confirmation", async ({ page }) => {
    const alive = ["A", "B", "C"].filter((t) => t !== nodes.dead);
    // Act from the follower, so the step down is forwarded to the leader.
    const s = await status(nodes[alive[0]].url);
    const leader = s.Leader;
    const from = alive.find((t) => t !== leader);
    await page.goto(nodes[from].url + "/studio/cluster");
    await waitLive(page);
    await expect(page.getByTestId("cluster-leader")).toHaveText(leader);

    await page.getByTestId("stepdown-open").click();
    await page.getByTestId("stepdown-submit").click();
    await expect(page.getByTestId("flash-error")).toContainText("Tick the confirmation");
    await expect(page.getByTestId("cluster-leader")).toHaveText(leader);

    await page.getByTestId("stepdown-open").click();
    await page.getByTestId("stepdown-confirm").check();
    await page.getByTestId("stepdown-submit").click();
    await expect(page.getByTestId("flash")).toContainText("Leader " + leader + " stepped down");
    await expect(page.getByTestId("cluster-leader")).toHaveText(from);
    await expect(row(page, from).getByTestId("node-role")).toHaveText("leader");
    await expect(row(page, leader).getByTestId("node-role")).toHaveText("follower");
    await shot(page, "cluster-stepdown");
  });

  test("remove the dead node by typing its tag, then add it back", async ({ page }) => {
    const dead = nodes[nodes.dead];
    const alive = ["A", "B", "C"].find((t) => t !== dead.tag);
    await page.goto(nodes[alive].url + "/studio/cluster");
    await waitLive(page);
    await expect(row(page, dead.tag).getByTestId("node-state")).toHaveText("unreachable");

    await page.getByTestId("remove-node-open").click();
    await page.getByTestId("remove-node-tag").selectOption(dead.tag);
    await page.getByTestId("remove-node-confirm").fill(dead.tag.toLowerCase());
    await page.getByTestId("remove-node-submit").click();
    await expect(page.getByTestId("flash-error")).toContainText("nothing was removed");
    await expect(page.getByTestId("cluster-node-row")).toHaveCount(3);

    await page.getByTestId("remove-node-open").click();
    await page.getByTestId("remove-node-tag").selectOption(dead.tag);
    await page.getByTestId("remove-node-confirm").fill(dead.tag);
    await page.getByTestId("remove-node-submit").click();
    await expect(page.getByTestId("flash")).toHaveText("Node " + dead.tag + " removed from the cluster.");
    await expect(page.getByTestId("cluster-node-row")).toHaveCount(2);
    await expect(row(page, dead.tag)).toHaveCount(0);

    // The node comes back with its data directory; the page adds it again.
    start(dead);
    await page.getByTestId("add-node-open").click();
    await page.getByTestId("add-node-tag").fill(dead.tag);
    await page.getByTestId("add-node-url").fill(dead.url);
    await page.getByTestId("add-node-raft").fill(dead.raft);
    await page.getByTestId("add-node-submit").click();
    await expect(page.getByTestId("flash-error")).toContainText("Tick the confirmation");
    await page.getByTestId("add-node-open").click();
    await page.getByTestId("add-node-tag").fill(dead.tag);
    await page.getByTestId("add-node-url").fill(dead.url);
    await page.getByTestId("add-node-raft").fill(dead.raft);
    await page.getByTestId("add-node-confirm").check();
    await page.getByTestId("add-node-submit").click();
    await expect(page.getByTestId("flash")).toHaveText("Node " + dead.tag + " added as a voter.");
    await expect(page.getByTestId("cluster-node-row")).toHaveCount(3);
    await expect(row(page, dead.tag).getByTestId("node-state")).toHaveText("voter", { timeout: 15_000 });
    await expect(row(page, dead.tag).getByTestId("node-role")).toHaveText("follower");
    await expect(page.locator("[data-testid=node-role]", { hasText: /^leader$/ })).toHaveCount(1);
    await shot(page, "cluster-readded");
  });

  test("a cross-site POST is refused", async ({ request }) => {
    const alive = ["A", "B", "C"].find((t) => t !== nodes.dead);
    const r = await request.post(nodes[alive].url + "/studio/cluster/stepdown", {
      form: { confirm: "yes" },
      headers: { Origin: "http://evil.example" },
    });
    expect(r.status()).toBe(403);
  });
});
