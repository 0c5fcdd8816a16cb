// A real three-node cluster for specs that need one (issue 12: every studio
// point is checked on three nodes). A bootstraps, B and C join it; each node
// is a real process of the studio binary with its own data directory and
// random loopback ports. Use it from a serial describe:
//
//   const { Cluster } = require("./cluster3");
//   const cluster = new Cluster("conflicts");
//   test.beforeAll(async () => { await cluster.start(); await cluster.createDatabase("db1"); });
//   test.afterAll(async () => { await cluster.stop(); });
//   ... page.goto(cluster.nodes.B.url + "/studio/…")
//
// ROOKERY_SERVER_LOG=1 prints the nodes' logs when the cluster stops.
"use strict";
const { spawn } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { freePort, until, studioBinary } = require("./helpers");

async function clusterStatus(url) {
  const r = await fetch(url + "/admin/cluster/status", { signal: AbortSignal.timeout(1000) });
  if (r.status !== 200) throw new Error("status " + r.status);
  return r.json();
}

class Cluster {
  constructor(name, tags) {
    this.name = name;
    this.tags = tags || ["A", "B", "C"];
    this.tmp = fs.mkdtempSync(path.join(os.tmpdir(), "rookery-pw-" + name + "-"));
    this.nodes = {}; // tag -> {tag, url, http, raft, dir, proc, exited}
    this.bin = null;
  }

  // start brings up every node (the first bootstraps, the others join it)
  // and waits for all members and a leader. extraArgs are added to every
  // node's `serve` command line (flags such as --alert-… thresholds).
  async start(extraArgs) {
    this.extraArgs = extraArgs || [];
    this.bin = studioBinary(this.tmp);
    for (const tag of this.tags) {
      const hp = await freePort();
      const rp = await freePort();
      this.nodes[tag] = { tag, http: "127.0.0.1:" + hp, url: "http://127.0.0.1:" + hp, raft: "127.0.0.1:" + rp, dir: path.join(this.tmp, tag) };
    }
    const [first, ...rest] = this.tags;
    this.startNode(first);
    await this.ready(first);
    for (const tag of rest) this.startNode(tag, this.nodes[first].url);
    for (const tag of rest) await this.ready(tag);
    await until("all members with a leader", async () => {
      const s = await clusterStatus(this.nodes[first].url);
      return s.Nodes.length === this.tags.length && s.Leader !== "" && s.Nodes.every((n) => n.Url);
    }, 60_000);
  }

  // startNode starts (or restarts, keeping its data) one node's process.
  startNode(tag, join) {
    const n = this.nodes[tag];
    const args = ["serve", "--http", n.http, "--data-dir", n.dir, "--node-tag", n.tag, "--raft-addr", n.raft, ...(this.extraArgs || [])];
    if (join) args.push("--join", join);
    const log = fs.openSync(path.join(this.tmp, n.tag + ".log"), "a");
    n.proc = spawn(this.bin, args, { stdio: ["ignore", log, log] });
    n.exited = new Promise((resolve) => n.proc.on("exit", resolve));
  }

  async ready(tag) {
    const n = this.nodes[tag];
    await until(tag + " ready", async () => (await fetch(n.url + "/readyz")).status === 200, 60_000);
  }

  // kill9 ends a node at once (SIGKILL); restart it with startNode(tag).
  kill9(tag) {
    const n = this.nodes[tag];
    if (n.proc && n.proc.exitCode === null && n.proc.signalCode === null) n.proc.kill("SIGKILL");
    return n.exited;
  }

  status(tag) {
    return clusterStatus(this.nodes[tag || this.tags[0]].url);
  }

  async leader() {
    const s = await this.status(this.tags.find((t) => this.nodes[t].proc && this.nodes[t].proc.exitCode === null) || this.tags[0]);
    return s.Leader;
  }

  // createDatabase creates a database on every node (through node `via`,
  // A by default) and waits until each node serves it.
  async createDatabase(name, via) {
    const url = this.nodes[via || this.tags[0]].url;
    const r = await fetch(url + "/admin/databases?name=" + encodeURIComponent(name), {
      method: "PUT",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ DatabaseName: name }),
    });
    if (r.status !== 201) throw new Error("create database: " + r.status + " " + (await r.text()));
    for (const tag of this.tags) {
      await until(name + " on " + tag, async () => (await fetch(this.nodes[tag].url + "/databases/" + encodeURIComponent(name) + "/stats")).status === 200, 30_000);
    }
  }

  // api calls a node's HTTP API and returns {status, body (parsed JSON or text)}.
  async api(tag, method, pathAndQuery, body) {
    const r = await fetch(this.nodes[tag].url + pathAndQuery, {
      method,
      headers: body === undefined ? {} : { "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    let parsed = text;
    try {
      parsed = JSON.parse(text);
    } catch (e) {}
    return { status: r.status, body: parsed };
  }

  async stop() {
    await Promise.all(this.tags.map((t) => this.kill9(t)));
    if (process.env.ROOKERY_SERVER_LOG) {
      for (const tag of this.tags) {
        const f = path.join(this.tmp, tag + ".log");
        if (fs.existsSync(f)) process.stderr.write("--- " + tag + "\n" + fs.readFileSync(f, "utf8"));
      }
    }
    fs.rmSync(this.tmp, { recursive: true, force: true });
  }
}

module.exports = { Cluster, clusterStatus };
