"use strict";
// I2 (issue 15): revisions through the npm client, on one node (ROOKERY_URL) and on a 3-node
// cluster started here (as f3 does): ConfigureRevisionsOperation, session.advanced.revisions
// getFor (newest first, paged), getMetadataFor, get(changeVector) / get([changeVectors]),
// get(id, date), getCountFor, keep-last-N, the document's HasRevisions flag, the bin of deleted
// documents, and revisions written on one node read back the same on the others.
const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const {
    DocumentStore,
    CreateDatabaseOperation,
    ConfigureRevisionsOperation,
    RevisionsConfiguration,
    RevisionsCollectionConfiguration,
    GetRevisionsBinEntryCommand,
    GetStatisticsOperation,
} = require("ravendb");
const h = require("./helpers");
const { eventually, prepare, removeTmp, Node, startCluster, waitDatabaseOn, killAllSync, dumpLogs, freePort } =
    require("./cluster-helpers");

class User {
    constructor(init) {
        Object.assign(this, init);
    }
}

function configuration({ keep, purgeOnDelete } = {}) {
    const users = new RevisionsCollectionConfiguration();
    users.disabled = false;
    if (keep !== undefined) {
        users.minimumRevisionsToKeep = keep;
    }
    users.purgeOnDelete = !!purgeOnDelete;
    const def = new RevisionsCollectionConfiguration();
    def.disabled = true;
    const cfg = new RevisionsConfiguration();
    cfg.defaultConfig = def;
    cfg.collections = new Map([["Users", users]]);
    return cfg;
}

async function writeVersions(store, id, from, to) {
    for (let v = from; v <= to; v++) {
        const s = store.openSession();
        const u = v === from ? null : await s.load(id);
        if (u) {
            u.version = v;
        } else {
            await s.store(new User({ name: "u", version: v }), id);
        }
        await s.saveChanges();
    }
}

describe("revisions on one node", () => {
    let ctx;
    before(async () => {
        ctx = await h.freshDatabase("revisions");
    });
    after(async () => {
        await ctx.teardown();
    });

    it("configures revisions and answers with a raft index", async () => {
        const res = await ctx.store.maintenance.send(new ConfigureRevisionsOperation(configuration()));
        assert.ok(res.raftCommandIndex > 0, JSON.stringify(res));
    });

    it("getFor returns the five versions newest first, with paging", async () => {
        await writeVersions(ctx.store, "users/1", 1, 5);
        const s = ctx.store.openSession();
        const all = await s.advanced.revisions.getFor("users/1");
        assert.deepEqual(all.map(u => u.version), [5, 4, 3, 2, 1]);
        const page = await s.advanced.revisions.getFor("users/1", { start: 1, pageSize: 2 });
        assert.deepEqual(page.map(u => u.version), [4, 3]);
        assert.equal(await s.advanced.revisions.getCountFor("users/1"), 5);
        // The document itself says it has revisions.
        const doc = await s.load("users/1");
        assert.match(s.advanced.getMetadataFor(doc)["@flags"], /HasRevisions/);
    });

    it("getMetadataFor and get(changeVector) read single revisions", async () => {
        const s = ctx.store.openSession();
        const metas = await s.advanced.revisions.getMetadataFor("users/1");
        assert.equal(metas.length, 5);
        for (const m of metas) {
            assert.equal(m["@id"], "users/1");
            assert.match(m["@flags"], /Revision/);
            assert.ok(m["@change-vector"]);
            assert.ok(m["@last-modified"]);
        }
        const third = await s.advanced.revisions.get(metas[2]["@change-vector"]);
        assert.equal(third.version, 3);
        const both = await s.advanced.revisions.get([metas[0]["@change-vector"], metas[4]["@change-vector"]]);
        assert.equal(both[metas[0]["@change-vector"]].version, 5);
        assert.equal(both[metas[4]["@change-vector"]].version, 1);
        // An unknown change vector reads as null.
        assert.equal(await ctx.store.openSession().advanced.revisions.get("A:999999-unknownunknownunknownu"), null);
        // The revision current at a time.
        const later = new Date(Date.now() + 60_000);
        const now = await ctx.store.openSession().advanced.revisions.get("users/1", later);
        assert.equal(now.version, 5);
        const before = new Date(Date.parse(metas[4]["@last-modified"]) - 86_400_000);
        assert.equal(await ctx.store.openSession().advanced.revisions.get("users/1", before), null);
    });

    it("keep-last-N is honoured", async () => {
        await ctx.store.maintenance.send(new ConfigureRevisionsOperation(configuration({ keep: 3 })));
        await writeVersions(ctx.store, "users/2", 1, 6);
        const s = ctx.store.openSession();
        assert.deepEqual((await s.advanced.revisions.getFor("users/2")).map(u => u.version), [6, 5, 4]);
        assert.equal(await s.advanced.revisions.getCountFor("users/2"), 3);
        // Another collection (the default is disabled) has none.
        const o = ctx.store.openSession();
        await o.store({ name: "o" }, "orders/1");
        await o.saveChanges();
        assert.equal(await ctx.store.openSession().advanced.revisions.getCountFor("orders/1"), 0);
        const stats = await ctx.store.maintenance.send(new GetStatisticsOperation());
        assert.equal(stats.countOfRevisionDocuments, 5 + 3);
    });

    it("forceRevisionCreationFor makes a revision where none is configured", async () => {
        const s = ctx.store.openSession();
        s.advanced.revisions.forceRevisionCreationFor("orders/1");
        await s.saveChanges();
        const r = ctx.store.openSession();
        assert.equal(await r.advanced.revisions.getCountFor("orders/1"), 1);
        assert.deepEqual((await r.advanced.revisions.getFor("orders/1")).map(o => o.name), ["o"]);
        // Again, unchanged: no second revision.
        const again = ctx.store.openSession();
        again.advanced.revisions.forceRevisionCreationFor("orders/1");
        await again.saveChanges();
        assert.equal(await ctx.store.openSession().advanced.revisions.getCountFor("orders/1"), 1);
    });

    it("a deleted document is in the revisions bin", async () => {
        const s = ctx.store.openSession();
        await s.delete("users/2");
        await s.saveChanges();
        const cmd = new GetRevisionsBinEntryCommand(ctx.store.conventions, 0, 10);
        await ctx.store.getRequestExecutor().execute(cmd);
        const ids = cmd.result.results.map(r => r["@metadata"]["@id"]);
        assert.deepEqual(ids, ["users/2"]);
        assert.match(cmd.result.results[0]["@metadata"]["@flags"], /DeleteRevision/);
    });
});

const DB = `compat_revcluster_${Date.now().toString(36)}`;

describe("revisions on a 3-node cluster", () => {
    let tmp;
    let nodes = [];
    let store;
    const pinned = {};
    let failed = false;
    const step = fn => async () => {
        try {
            await fn();
        } catch (err) {
            failed = true;
            throw err;
        }
    };
    process.once("exit", () => killAllSync(nodes));

    before(async () => {
        let bin;
        ({ tmp, bin } = prepare("i2"));
        const a = new Node(tmp, "A", await freePort(), await freePort());
        nodes = [a,
            new Node(tmp, "B", await freePort(), await freePort(), { join: a.url }),
            new Node(tmp, "C", await freePort(), await freePort(), { join: a.url })];
        await startCluster(nodes, bin);
    }, { timeout: 180_000 });

    after(async () => {
        for (const s of [store, ...Object.values(pinned)]) {
            if (s) {
                s.dispose();
            }
        }
        for (const n of nodes) {
            await n.kill9();
        }
        if (failed) {
            dumpLogs("i2", nodes);
        }
        removeTmp(tmp, "i2");
    });

    it("creates the database on three nodes", step(async () => {
        store = new DocumentStore(nodes.map(n => n.url), DB);
        store.initialize();
        await store.maintenance.server.send(new CreateDatabaseOperation({ databaseName: DB }, 3));
        await waitDatabaseOn(nodes, DB);
        for (const n of nodes) {
            const s = new DocumentStore(n.url, DB);
            s.conventions.disableTopologyUpdates = true;
            s.initialize();
            pinned[n.tag] = s;
        }
    }));

    it("a configuration set through B keeps the last 3, written on A, read the same on A, B and C", step(async () => {
        const res = await pinned.B.maintenance.send(new ConfigureRevisionsOperation(configuration({ keep: 3 })));
        assert.ok(res.raftCommandIndex > 0);
        // The configuration reaches A through the cluster state.
        await eventually("configuration on A", 10_000, async () => {
            const r = await nodes[0].request("GET", `/databases/${DB}/revisions/config`);
            return [r.status === 200 && r.json && r.json.Collections, `${r.status} ${r.text}`];
        });
        await writeVersions(pinned.A, "users/1", 1, 5);
        const onA = await pinned.A.openSession().advanced.revisions.getMetadataFor("users/1");
        assert.equal(onA.length, 3);
        const wanted = onA.map(m => `${m["@change-vector"]} ${m["@last-modified"]} ${m["@flags"]}`);
        for (const tag of ["B", "C"]) {
            await eventually(`revisions on ${tag}`, 20_000, async () => {
                const metas = await pinned[tag].openSession().advanced.revisions.getMetadataFor("users/1");
                const got = metas.map(m => `${m["@change-vector"]} ${m["@last-modified"]} ${m["@flags"]}`);
                return [JSON.stringify(got) === JSON.stringify(wanted), `${tag}: ${JSON.stringify(got)} want ${JSON.stringify(wanted)}`];
            });
            const s = pinned[tag].openSession();
            const bodies = await s.advanced.revisions.getFor("users/1");
            assert.deepEqual(bodies.map(u => u.version), [5, 4, 3], tag);
            const one = await s.advanced.revisions.get(onA[1]["@change-vector"]);
            assert.equal(one.version, 4, tag);
            const doc = await s.load("users/1");
            assert.match(s.advanced.getMetadataFor(doc)["@flags"], /HasRevisions/, tag);
        }
    }));
});
