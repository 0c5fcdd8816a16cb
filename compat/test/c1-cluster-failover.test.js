"use strict";
// C1: the npm client keeps working through a leader kill on a 3-node cluster.
//
// This file starts its OWN cluster (it does not use ROOKERY_URL): three processes of the
// server binary on 127.0.0.1, each with its own data dir, HTTP port and Raft port. The binary
// is ROOKERY_BIN when set, else built here with `go build -o <tmp>/studio ./cmd/studio`.
// Documents are not replicated between nodes (only identities and topology go through Raft),
// so a document is checked on the node that acknowledged it.
const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { spawn, spawnSync } = require("node:child_process");
const fs = require("node:fs");
const net = require("node:net");
const os = require("node:os");
const path = require("node:path");
const { DocumentStore, CreateDatabaseOperation, NextIdentityForOperation } = require("ravendb");
const h = require("./helpers");

const repoRoot = path.resolve(__dirname, "..", "..");
const DB = `compat_cluster_${Date.now().toString(36)}`;

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

class Node {
    constructor(tmp, tag, httpPort, raftPort, join) {
        this.tag = tag;
        this.url = `http://127.0.0.1:${httpPort}`;
        this.logPath = path.join(tmp, `node-${tag}.log`);
        this.args = ["serve", "--http", `127.0.0.1:${httpPort}`, "--data-dir", path.join(tmp, `data-${tag}`),
            "--node-tag", tag, "--raft-addr", `127.0.0.1:${raftPort}`];
        if (join) {
            this.args.push("--join", join);
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

describe("cluster failover with the npm client", () => {
    let tmp;
    let nodes = [];
    let store;
    let recorder;
    let failed = false;
    const step = fn => async () => {
        try {
            await fn();
        } catch (err) {
            failed = true;
            throw err;
        }
    };

    // Everything acknowledged: { id, name, url } with url the node that took the write.
    const written = [];
    const identitiesBefore = [];
    const identitiesAfter = [];
    let killed = null;

    const killAll = () => {
        for (const n of nodes) {
            if (n.running()) {
                n.proc.kill("SIGKILL");
            }
        }
    };
    process.once("exit", killAll);

    before(async () => {
        tmp = fs.mkdtempSync(path.join(os.tmpdir(), "rookery-c1-"));
        let bin = process.env.ROOKERY_BIN;
        if (!bin) {
            bin = path.join(tmp, "studio");
            const r = spawnSync("go", ["build", "-o", bin, "./cmd/studio"], { cwd: repoRoot, encoding: "utf8" });
            if (r.status !== 0) {
                throw new Error(`go build failed: ${r.error || r.stderr}`);
            }
        }
        const a = new Node(tmp, "A", await freePort(), await freePort(), null);
        nodes = [a,
            new Node(tmp, "B", await freePort(), await freePort(), a.url),
            new Node(tmp, "C", await freePort(), await freePort(), a.url)];
        for (let i = 0; i < nodes.length; i++) {
            nodes[i].start(bin);
            await nodes[i].waitReady();
            await waitConverged(nodes.slice(0, i + 1));
        }
    }, { timeout: 180_000 });

    after(async () => {
        if (store) {
            store.dispose();
        }
        for (const n of nodes) {
            await n.kill9();
        }
        if (failed) {
            for (const n of nodes) {
                process.stderr.write(`[c1] log of node ${n.tag} (${n.url}), last lines:\n${n.logTail()}\n`);
            }
        }
        if (tmp && !process.env.ROOKERY_KEEP_TMP) {
            fs.rmSync(tmp, { recursive: true, force: true });
        } else if (tmp) {
            process.stderr.write(`[c1] kept ${tmp}\n`);
        }
    });

    // The node whose successful bulk_docs came last: where the session's writes went.
    const lastWriteNode = () => {
        const hit = [...recorder.seen].reverse().find(s => !s.failed && s.url.includes("/bulk_docs"));
        return hit && new URL(hit.url).origin;
    };

    it("creates a database through the client pointed at all three URLs; every node lists A, B, C", step(async () => {
        store = new DocumentStore(nodes.map(n => n.url), DB);
        store.initialize();
        // The client sends ?replicationFactor=1 unless told; ask for all three explicitly.
        await store.maintenance.server.send(new CreateDatabaseOperation({ databaseName: DB }, 3));
        for (const n of nodes) {
            await eventually(`database on ${n.tag}`, 15_000, async () => {
                const r = await httpJSON("GET", `${n.url}/topology?name=${DB}`);
                const tags = r.json && r.json.Nodes ? r.json.Nodes.map(x => `${x.ClusterTag}=${x.Url}`).sort() : [];
                const want = nodes.map(m => `${m.tag}=${m.url}`).sort();
                return [r.status === 200 && tags.join() === want.join(), `${r.status} ${r.text}`];
            });
        }
        recorder = h.recordResponses(store.getRequestExecutor());
    }));

    it("stores, loads and takes identities before the kill", step(async () => {
        for (let i = 0; i < 3; i++) {
            const s = store.openSession();
            const u = new h.User(`before-${i}`, i);
            const c = new h.Company(`before-${i}`);
            await s.store(u);
            await s.store(c, "companies|");
            await s.saveChanges();
            assert.match(c.id, /^companies\/\d+$/);
            const url = lastWriteNode();
            written.push({ id: u.id, name: u.name, url }, { id: c.id, name: c.name, url });
            identitiesBefore.push(c.id);
            const r = store.openSession({ noCaching: true });
            assert.equal((await r.load(u.id, h.User)).name, u.name);
            assert.equal((await r.load(c.id, h.Company)).name, c.name);
        }
        const next = await store.maintenance.send(new NextIdentityForOperation("companies"));
        identitiesBefore.push(`companies/${next}`);
    }));

    it("kill -9 the leader: saveChanges, load and identity stores keep succeeding through failover", step(async () => {
        const leader = await waitConverged(nodes);
        await leader.kill9();
        killed = leader;
        const maxBefore = Math.max(...identitiesBefore.map(id => Number(id.split("/")[1])));

        // HiLo documents need no quorum: the client's failover alone must carry them, at once.
        for (let i = 0; i < 3; i++) {
            const s = store.openSession();
            const u = new h.User(`after-hilo-${i}`, i);
            await s.store(u);
            await s.saveChanges();
            written.push({ id: u.id, name: u.name, url: lastWriteNode() });
            const loaded = await store.openSession({ noCaching: true }).load(u.id, h.User);
            assert.ok(loaded, `${u.id} written after the kill must load`);
            assert.equal(loaded.name, u.name);
        }

        // Identities need the new leader: while it is being elected a node may answer 503
        // (no quorum), and the client may run out of nodes. The first identity store after the
        // kill may therefore be retried a few times; every later one must succeed at once.
        let attempts = 0;
        for (;;) {
            attempts++;
            try {
                const s = store.openSession();
                const c = new h.Company("after-first");
                await s.store(c, "companies|");
                await s.saveChanges();
                identitiesAfter.push(c.id);
                written.push({ id: c.id, name: c.name, url: lastWriteNode() });
                break;
            } catch (err) {
                if (attempts >= 8) {
                    throw new Error(`no identity store succeeded in ${attempts} attempts after the kill: ${err.name}: ${err.message}`);
                }
                await h.sleep(1000);
            }
        }
        const origins = list => [...new Set(list.map(w => (nodes.find(n => n.url === w.url) || { tag: w.url }).tag))].join(",");
        process.stderr.write(`[c1] killed ${killed.tag}; writes before on ${origins(written.filter(w => w.name.startsWith("before")))}, ` +
            `after on ${origins(written.filter(w => w.name.startsWith("after")))}; first identity store after ${attempts} attempt(s)\n`);

        for (let i = 0; i < 8; i++) {
            const s = store.openSession();
            const c = new h.Company(`after-${i}`);
            const u = new h.User(`after-mixed-${i}`, i);
            await s.store(c, "companies|");
            await s.store(u);
            await s.saveChanges();
            const url = lastWriteNode();
            identitiesAfter.push(c.id);
            written.push({ id: c.id, name: c.name, url }, { id: u.id, name: u.name, url });
            const r = store.openSession({ noCaching: true });
            const lc = await r.load(c.id, h.Company);
            assert.ok(lc, `${c.id} written after the kill must load`);
            assert.equal(lc.name, c.name);
            assert.equal((await r.load(u.id, h.User)).name, u.name);
        }
        const next = await store.maintenance.send(new NextIdentityForOperation("companies"));
        identitiesAfter.push(`companies/${next}`);

        for (const w of written.filter(x => identitiesAfter.includes(x.id) || x.name.startsWith("after"))) {
            assert.notEqual(w.url, killed.url, `${w.id} was acknowledged by the killed node after the kill`);
        }
        // The counter lives in Raft: it carried over to the new leader, it did not restart.
        for (const id of identitiesAfter) {
            assert.match(id, /^companies\/\d+$/);
            assert.ok(Number(id.split("/")[1]) > maxBefore, `${id} after the kill, but companies/${maxBefore} was taken before`);
        }
    }));

    it("identities are unique across the run and every acknowledged document is on the node that took it", step(async () => {
        const all = [...identitiesBefore, ...identitiesAfter];
        assert.ok(identitiesAfter.length >= 9, `identities after the kill: ${identitiesAfter}`);
        assert.equal(new Set(all).size, all.length, `duplicate identities: ${all}`);
        for (const w of written) {
            if (w.url === killed.url) {
                continue; // that node is down; its documents were checked before the kill
            }
            const r = await httpJSON("GET", `${w.url}/databases/${DB}/docs?id=${encodeURIComponent(w.id)}`);
            assert.equal(r.status, 200, `${w.id} on ${w.url}: ${r.status} ${r.text}`);
            assert.equal(r.json.Results[0].name, w.name, `${w.id} on ${w.url}`);
        }
    }));
});
