"use strict";
// I4 (issue 15): compare-exchange values and cluster-wide transactions with the npm client, on a
// 3-node cluster of its own (as f3 does). Values live in the cluster state: one written through one
// node is read back the same from the others; a cluster-wide session's documents are written by
// every node with the same change vector. On the suite's one node (ROOKERY_URL): values included by
// a load (includeCompareExchangeValue) or a query (include cmpxchg()), read from the session.
const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const {
    DocumentStore,
    CreateDatabaseOperation,
    PutCompareExchangeValueOperation,
    GetCompareExchangeValueOperation,
    GetCompareExchangeValuesOperation,
    DeleteCompareExchangeValueOperation,
} = require("ravendb");
const { eventually, prepare, removeTmp, Node, startCluster, waitDatabaseOn, killAllSync, dumpLogs, freePort } = require("./cluster-helpers");
const h = require("./helpers");

const DB = `compat_cmpxchg_${Date.now().toString(36)}`;

class User {
    constructor(init) {
        Object.assign(this, init);
    }
}

describe("compare exchange and cluster-wide transactions on a 3-node cluster", () => {
    let tmp;
    let nodes = [];
    const pinned = {}; // tag -> store that only talks to that node
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
        ({ tmp, bin } = prepare("i4"));
        const a = new Node(tmp, "A", await freePort(), await freePort());
        nodes = [a,
            new Node(tmp, "B", await freePort(), await freePort(), { join: a.url }),
            new Node(tmp, "C", await freePort(), await freePort(), { join: a.url })];
        await startCluster(nodes, bin);
    }, { timeout: 180_000 });

    after(async () => {
        for (const s of Object.values(pinned)) {
            s.dispose();
        }
        for (const n of nodes) {
            await n.kill9();
        }
        if (failed) {
            dumpLogs("i4", nodes);
        }
        removeTmp(tmp, "i4");
    });

    // A value read from every node (each through its own pinned store) once it has applied the log.
    const valueEverywhere = async (key, check) => {
        for (const n of nodes) {
            await eventually(`${key} on ${n.tag}`, 10_000, async () => {
                const v = await pinned[n.tag].operations.send(new GetCompareExchangeValueOperation(key));
                try {
                    check(v, n.tag);
                    return [true, ""];
                } catch (err) {
                    return [false, `${n.tag}: ${JSON.stringify(v)} ${err.message}`];
                }
            });
        }
    };

    it("creates the database on all three nodes and a store pinned to each", step(async () => {
        const store = new DocumentStore(nodes.map(n => n.url), DB);
        store.initialize();
        try {
            await store.maintenance.server.send(new CreateDatabaseOperation({ databaseName: DB }, 3));
        } finally {
            store.dispose();
        }
        await waitDatabaseOn(nodes, DB);
        for (const n of nodes) {
            const s = new DocumentStore(n.url, DB);
            s.conventions.disableTopologyUpdates = true;
            s.initialize();
            pinned[n.tag] = s;
        }
    }));

    it("put with index 0 creates, a stale index fails, and every node reads the same value", step(async () => {
        const r = await pinned.A.operations.send(new PutCompareExchangeValueOperation("emails/ayende@example.com", { userId: "users/1" }, 0));
        assert.equal(r.successful, true);
        assert.ok(r.index > 0);
        assert.deepEqual(r.value, { userId: "users/1" });

        const again = await pinned.B.operations.send(new PutCompareExchangeValueOperation("emails/ayende@example.com", { userId: "users/2" }, 0));
        assert.equal(again.successful, false, "a second create must fail");
        assert.equal(again.index, r.index, "the failed put reports the current index");
        assert.deepEqual(again.value, { userId: "users/1" }, "and the current value");

        await valueEverywhere("emails/ayende@example.com", (v, tag) => {
            assert.ok(v, `missing on ${tag}`);
            assert.equal(v.index, r.index);
            assert.deepEqual(v.value, { userId: "users/1" });
        });

        // Update with the current index, through node C; a stale index then fails.
        const upd = await pinned.C.operations.send(new PutCompareExchangeValueOperation("emails/ayende@example.com", { userId: "users/3" }, r.index));
        assert.equal(upd.successful, true);
        assert.ok(upd.index > r.index);
        const stale = await pinned.A.operations.send(new PutCompareExchangeValueOperation("emails/ayende@example.com", { userId: "users/4" }, r.index));
        assert.equal(stale.successful, false);
        await valueEverywhere("emails/ayende@example.com", v => {
            assert.equal(v.index, upd.index);
            assert.deepEqual(v.value, { userId: "users/3" });
        });

        // Primitive values and metadata.
        const n = await pinned.B.operations.send(new PutCompareExchangeValueOperation("counters/visits", 42, 0, { "@expires": "2100-01-01T00:00:00.0000000Z" }));
        assert.equal(n.successful, true);
        await valueEverywhere("counters/visits", got => {
            assert.ok(got);
            assert.equal(got.value, 42);
            assert.equal(got.metadata["@expires"], "2100-01-01T00:00:00.0000000Z");
        });
    }));

    it("gets by keys and by prefix, with paging", step(async () => {
        for (const k of ["prefix/a", "prefix/b", "prefix/c", "other/x"]) {
            const r = await pinned.A.operations.send(new PutCompareExchangeValueOperation(k, { k }, 0));
            assert.equal(r.successful, true, k);
        }
        await eventually("prefix values on C", 10_000, async () => {
            const all = await pinned.C.operations.send(new GetCompareExchangeValuesOperation({ startWith: "prefix/" }));
            return [Object.keys(all).length === 3, JSON.stringify(Object.keys(all))];
        });
        const page = await pinned.C.operations.send(new GetCompareExchangeValuesOperation({ startWith: "prefix/", start: 1, pageSize: 1 }));
        assert.deepEqual(Object.keys(page), ["prefix/b"]);
        let byKeys;
        await eventually("values by key on B", 10_000, async () => {
            byKeys = await pinned.B.operations.send(new GetCompareExchangeValuesOperation({ keys: ["prefix/a", "other/x", "missing/key"] }));
            return [!!byKeys["other/x"], JSON.stringify(Object.keys(byKeys))];
        });
        assert.deepEqual(byKeys["prefix/a"].value, { k: "prefix/a" });
        assert.deepEqual(byKeys["other/x"].value, { k: "other/x" });
        assert.ok(!byKeys["missing/key"], "a missing key has no value");
        assert.equal(await pinned.A.operations.send(new GetCompareExchangeValueOperation("missing/key")), null);
    }));

    it("delete needs the current index", step(async () => {
        const cur = await pinned.A.operations.send(new GetCompareExchangeValueOperation("other/x"));
        const wrong = await pinned.B.operations.send(new DeleteCompareExchangeValueOperation("other/x", cur.index - 1));
        assert.equal(wrong.successful, false);
        const del = await pinned.B.operations.send(new DeleteCompareExchangeValueOperation("other/x", cur.index));
        assert.equal(del.successful, true);
        assert.deepEqual(del.value, { k: "other/x" });
        await valueEverywhere("other/x", v => assert.equal(v, null));
    }));

    it("a cluster-wide session creates values with documents; every node has both", step(async () => {
        const s = pinned.B.openSession({ transactionMode: "ClusterWide" });
        s.advanced.clusterTransaction.createCompareExchangeValue("usernames/ayende", "users/ayende");
        await s.store(new User({ name: "Ayende" }), "users/ayende");
        await s.saveChanges();

        await valueEverywhere("usernames/ayende", v => {
            assert.ok(v);
            assert.equal(v.value, "users/ayende");
        });
        const cvs = new Set();
        for (const n of nodes) {
            await eventually(`users/ayende on ${n.tag}`, 10_000, async () => {
                const doc = await pinned[n.tag].openSession().load("users/ayende");
                return [doc && doc.name === "Ayende", JSON.stringify(doc)];
            });
            const sess = pinned[n.tag].openSession();
            const doc = await sess.load("users/ayende");
            cvs.add(sess.advanced.getChangeVectorFor(doc));
        }
        assert.equal(cvs.size, 1, `every node has the same change vector: ${[...cvs]}`);
        assert.match([...cvs][0], /RAFT:\d+-/);
    }));

    it("a cluster-wide session reads, updates and deletes values with documents", step(async () => {
        const s = pinned.C.openSession({ transactionMode: "ClusterWide" });
        const v = await s.advanced.clusterTransaction.getCompareExchangeValue("usernames/ayende");
        assert.equal(v.value, "users/ayende");
        v.value = "users/oren";
        const user = await s.load("users/ayende");
        user.name = "Oren";
        await s.saveChanges();
        await valueEverywhere("usernames/ayende", got => assert.equal(got.value, "users/oren"));
        for (const n of nodes) {
            await eventually(`Oren on ${n.tag}`, 10_000, async () => {
                const doc = await pinned[n.tag].openSession().load("users/ayende");
                return [doc && doc.name === "Oren", JSON.stringify(doc)];
            });
        }

        const d = pinned.A.openSession({ transactionMode: "ClusterWide" });
        const cur = await d.advanced.clusterTransaction.getCompareExchangeValue("usernames/ayende");
        d.advanced.clusterTransaction.deleteCompareExchangeValue(cur);
        await d.delete("users/ayende");
        await d.saveChanges();
        await valueEverywhere("usernames/ayende", got => assert.equal(got, null));
        for (const n of nodes) {
            await eventually(`users/ayende deleted on ${n.tag}`, 10_000, async () => {
                const doc = await pinned[n.tag].openSession().load("users/ayende");
                return [doc === null, JSON.stringify(doc)];
            });
        }
    }));

    it("a stale cluster-wide transaction fails with ConcurrencyException and writes nothing", step(async () => {
        const first = pinned.A.openSession({ transactionMode: "ClusterWide" });
        first.advanced.clusterTransaction.createCompareExchangeValue("seats/12A", "alice");
        await first.store(new User({ name: "Alice" }), "users/alice");
        await first.saveChanges();

        // Same key again, with a new document: the value exists, so nothing is written.
        const second = pinned.B.openSession({ transactionMode: "ClusterWide" });
        second.advanced.clusterTransaction.createCompareExchangeValue("seats/12A", "bob");
        await second.store(new User({ name: "Bob" }), "users/bob");
        await assert.rejects(second.saveChanges(), err => {
            assert.equal(err.name, "ConcurrencyException", err.stack);
            return true;
        });
        await valueEverywhere("seats/12A", v => assert.equal(v.value, "alice"));
        assert.equal(await pinned.B.openSession().load("users/bob"), null, "a failed transaction wrote its document");

        // Two sessions loaded users/alice at the same version; the second save has a stale guard.
        const s1 = pinned.C.openSession({ transactionMode: "ClusterWide" });
        const s2 = pinned.A.openSession({ transactionMode: "ClusterWide" });
        await eventually("users/alice on C", 10_000, async () => {
            const d = await pinned.C.openSession().load("users/alice");
            return [!!d, "missing"];
        });
        const a1 = await s1.load("users/alice");
        const a2 = await s2.load("users/alice");
        a1.name = "Alice 1";
        a2.name = "Alice 2";
        await s1.saveChanges();
        await assert.rejects(s2.saveChanges(), err => {
            assert.equal(err.name, "ConcurrencyException", err.stack);
            return true;
        });
        for (const n of nodes) {
            await eventually(`Alice 1 on ${n.tag}`, 10_000, async () => {
                const doc = await pinned[n.tag].openSession().load("users/alice");
                return [doc && doc.name === "Alice 1", JSON.stringify(doc)];
            });
        }
    }));
});

// Compare-exchange includes on one node (ROOKERY_URL): a load or a query that includes the values
// whose keys a document holds; a cluster-wide session then reads them without a request (a missing
// one too), and a changed value is not served from the HTTP cache.
describe("compare-exchange includes on one node", () => {
    let ctx;
    before(async () => {
        ctx = await h.freshDatabase("cmpxchg_includes");
        const { store } = ctx;
        const put = await store.operations.send(new PutCompareExchangeValueOperation("managers/ann", { name: "Boss" }, 0));
        assert.equal(put.successful, true);
        const s = store.openSession();
        await s.store(new User({ name: "Ann", manager: "managers/ann", backup: "managers/none" }), "users/1");
        await s.saveChanges();
    });
    after(async () => {
        await ctx.teardown();
    });

    const clusterSession = () => ctx.store.openSession({ transactionMode: "ClusterWide" });

    it("load with includeCompareExchangeValue", async () => {
        const s = clusterSession();
        const user = await s.load("users/1", {
            includes: i => i.includeCompareExchangeValue("manager").includeCompareExchangeValue("backup"),
        });
        assert.equal(user.name, "Ann");
        const n = s.advanced.numberOfRequests;
        const v = await s.advanced.clusterTransaction.getCompareExchangeValue("managers/ann");
        assert.equal(v.value.name, "Boss");
        assert.ok(v.index > 0);
        assert.equal(await s.advanced.clusterTransaction.getCompareExchangeValue("managers/none"), null);
        assert.equal(s.advanced.numberOfRequests, n, "the included values (the missing one too) needed no request");

        // Without the include, the session asks.
        const t = clusterSession();
        await t.load("users/1");
        const m = t.advanced.numberOfRequests;
        assert.equal((await t.advanced.clusterTransaction.getCompareExchangeValue("managers/ann")).value.name, "Boss");
        assert.equal(t.advanced.numberOfRequests, m + 1);
    });

    it("query include cmpxchg", async () => {
        const s = clusterSession();
        const users = await s.query({ collection: "Users" }).whereEquals("name", "Ann")
            .include(i => i.includeCompareExchangeValue("manager")).all();
        assert.equal(users.length, 1);
        const n = s.advanced.numberOfRequests;
        const v = await s.advanced.clusterTransaction.getCompareExchangeValue("managers/ann");
        assert.equal(v.value.name, "Boss");
        assert.equal(s.advanced.numberOfRequests, n, "the value came with the query");

        const r = clusterSession();
        await r.advanced.rawQuery("from Users as u include cmpxchg(u.backup)").all();
        const m = r.advanced.numberOfRequests;
        assert.equal(await r.advanced.clusterTransaction.getCompareExchangeValue("managers/none"), null);
        assert.equal(r.advanced.numberOfRequests, m, "the missing value came with the raw query");
    });

    it("a changed value is not served from the HTTP cache", async () => {
        const { store } = ctx;
        let s = clusterSession();
        await s.load("users/1", { includes: i => i.includeCompareExchangeValue("manager") });
        const old = await s.advanced.clusterTransaction.getCompareExchangeValue("managers/ann");
        const put = await store.operations.send(new PutCompareExchangeValueOperation("managers/ann", { name: "New boss" }, old.index));
        assert.equal(put.successful, true);
        for (const load of [
            t => t.load("users/1", { includes: i => i.includeCompareExchangeValue("manager") }),
            t => t.query({ collection: "Users" }).whereEquals("name", "Ann").include(i => i.includeCompareExchangeValue("manager")).all(),
        ]) {
            s = clusterSession();
            await load(s);
            const n = s.advanced.numberOfRequests;
            assert.equal((await s.advanced.clusterTransaction.getCompareExchangeValue("managers/ann")).value.name, "New boss");
            assert.equal(s.advanced.numberOfRequests, n);
        }
    });
});
