// The Replication page on a real three-node cluster started by this spec:
// A replicates to B through a small TCP proxy (--replication-peers), so the
// test can cut that link and heal it while the page on A is watched. C is
// reached directly.
"use strict";
const { test, expect } = require("@playwright/test");
const { spawn } = require("node:child_process");
const fs = require("node:fs");
const net = require("node:net");
const os = require("node:os");
const path = require("node:path");
const { waitLive, shot, freePort, until, studioBinary } = require("./helpers");

// cutProxy forwards TCP connections to a target port until cut: cutting
// destroys the open connections and refuses new ones until healed.
function cutProxy(targetPort) {
  const sockets = new Set();
  let cut = false;
  const server = net.createServer((client) => {
    if (cut) {
      client.destroy();
      return;
    }
    const upstream = net.connect(targetPort, "127.0.0.1");
    for (const [a, b] of [
      [client, upstream],
      [upstream, client],
    ]) {
      sockets.add(a);
      a.on("error", () => b.destroy());
      a.on("close", () => {
        sockets.delete(a);
        b.destroy();
      });
      a.pipe(b);
    }
  });
  return {
    listen: (port) => new Promise((resolve) => server.listen(port, "127.0.0.1", resolve)),
    cut() {
      cut = true;
      for (const s of sockets) s.destroy();
    },
    heal() {
      cut = false;
    },
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "rookery-pw-repl-"));
const nodes = {}; // tag -> {tag, url, http, raft, dir, proc}
let bin;
let proxy;
const db = "pwrepl";

function start(n, extra) {
  const args = ["serve", "--http", n.http, "--data-dir", n.dir, "--node-tag", n.tag, "--raft-addr", n.raft, ...extra];
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

async function stats(n) {
  const r = await fetch(n.url + "/databases/" + db + "/replication/stats");
  if (r.status !== 200) throw new Error("stats " + r.status);
  return r.json();
}

async function bulk(n, docs) {
  const r = await fetch(n.url + "/databases/" + db + "/bulk_docs", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ Commands: docs.map((d) => ({ Id: d.id, Type: "PUT", Document: d.body })) }),
  });
  if (r.status !== 201) throw new Error("bulk_docs: " + r.status + " " + (await r.text()));
}

// lagAB is the A → B items-behind series of node's chart history: its
// peak and its latest value.
async function lagAB(node) {
  const r = await fetch(node.url + "/studio/history?kind=repl_items&db=" + db);
  const h = await r.json();
  const s = h.Series.find((x) => x.Node === "A" && x.Peer === "B");
  if (!s) return { peak: -1, last: -1 };
  const vals = s.Values.filter((v) => v !== null);
  return { peak: Math.max(...vals), last: vals[vals.length - 1] };
}

const row = (page, tag) => page.locator(`[data-testid=replication-row][data-destination="${tag}"]`);

test.describe.serial("replication page on a three-node cluster", () => {
  test.setTimeout(120_000);

  test.beforeAll(async () => {
    test.setTimeout(120_000);
    bin = studioBinary(tmp);
    for (const tag of ["A", "B", "C"]) {
      const hp = await freePort();
      const rp = await freePort();
      nodes[tag] = { tag, port: hp, http: "127.0.0.1:" + hp, url: "http://127.0.0.1:" + hp, raft: "127.0.0.1:" + rp, dir: path.join(tmp, tag) };
    }
    const proxyPort = await freePort();
    proxy = cutProxy(nodes.B.port);
    await proxy.listen(proxyPort);
    start(nodes.A, ["--replication-peers", "B=http://127.0.0.1:" + proxyPort, "--history-interval", "1s"]);
    await ready(nodes.A);
    start(nodes.B, ["--join", nodes.A.url]);
    start(nodes.C, ["--join", nodes.A.url]);
    await ready(nodes.B);
    await ready(nodes.C);
    await until("three members", async () => {
      const r = await fetch(nodes.A.url + "/admin/cluster/status");
      const s = await r.json();
      return s.Nodes.length === 3 && s.Nodes.every((n) => n.Url);
    });
    const r = await fetch(nodes.A.url + "/admin/databases?name=" + db, {
      method: "PUT",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ DatabaseName: db }),
    });
    if (r.status !== 201) throw new Error("create database: " + r.status + " " + (await r.text()));
    await until("A replicating to B and C", async () => {
      const s = await stats(nodes.A);
      return s.Destinations.length === 2 && s.Destinations.every((d) => d.State === "connected");
    });
  });

  test.afterAll(async () => {
    await Promise.all(Object.values(nodes).map(kill9));
    if (proxy) await proxy.close();
    if (process.env.ROOKERY_SERVER_LOG) {
      for (const tag of ["A", "B", "C"]) {
        const f = path.join(tmp, tag + ".log");
        if (fs.existsSync(f)) process.stderr.write("--- " + tag + "\n" + fs.readFileSync(f, "utf8"));
      }
    }
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  test("a cut link shows items behind; healing it brings them to 0, live", async ({ page }) => {
    await page.goto(nodes.A.url + "/studio/db/" + db + "/replication");
    await expect(page.getByTestId("nav-replication")).toHaveAttribute("aria-current", "page");
    await waitLive(page);
    await expect(page.getByTestId("replication-row")).toHaveCount(2);
    for (const tag of ["B", "C"]) {
      await expect(row(page, tag)).toHaveAttribute("data-state", "connected");
      await expect(row(page, tag).getByTestId("repl-items-behind")).toHaveText("0");
      await expect(row(page, tag).getByTestId("repl-seconds-behind")).toHaveText("0 s");
    }
    await expect(row(page, "B").getByTestId("repl-destination")).toHaveText("B");
    await expect(page.getByTestId("repl-destinations")).toHaveText("2");

    // Cut A→B and write on A: B falls behind by exactly those documents
    // (as A counts them: B gets them from C meanwhile, but has not told A).
    proxy.cut();
    const docs = [];
    for (let i = 0; i < 50; i++) docs.push({ id: "cut/" + i, body: { n: i, "@metadata": { "@collection": "Cut" } } });
    await bulk(nodes.A, docs);
    const b = row(page, "B");
    await expect(b).toHaveAttribute("data-state", /^(connecting|waiting to retry)$/, { timeout: 15_000 });
    await expect(b.getByTestId("repl-items-behind")).toHaveText("50", { timeout: 15_000 });
    await expect(b.getByTestId("repl-items-behind")).toHaveAttribute("data-value", "50");
    await expect(b.getByTestId("repl-last-error")).toBeVisible({ timeout: 15_000 });
    await expect(b.getByTestId("repl-last-error")).toContainText("Last error");
    await expect(b.getByTestId("repl-seconds-behind")).not.toHaveText("0 s", { timeout: 15_000 });
    // The matrix says the same of A → B, and the lag history has it.
    await expect(page.locator('[data-testid=repl-cell][data-source="A"][data-destination="B"]')).toHaveAttribute("data-items", "50");
    await expect.poll(async () => (await lagAB(nodes.A)).peak, { timeout: 15_000 }).toBe(50);
    // C, reached directly, keeps up.
    await expect(row(page, "C")).toHaveAttribute("data-state", "connected");
    await expect(row(page, "C").getByTestId("repl-items-behind")).toHaveText("0");
    await shot(page, "replication-cut");

    // Heal: the page follows B back to 0 without a reload.
    const url = page.url();
    const updates = Number(await page.locator("body").getAttribute("data-live-updates"));
    proxy.heal();
    await expect(b).toHaveAttribute("data-state", "connected", { timeout: 20_000 });
    await expect(b.getByTestId("repl-items-behind")).toHaveText("0", { timeout: 20_000 });
    await expect(b.getByTestId("repl-seconds-behind")).toHaveText("0 s");
    await expect(b.getByTestId("repl-next-retry")).toHaveText("");
    // The last error stays, shown as history.
    await expect(b.getByTestId("repl-last-error")).toHaveClass(/past/);
    expect(Number(await page.locator("body").getAttribute("data-live-updates"))).toBeGreaterThan(updates);
    expect(page.url()).toBe(url);
    // The lag history remembers the outage: its peak is still 50.
    await expect.poll(async () => lagAB(nodes.A), { timeout: 15_000 }).toEqual({ peak: 50, last: 0 });
    const s = await stats(nodes.A);
    const sb = s.Destinations.find((d) => d.Tag === "B");
    expect(sb.ItemsBehind).toBe(0);
    expect(sb.LastError).not.toBe("");
    await shot(page, "replication-healed");
  });
});
