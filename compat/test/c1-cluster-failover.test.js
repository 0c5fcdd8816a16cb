"use strict";
// C1: the npm client keeps working through a leader kill on a 3-node cluster.
//
// This file starts its OWN cluster (it does not use ROOKERY_URL): three processes of the
// server binary on 127.0.0.1, each with its own data dir, HTTP port and Raft port (see
// cluster-helpers.js). The binary is ROOKERY_BIN when set, else built here.
// Documents replicate between the members of a database (identities and topology go through
// Raft), so every document written before the kill is waited for on every node, and must then
// load through the client's failover whichever node accepted it.
const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { DocumentStore, CreateDatabaseOperation, NextIdentityForOperation } = require("ravendb");
const h = require("./helpers");
const { eventually, prepare, removeTmp, Node, waitConverged, startCluster, waitDatabaseOn, killAllSync, dumpLogs, freePort } = require("./cluster-helpers");

const DB = `compat_cluster_${Date.now().toString(36)}`;

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

    process.once("exit", () => killAllSync(nodes));

    before(async () => {
        let bin;
        ({ tmp, bin } = prepare("c1"));
        const a = new Node(tmp, "A", await freePort(), await freePort());
        nodes = [a,
            new Node(tmp, "B", await freePort(), await freePort(), { join: a.url }),
            new Node(tmp, "C", await freePort(), await freePort(), { join: a.url })];
        await startCluster(nodes, bin);
    }, { timeout: 180_000 });

    after(async () => {
        if (store) {
            store.dispose();
        }
        for (const n of nodes) {
            await n.kill9();
        }
        if (failed) {
            dumpLogs("c1", nodes);
        }
        removeTmp(tmp, "c1");
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
        await waitDatabaseOn(nodes, DB);
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
        // Replication is asynchronous: the kill must not race it.
        await waitReplicated(nodes, written);
    }));

    it("kill -9 the leader: saveChanges, load and identity stores keep succeeding through failover", step(async () => {
        const leader = await waitConverged(nodes);
        await leader.kill9();
        killed = leader;
        const maxBefore = Math.max(...identitiesBefore.map(id => Number(id.split("/")[1])));

        // Everything written before the kill replicated: it loads through the failover, also
        // what the killed node had accepted.
        const before = [...written];
        const r0 = store.openSession({ noCaching: true });
        for (const w of before) {
            const doc = await r0.load(w.id);
            assert.ok(doc, `${w.id} (accepted by ${w.url} before the kill) must load after it`);
            assert.equal(doc.name, w.name, w.id);
        }

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

    it("identities are unique across the run and every acknowledged document reaches every surviving node", step(async () => {
        const all = [...identitiesBefore, ...identitiesAfter];
        assert.ok(identitiesAfter.length >= 9, `identities after the kill: ${identitiesAfter}`);
        assert.equal(new Set(all).size, all.length, `duplicate identities: ${all}`);
        await waitReplicated(nodes.filter(n => n !== killed), written);
    }));
});

// Waits until every document of written ({ id, name }) is on every node of nodes with its name.
async function waitReplicated(nodes, written) {
    for (const n of nodes) {
        for (const w of written) {
            await eventually(`${w.id} on ${n.tag}`, 15_000, async () => {
                const r = await n.getDoc(DB, w.id);
                return [r.status === 200 && r.json.Results[0].name === w.name, `${r.status} ${r.text}`];
            });
        }
    }
}
