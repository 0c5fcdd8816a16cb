"use strict";
// Shared pieces of the multi-process cluster tests (c1, c2): real server processes on 127.0.0.1,
// each with its own data dir, HTTP port and Raft port, and TCP proxies that can cut a link.
// Not a test file (run.js runs test/*.test.js only).

const assert = require("node:assert/strict");
const { spawn, spawnSync } = require("node:child_process");
const fs = require("node:fs");
const https = require("node:https");
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

// httpJSON over TLS: tls holds the CA and the client certificate ({ ca, cert, key }, PEM; cert and
// key may be one cert+key file such as admin.pem, or absent for an anonymous caller).
function httpsJSON(method, url, body, tls) {
    return new Promise((resolve, reject) => {
        const req = https.request(url, {
            method,
            ca: tls.ca,
            cert: tls.cert,
            key: tls.key,
            agent: false,
            timeout: 5000,
            headers: { "Content-Type": "application/json" },
        }, res => {
            const chunks = [];
            res.on("data", c => chunks.push(c));
            res.on("end", () => {
                const text = Buffer.concat(chunks).toString("utf8");
                let json = null;
                try {
                    json = text ? JSON.parse(text) : null;
                } catch {
                    // not JSON: keep the text for the message
                }
                resolve({ status: res.statusCode, json, text });
            });
            res.on("error", reject);
        });
        req.on("timeout", () => req.destroy(new Error(`${method} ${url}: timeout`)));
        req.on("error", reject);
        req.end(body === undefined ? undefined : JSON.stringify(body));
    });
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
        this.cwd = undefined;
    }

    // The test's own requests to this node: { status, json, text }.
    request(method, pathAndQuery, body) {
        return httpJSON(method, `${this.url}${pathAndQuery}`, body);
    }

    start(bin) {
        const fd = fs.openSync(this.logPath, "a");
        this.proc = spawn(bin, this.args, { stdio: ["ignore", fd, fd], cwd: this.cwd });
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
            const r = await this.request("GET", "/readyz").catch(() => null);
            return [r && r.status === 200, `readyz ${r && r.status}`];
        });
    }

    topology() {
        return this.request("GET", "/cluster/topology");
    }

    // GET /databases/{db}/docs?id=: { status, json, text }.
    getDoc(db, id) {
        return this.request("GET", `/databases/${db}/docs?id=${encodeURIComponent(id)}`);
    }

    logTail(lines = 30) {
        try {
            return fs.readFileSync(this.logPath, "utf8").split("\n").slice(-lines).join("\n");
        } catch {
            return "(no log)";
        }
    }
}

// A node of a secured cluster: args is the `studio serve ...` line `studio setup` printed for it
// (without "studio"), run in cwd (the printed --data-dir is relative); the test's requests go over
// TLS with tls ({ ca, cert, key }, normally the admin certificate).
class SecuredNode extends Node {
    constructor(tmp, tag, url, args, cwd, tls) {
        super(tmp, tag, 0, 0);
        this.url = url;
        this.args = args;
        this.cwd = cwd;
        this.tls = tls;
    }

    request(method, pathAndQuery, body) {
        return httpsJSON(method, `${this.url}${pathAndQuery}`, body, this.tls);
    }
}

// Splits a command line printed by `studio setup` (words, single-quoted where needed).
function splitShell(line) {
    const words = [];
    let cur = null;
    for (let i = 0; i < line.length; i++) {
        const c = line[i];
        if (c === "'") {
            const end = line.indexOf("'", i + 1);
            if (end < 0) {
                throw new Error(`unterminated quote in ${line}`);
            }
            cur = (cur ?? "") + line.slice(i + 1, end);
            i = end;
        } else if (c === "\\" && i + 1 < line.length) {
            cur = (cur ?? "") + line[++i];
        } else if (c === " " || c === "\t") {
            if (cur !== null) {
                words.push(cur);
                cur = null;
            }
        } else {
            cur = (cur ?? "") + c;
        }
    }
    if (cur !== null) {
        words.push(cur);
    }
    return words;
}

// Runs `studio setup --hosts <hosts> --san localhost --out <dir>` as the README says and reads what
// it printed: { dir, ca, adminPem, adminThumbprint, serveArgs: [[ "serve", ... ] per node] }.
function secureSetup(bin, dir, hosts) {
    const r = spawnSync(bin, ["setup", "--hosts", hosts.join(","), "--san", "localhost", "--out", dir], { encoding: "utf8" });
    if (r.status !== 0) {
        throw new Error(`studio setup failed: ${r.error || r.stderr}`);
    }
    const line = prefix => {
        const found = r.stdout.split("\n").filter(l => l.startsWith(prefix));
        if (found.length !== 1) {
            throw new Error(`${found.length} lines start with "${prefix}" in:\n${r.stdout}`);
        }
        return found[0].slice(prefix.length).trim();
    };
    const serveArgs = hosts.map((_, i) => {
        const words = splitShell(line(`node ${i + 1}: `));
        assert.deepEqual(words.slice(0, 2), ["studio", "serve"]);
        return words.slice(1);
    });
    return {
        dir,
        ca: path.join(dir, "ca.pem"),
        adminPem: path.join(dir, "admin.pem"),
        adminThumbprint: line("admin thumbprint: "),
        serveArgs,
    };
}

// Runs `studio setup client --dir <dir> --name <name>`: { pem, thumbprint }.
function issueClient(bin, dir, name) {
    const r = spawnSync(bin, ["setup", "client", "--dir", dir, "--name", name], { encoding: "utf8" });
    if (r.status !== 0) {
        throw new Error(`studio setup client failed: ${r.error || r.stderr}`);
    }
    const m = r.stdout.match(new RegExp(`^${name} thumbprint: ([0-9A-F]{40})$`, "m"));
    if (!m) {
        throw new Error(`no thumbprint line in:\n${r.stdout}`);
    }
    return { pem: path.join(dir, `${name}.pem`), thumbprint: m[1] };
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
            const r = await n.request("GET", `/topology?name=${db}`);
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
    httpsJSON,
    SecuredNode,
    splitShell,
    secureSetup,
    issueClient,
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
