// The conflict pages against a real conflict between two nodes started by
// this spec (the global setup's node is not used). A and B form a cluster
// but replicate to each other only through small TCP proxies that start
// cut: the same id is written on both, then the proxies let traffic
// through, the versions meet, and both nodes hold the conflict.
"use strict";
const { test, expect } = require("@playwright/test");
const { spawn } = require("node:child_process");
const fs = require("node:fs");
const net = require("node:net");
const os = require("node:os");
const path = require("node:path");
const { waitLive, shot, freePort, until, studioBinary } = require("./helpers");

// A TCP proxy to 127.0.0.1:target that refuses connections while cut and
// drops the open ones when cut again.
async function startProxy(target) {
  const p = { cut: true, open: new Set() };
  p.server = net.createServer((client) => {
    if (p.cut) {
      client.destroy();
      return;
    }
    const upstream = net.connect(target, "127.0.0.1");
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

async function call(url, method, body) {
  const r = await fetch(url, {
    method,
    headers: { "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(5000),
  });
  const text = await r.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch (e) {}
  return { status: r.status, json, text };
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "rookery-pw-conflicts-"));
const nodes = {}; // tag -> {tag, url, http, raft, dir, proc, proxy}
const DB = "pwconflicts";
let bin;

function start(n, peer, join) {
  const args = ["serve", "--http", n.http, "--data-dir", n.dir, "--node-tag", n.tag, "--raft-addr", n.raft,
    "--replication-peers", peer.tag + "=http://127.0.0.1:" + peer.proxy.port];
  if (join) args.push("--join", join);
  const log = fs.openSync(path.join(tmp, n.tag + ".log"), "a");
  n.proc = spawn(bin, args, { stdio: ["ignore", log, log] });
  n.exited = new Promise((resolve) => n.proc.on("exit", resolve));
}

async function conflictTotal(n) {
  const r = await call(n.url + "/databases/" + DB + "/replication/conflicts", "GET");
  return r.json ? r.json.TotalResults : -1;
}

// conflict writes id on both nodes while they cannot replicate, then lets
// them replicate and waits until both hold the conflict.
async function conflict(id, bodyA, bodyB) {
  nodes.A.proxy.setCut(true);
  nodes.B.proxy.setCut(true);
  const before = { A: await conflictTotal(nodes.A), B: await conflictTotal(nodes.B) };
  for (const [tag, body] of [["A", bodyA], ["B", bodyB]]) {
    const r = await call(nodes[tag].url + "/databases/" + DB + "/docs?id=" + encodeURIComponent(id), "PUT", body);
    if (r.status !== 201) throw new Error("put on " + tag + ": " + r.status + " " + r.text);
  }
  return async () => {
    nodes.A.proxy.setCut(false);
    nodes.B.proxy.setCut(false);
    for (const tag of ["A", "B"]) {
      await until(id + " in conflict on " + tag, async () => (await conflictTotal(nodes[tag])) === before[tag] + 1);
    }
  };
}

test.describe.serial("conflict pages on a conflict between two nodes", () => {
  test.setTimeout(120_000);

  test.beforeAll(async () => {
    test.setTimeout(120_000);
    bin = studioBinary(tmp);
    for (const tag of ["A", "B"]) {
      const hp = await freePort();
      const rp = await freePort();
      nodes[tag] = { tag, http: "127.0.0.1:" + hp, url: "http://127.0.0.1:" + hp, raft: "127.0.0.1:" + rp, dir: path.join(tmp, tag) };
      nodes[tag].proxy = await startProxy(hp); // how the other node reaches this one
    }
    start(nodes.A, nodes.B);
    await until("A ready", async () => (await fetch(nodes.A.url + "/readyz")).status === 200);
    start(nodes.B, nodes.A, nodes.A.url);
    await until("B ready", async () => (await fetch(nodes.B.url + "/readyz")).status === 200);
    await until("two members with a leader", async () => {
      const s = (await call(nodes.A.url + "/admin/cluster/status", "GET")).json;
      return s.Nodes.length === 2 && s.Leader !== "";
    });
    const r = await call(nodes.A.url + "/admin/databases?name=" + DB, "PUT", { DatabaseName: DB });
    if (r.status !== 201) throw new Error("create database: " + r.status + " " + r.text);
    // Keep conflicts for a person: the default would resolve them on arrival.
    const s = await call(nodes.A.url + "/admin/replication/conflicts/solver?name=" + DB, "POST", { ResolveToLatest: false });
    if (s.status !== 200) throw new Error("solver: " + s.status + " " + s.text);
    await until("B has the database, manual", async () => {
      const r = await call(nodes.B.url + "/databases/" + DB + "/replication/conflicts/solver", "GET");
      return r.status === 200 && r.json.ResolveToLatest === false;
    });
  });

  test.afterAll(async () => {
    for (const n of Object.values(nodes)) {
      if (n.proc && n.proc.exitCode === null && n.proc.signalCode === null) n.proc.kill("SIGKILL");
      if (n.proc) await n.exited;
      n.proxy.server.close();
      n.proxy.setCut(true);
    }
    if (process.env.ROOKERY_SERVER_LOG) {
      for (const tag of ["A", "B"]) {
        const f = path.join(tmp, tag + ".log");
        if (fs.existsSync(f)) process.stderr.write("--- " + tag + "\n" + fs.readFileSync(f, "utf8"));
      }
    }
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  test("a conflict appears live, its versions side by side; a previewed bulk apply resolves it", async ({ page }) => {
    const id = "orders/1-<b>";
    const heal = await conflict(id,
      { by: "A", total: 10, lines: 2, "@metadata": { "@collection": "Orders" } },
      { by: "B", total: 12, lines: 2, "@metadata": { "@collection": "Orders" } });
    await page.goto(nodes.A.url + "/studio/db/" + DB + "/conflicts");
    await expect(page.getByTestId("nav-conflicts")).toHaveAttribute("aria-current", "page");
    await waitLive(page);
    await expect(page.getByTestId("no-conflicts")).toBeVisible();
    await expect(page.getByTestId("nav-conflicts-count")).toHaveText("0");

    await heal();
    const row = page.locator(`[data-testid=conflict-row][data-id="${id}"]`);
    await expect(row).toBeVisible(); // live: no reload
    await expect(row.getByTestId("conflict-versions")).toHaveText("2");
    await expect(row.getByTestId("conflict-collection")).toHaveText("Orders");
    await expect(page.getByTestId("conflicts-total")).toHaveText("1");
    await expect(page.getByTestId("nav-conflicts-count")).toHaveText("1");
    await shot(page, "conflicts-list");

    // The id's page: both versions with their vectors and nodes; the
    // differing fields highlighted.
    await row.getByTestId("conflict-link").click();
    await expect(page.getByTestId("conflict-id")).toHaveText(id);
    const versions = page.getByTestId("version");
    await expect(versions).toHaveCount(2);
    const cvs = await page.getByTestId("version-cv").allTextContents();
    expect(cvs.some((cv) => /^A:\d+-/.test(cv))).toBe(true);
    expect(cvs.some((cv) => /^B:\d+-/.test(cv))).toBe(true);
    await expect(page.getByTestId("version-json").first()).toContainText('"by"');
    await expect(page.locator("[data-testid=diff-row][data-field=by]")).toHaveAttribute("data-differs", "true");
    await expect(page.locator("[data-testid=diff-row][data-field=total]")).toHaveAttribute("data-differs", "true");
    await expect(page.locator("[data-testid=diff-row][data-field=lines]")).toHaveAttribute("data-differs", "false");
    await expect(page.getByTestId("conflicting-fields")).toHaveText("by, total");
    await shot(page, "conflict-versions");

    // Bulk: tick it, node:B, preview, apply; the operation's progress.
    await page.getByTestId("back-conflicts").click();
    await waitLive(page);
    await page.locator(`[data-testid=conflict-row][data-id="${id}"]`).getByTestId("conflict-select").check();
    await page.getByTestId("bulk-strategy").selectOption("node:B");
    await page.getByTestId("bulk-preview").click();
    const item = page.locator(`[data-testid=preview-row][data-id="${id}"]`);
    await expect(item).toBeVisible();
    await expect(item.getByTestId("preview-outcome")).toContainText("wins");
    await expect(item.getByTestId("preview-outcome")).toContainText("B:"); // the winner's nodes
    await expect(page.getByTestId("preview-row")).toHaveCount(1);
    await shot(page, "conflicts-preview");
    await page.getByTestId("bulk-apply").click();
    await expect(page.getByTestId("flash")).toContainText(/Operation \d+ started/);
    await waitLive(page);
    const op = page.getByTestId("op").first();
    await expect(op).toHaveAttribute("data-state", "done");
    await expect(op.getByTestId("op-resolved")).toHaveText("1");
    await expect(op.getByTestId("op-done")).toHaveText("1/1");
    await expect(op.getByTestId("op-progress")).toHaveAttribute("value", "1");
    await expect(page.getByTestId("nav-conflicts-count")).toHaveText("0");
    await expect(page.getByTestId("no-conflicts")).toBeVisible();
    await shot(page, "conflicts-progress");
    // The resolution replicates: B's copy is resolved too, to B's version.
    await until("B resolved", async () => (await conflictTotal(nodes.B)) === 0);
    const doc = await call(nodes.B.url + "/databases/" + DB + "/docs?id=" + encodeURIComponent(id), "GET");
    expect(doc.json.Results[0].by).toBe("B");
  });

  test("the log shows the resolution; restoring the losing version", async ({ page }) => {
    const id = "orders/1-<b>";
    await page.goto(nodes.A.url + "/studio/db/" + DB + "/conflicts/log");
    const entry = page.locator(`[data-testid=log-entry][data-id="${id}"]`);
    await expect(entry).toHaveCount(1);
    await expect(entry.getByTestId("log-entry-strategy")).toHaveText("node:B");
    await expect(entry.getByTestId("log-entry-by")).toHaveText(/^bulk operation \d+ \(studio, preview \d+\)$/);
    await expect(entry.getByTestId("log-entry-node")).toHaveText("A");
    await entry.getByTestId("log-entry-open").click();
    await expect(entry.locator("[data-testid=log-version][data-kept=true]")).toContainText('"by": "B"');
    const losing = entry.locator("[data-testid=log-version][data-kept=false]");
    await expect(losing).toContainText('"by": "A"');
    await shot(page, "conflicts-log");

    // Restore is one click on the log row (the losing version's button).
    await expect(entry.getByTestId("restore-submit")).toHaveCount(1);
    await entry.getByTestId("restore-submit").click();
    await expect(page.getByTestId("flash")).toContainText("Restored version");
    await expect(page.getByTestId("doc-id")).toHaveText(id);
    await expect(page.getByTestId("doc-json")).toContainText('"by": "A"');
    await shot(page, "conflicts-restored");
  });

  test("settings test-run a script on a real conflict; keep one version from its page", async ({ page }) => {
    const id = "carts/7";
    const heal = await conflict(id,
      { items: ["apple"], owner: "ann", "@metadata": { "@collection": "Carts" } },
      { items: ["pear"], owner: "ann", "@metadata": { "@collection": "Carts" } });
    await heal();
    await page.goto(nodes.A.url + "/studio/db/" + DB + "/conflicts/settings");
    await expect(page.getByTestId("settings-default")).toHaveValue("manual");
    await page.getByTestId("settings-default").selectOption("script");
    const script = "var items = []; docs.forEach(function (d) { items = items.concat(d.items); }); var out = docs[0]; out.items = items.sort(); return out;";
    await page.getByTestId("settings-script").fill(script);
    await page.getByTestId("test-id").selectOption(id);
    await page.getByTestId("test-run").click();
    await expect(page.getByTestId("test-result")).toHaveAttribute("data-outcome", "merged");
    await expect(page.getByTestId("test-json")).toContainText('"apple",');
    await expect(page.getByTestId("test-json")).toContainText('"pear"');
    await expect(page.getByTestId("settings-script")).toHaveValue(script); // kept, not saved
    await shot(page, "conflicts-settings");
    const solver = await call(nodes.A.url + "/databases/" + DB + "/replication/conflicts/solver", "GET");
    expect(solver.json.Default).toBe("manual");

    await page.goto(nodes.A.url + "/studio/db/" + DB + "/conflicts/doc?id=" + encodeURIComponent(id));
    const pear = page.getByTestId("version").filter({ hasText: "pear" });
    await pear.getByTestId("keep-version").click();
    await expect(page.getByTestId("flash")).toContainText("Resolved " + id);
    await expect(page.getByTestId("doc-json")).toContainText("pear");
    await expect(page.getByTestId("nav-conflicts-count")).toHaveText("0");
  });

  test("a cross-site POST is refused", async ({ request }) => {
    const r = await request.post(nodes.A.url + "/studio/db/" + DB + "/conflicts/log/restore", {
      form: { seq: "1", version: "0" },
      headers: { Origin: "http://evil.example" },
    });
    expect(r.status()).toBe(403);
  });
});
