"use strict";
// Shared pieces of the multi-process cluster tests (c1, c2): real server processes on 127.0.0.1,
// each with its own data dir, HTTP port and Raft port, and TCP proxies that can cut a link.
// Not a test file (run.js runs test/*.test.js only).

const assert = require("node:assert/strict");
const { spawn, spawnSync } = require("node:child_process");
const fs = require("node:fs");
const net = require("node:net");
const os = require("node:os");
const path = require("node:path");
const h = require("./helpers");

const repoRoot = path.resolve(__dirname, "..", "..");

function freePort() {
    return new Promise((resolve, reject) => {
        const srv = net.createServer();
        srv.unref();
        srv.on("error", reject);
        srv.listen(0, "127.0.0.1", () => {
            const { port } = srv.address();
            srv.close(() => resolve(port));
        });
    });
}

async function httpJSON(method, url, body) {
    const res = await fetch(url, {
        method,
        body: body === undefined ? undefined : JSON.stringify(body),
        headers: { "Content-Type": "application/json" },
        signal: AbortSignal.timeout(5000),
    });
    const text = await res.text();
    let json = null;
    try {
        json = text ? JSON.parse(text) : null;
    } catch {
        // not JSON: keep the text for the message
    }
    return { status: res.status, json, text };
}

// Polls fn (returns [ok, why]) until ok, or fails after timeoutMs with the last why.
async function eventually(what, timeoutMs, fn) {
    const deadline = Date.now() + timeoutMs;
    let why = "";
    for (;;) {
        let ok = false;
        try {
            [ok, why] = await fn();
        } catch (err) {
            why = err.message;
        }
        if (ok) {
            return;
        }
        if (Date.now() > deadline) {
            throw new Error(`${what}: not reached within ${timeoutMs} ms: ${why}`);
        }
        await h.sleep(100);
    }
}

// A temporary directory for one test file, and the server binary: ROOKERY_BIN when set, else
// built into the directory with `go build -o <tmp>/studio ./cmd/studio`.
function prepare(prefix) {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), `rookery-${prefix}-`));
    let bin = process.env.ROOKERY_BIN;
    if (!bin) {
        bin = path.join(tmp, "studio");
        const r = spawnSync("go", ["build", "-o", bin, "./cmd/studio"], { cwd: repoRoot, encoding: "utf8" });
        if (r.status !== 0) {
            throw new Error(`go build failed: ${r.error || r.stderr}`);
        }
    }
    return { tmp, bin };
}

function removeTmp(tmp, prefix) {
    if (!tmp) {
        return;
    }
    if (process.env.ROOKERY_KEEP_TMP) {
        process.stderr.write(`[${prefix}] kept ${tmp}\n`);
    } else {
        fs.rmSync(tmp, { recursive: true, force: true });
    }
}

// One server process. opts.join: URL of a member to join; opts.peers: { TAG: URL } for
// --replication-peers (replication to TAG dials URL instead of TAG's own URL).
class Node {
    constructor(tmp, tag, httpPort, raftPort, opts = {}) {
        this.tag = tag;
        this.url = `http://127.0.0.1:${httpPort}`;
        this.logPath = path.join(tmp, `node-${tag}.log`);
        this.args = ["serve", "--http", `127.0.0.1:${httpPort}`, "--data-dir", path.join(tmp, `data-${tag}`),
            "--node-tag", tag, "--raft-addr", `127.0.0.1:${raftPort}`];
        if (opts.join) {
            this.args.push("--join", opts.join);
        }
        if (opts.peers && Object.keys(opts.peers).length > 0) {
            this.args.push("--replication-peers", Object.entries(opts.peers).map(([t, u]) => `${t}=${u}`).join(","));
        }
        this.proc = null;
    }

    start(bin) {
        const fd = fs.openSync(this.logPath, "a");
        this.proc = spawn(bin, this.args, { stdio: ["ignore", fd, fd] });
        fs.closeSync(fd);
        this.exited = new Promise(resolve => this.proc.once("exit", resolve));
    }

    running() {
        return this.proc && this.proc.exitCode === null && this.proc.signalCode === null;
    }

    async kill9() {
        if (this.running()) {
            this.proc.kill("SIGKILL");
            await this.exited;
        }
    }

    async waitReady() {
        await eventually(`node ${this.tag} ready`, 30_000, async () => {
            if (!this.running()) {
                throw new Error(`node ${this.tag} exited:\n${this.logTail()}`);
            }
            const r = await fetch(`${this.url}/readyz`, { signal: AbortSignal.timeout(2000) }).catch(() => null);
            return [r && r.status === 200, `readyz ${r && r.status}`];
        });
    }

    topology() {
        return httpJSON("GET", `${this.url}/cluster/topology`);
    }

    // GET /databases/{db}/docs?id=: { status, json, text }.
    getDoc(db, id) {
        return httpJSON("GET", `${this.url}/databases/${db}/docs?id=${encodeURIComponent(id)}`);
    }

    logTail(lines = 30) {
        try {
            return fs.readFileSync(this.logPath, "utf8").split("\n").slice(-lines).join("\n");
        } catch {
            return "(no log)";
        }
    }
}

// Every node in nodes reports the same leader (one of nodes) and exactly nodes as members.
async function waitConverged(nodes) {
    let leader = null;
    await eventually(`${nodes.map(n => n.tag)} agree on a leader`, 20_000, async () => {
        const leaders = new Set();
        for (const n of nodes) {
            const r = await n.topology();
            const members = r.json && r.json.Topology && r.json.Topology.Members;
            if (r.status !== 200 || !members) {
                return [false, `${n.tag}: ${r.status} ${r.text}`];
            }
            const want = Object.fromEntries(nodes.map(m => [m.tag, m.url]));
            try {
                assert.deepEqual(members, want);
            } catch {
                return [false, `${n.tag}: Members ${JSON.stringify(members)}`];
            }
            leaders.add(r.json.Leader);
        }
        const [l] = leaders;
        leader = nodes.find(n => n.tag === l);
        return [leaders.size === 1 && !!leader, `leaders ${[...leaders]}`];
    });
    return leader;
}

// Starts nodes one by one (the first bootstraps, the others were built with join) and waits
// after each until the started ones agree on a leader and membership.
async function startCluster(nodes, bin) {
    for (let i = 0; i < nodes.length; i++) {
        nodes[i].start(bin);
        await nodes[i].waitReady();
        await waitConverged(nodes.slice(0, i + 1));
    }
}

// Waits until GET /topology?name=db on every node lists exactly nodes as the database's members.
async function waitDatabaseOn(nodes, db) {
    const want = nodes.map(m => `${m.tag}=${m.url}`).sort();
    for (const n of nodes) {
        await eventually(`database ${db} on ${n.tag}`, 15_000, async () => {
            const r = await httpJSON("GET", `${n.url}/topology?name=${db}`);
            const tags = r.json && r.json.Nodes ? r.json.Nodes.map(x => `${x.ClusterTag}=${x.Url}`).sort() : [];
            return [r.status === 200 && tags.join() === want.join(), `${r.status} ${r.text}`];
        });
    }
}

// Kills every still running node at once, synchronously: for process.once("exit").
function killAllSync(nodes) {
    for (const n of nodes) {
        if (n.running()) {
            n.proc.kill("SIGKILL");
        }
    }
}

function dumpLogs(prefix, nodes) {
    for (const n of nodes) {
        process.stderr.write(`[${prefix}] log of node ${n.tag} (${n.url}), last lines:\n${n.logTail()}\n`);
    }
}

// A TCP proxy in this process to a target URL's host:port. cut() drops every open connection
// and refuses new ones until heal(). connections counts the connections it has forwarded.
class Proxy {
    constructor(name, targetUrl) {
        this.name = name;
        const u = new URL(targetUrl);
        this.host = u.hostname;
        this.targetPort = Number(u.port);
        this.open = true;
        this.connections = 0;
        this.sockets = new Set();
        this.server = net.createServer(client => this._accept(client));
    }

    async listen() {
        const port = await freePort();
        await new Promise((resolve, reject) => {
            this.server.once("error", reject);
            this.server.listen(port, "127.0.0.1", resolve);
        });
        this.url = `http://127.0.0.1:${port}`;
        return this;
    }

    _accept(client) {
        if (!this.open) {
            client.destroy();
            return;
        }
        this.connections++;
        const upstream = net.connect(this.targetPort, this.host);
        const pair = [client, upstream];
        const drop = () => {
            for (const s of pair) {
                s.destroy();
                this.sockets.delete(s);
            }
        };
        for (const s of pair) {
            this.sockets.add(s);
            s.on("error", drop);
            s.on("close", drop);
        }
        client.pipe(upstream);
        upstream.pipe(client);
    }

    cut() {
        this.open = false;
        for (const s of this.sockets) {
            s.destroy();
        }
        this.sockets.clear();
    }

    heal() {
        this.open = true;
    }

    close() {
        this.cut();
        return new Promise(resolve => this.server.close(() => resolve()));
    }
}

module.exports = {
    freePort,
    httpJSON,
    eventually,
    prepare,
    removeTmp,
    Node,
    waitConverged,
    startCluster,
    waitDatabaseOn,
    killAllSync,
    dumpLogs,
    Proxy,
};
