"use strict";
// I3: document counters through the npm client, on one node (ROOKERY_URL) and on a 3-node
// cluster of its own.
//
//   1. session.countersFor(id).increment/get/getAll/delete, sent as Counters commands of bulk_docs;
//   2. @metadata.@counters and @flags on the loaded document, and a cached GET sees a change;
//   3. CounterBatchOperation and GetCountersOperation (with full values);
//   4. session.load with includeCounter / includeAllCounters (no extra request afterwards);
//      counter() and counterRaw() in a query's select;
//   5. a missing document: DocumentDoesNotExistException; deleting the document deletes its counters;
//   6. a 3-node cluster: increments on A, B and C at once, the exact same sum read on each.
const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const {
    DocumentStore, CreateDatabaseOperation, CounterBatchOperation, CounterBatch,
    DocumentCountersOperation, CounterOperation, GetCountersOperation, PatchByQueryOperation,
} = require("ravendb");
const h = require("./helpers");
const { eventually, prepare, removeTmp, Node, startCluster, waitDatabaseOn, killAllSync, dumpLogs, freePort } =
    require("./cluster-helpers");

class Post {
    constructor(title) {
        this.title = title;
    }
}

const counterBatch = (docId, ops) => {
    const doc = new DocumentCountersOperation();
    doc.documentId = docId;
    doc.operations = ops.map(([type, name, delta]) =>
        delta === undefined ? CounterOperation.create(name, type) : CounterOperation.create(name, type, delta));
    const b = new CounterBatch();
    b.documents = [doc];
    return b;
};

describe("counters on one node", () => {
    let ctx;
    before(async () => {
        ctx = await h.freshDatabase("counters");
    });
    after(async () => {
        await ctx.teardown();
    });

    it("increments, reads and deletes through the session", async () => {
        const { store } = ctx;
        let s = store.openSession();
        await s.store(new Post("one"), "posts/1");
        await s.saveChanges();

        s = store.openSession();
        s.countersFor("posts/1").increment("Likes");
        s.countersFor("posts/1").increment("likes", 4);
        s.countersFor("posts/1").increment("Views", 10);
        await s.saveChanges();

        s = store.openSession();
        assert.equal(await s.countersFor("posts/1").get("LIKES"), 5);
        assert.deepEqual(await s.countersFor("posts/1").get(["Likes", "Views"]), { Likes: 5, Views: 10 });
        assert.deepEqual(await s.countersFor("posts/1").getAll(), { Likes: 5, Views: 10 });
        assert.equal(await s.countersFor("posts/1").get("missing"), null);

        s = store.openSession();
        const post = await s.load("posts/1");
        const md = s.advanced.getMetadataFor(post);
        assert.deepEqual(md["@counters"], ["Likes", "Views"]);
        assert.match(md["@flags"], /HasCounters/);
        s.countersFor(post).increment("Likes", -2);
        s.countersFor(post).delete("Views");
        await s.saveChanges();

        s = store.openSession();
        assert.deepEqual(await s.countersFor("posts/1").getAll(), { Likes: 3 });
        const again = await s.load("posts/1");
        assert.deepEqual(s.advanced.getMetadataFor(again)["@counters"], ["Likes"]);
    });

    it("a cached GET of the document sees a counter change", async () => {
        const { store } = ctx;
        const rec = h.recordResponses ? h.recordResponses(store.getRequestExecutor()) : null;
        let s = store.openSession();
        await s.load("posts/1");
        s = store.openSession();
        s.countersFor("posts/1").increment("Shares");
        await s.saveChanges();
        s = store.openSession();
        const post = await s.load("posts/1");
        assert.deepEqual(s.advanced.getMetadataFor(post)["@counters"], ["Likes", "Shares"]);
        assert.ok(rec === null || rec.seen.length > 0);
    });

    it("CounterBatchOperation and GetCountersOperation", async () => {
        const { store } = ctx;
        const res = await store.operations.send(new CounterBatchOperation(counterBatch("posts/1", [
            ["Increment", "Likes", 7], ["Increment", "Downloads", 2], ["Get", "Shares"],
        ])));
        const byName = Object.fromEntries(res.counters.map(c => [c.counterName, c.totalValue]));
        assert.deepEqual(byName, { Likes: 10, Downloads: 2, Shares: 1 });

        const one = await store.operations.send(new GetCountersOperation("posts/1", "likes"));
        assert.equal(one.counters.length, 1);
        assert.equal(one.counters[0].totalValue, 10);
        assert.equal(one.counters[0].documentId, "posts/1");

        const all = await store.operations.send(new GetCountersOperation("posts/1"));
        assert.deepEqual(all.counters.map(c => [c.counterName, c.totalValue]),
            [["Downloads", 2], ["Likes", 10], ["Shares", 1]]);

        const full = await store.operations.send(new GetCountersOperation("posts/1", ["Likes", "nope"], true));
        assert.equal(full.counters.length, 2);
        assert.equal(full.counters[1], null);
        const parts = Object.values(full.counters[0].counterValues);
        assert.equal(parts.reduce((a, b) => a + b, 0), 10);

        await store.operations.send(new CounterBatchOperation(counterBatch("posts/1", [["Delete", "Downloads"]])));
        const after = await store.operations.send(new GetCountersOperation("posts/1", "Downloads"));
        assert.equal(after.counters[0], null);
    });

    it("query results carry @counters in their metadata", async () => {
        const { store } = ctx;
        const s = store.openSession();
        const posts = await s.query({ collection: "Posts" }).whereEquals("title", "one").all();
        assert.equal(posts.length, 1);
        assert.deepEqual(s.advanced.getMetadataFor(posts[0])["@counters"], ["Likes", "Shares"]);
    });

    it("includes counters in a query", async () => {
        const { store } = ctx;
        let s = store.openSession();
        await s.query({ collection: "Posts" }).whereEquals("title", "one").include(i => i.includeCounter("Likes")).all();
        let n = s.advanced.numberOfRequests;
        assert.equal(await s.countersFor("posts/1").get("Likes"), 10);
        assert.equal(s.advanced.numberOfRequests, n, "the counter came with the query");

        s = store.openSession();
        await s.query({ collection: "Posts" }).whereEquals("title", "one").include(i => i.includeAllCounters()).all();
        n = s.advanced.numberOfRequests;
        assert.deepEqual(await s.countersFor("posts/1").getAll(), { Likes: 10, Shares: 1 });
        assert.equal(s.advanced.numberOfRequests, n, "all counters came with the query");
    });

    it("includes counters on load", async () => {
        const { store } = ctx;
        let s = store.openSession();
        await s.load("posts/1", { includes: i => i.includeCounter("Likes") });
        const n = s.advanced.numberOfRequests;
        assert.equal(await s.countersFor("posts/1").get("Likes"), 10);
        assert.equal(s.advanced.numberOfRequests, n, "the included counter needs no request");

        s = store.openSession();
        await s.load("posts/1", { includes: i => i.includeAllCounters() });
        const m = s.advanced.numberOfRequests;
        assert.deepEqual(await s.countersFor("posts/1").getAll(), { Likes: 10, Shares: 1 });
        assert.equal(s.advanced.numberOfRequests, m, "all counters were included");
    });

    it("projects counters in a query: counter(), counterRaw(), null for a missing one", async () => {
        const { store } = ctx;
        const s = store.openSession();
        const rows = await s.advanced.rawQuery(
            "from Posts as p where p.title = 'one' select p.title, counter(p, 'Likes') as likes, " +
            "counterRaw(p, 'Likes') as raw, counter(p, 'Nope') as nope").all();
        assert.equal(rows.length, 1);
        assert.equal(rows[0].title, "one");
        assert.equal(rows[0].likes, 10);
        assert.equal(rows[0].nope, null);
        const keys = Object.keys(rows[0].raw);
        assert.equal(keys.length, 1);
        assert.match(keys[0], /^A:\d+-/, "keyed as GetCountersOperation's full values are");
        assert.equal(rows[0].raw[keys[0]], 10);
        // The client camel-cases the keys of GetCountersOperation's values ("a:8-…"); a projection is left as sent.
        const full = await store.operations.send(new GetCountersOperation("posts/1", ["Likes"], true));
        const lower = o => Object.fromEntries(Object.entries(o).map(([k, v]) => [k.toLowerCase(), v]));
        assert.deepEqual(lower(rows[0].raw), lower(full.counters[0].counterValues));

        const byParam = await s.advanced.rawQuery("from Posts select counter($name)").addParameter("name", "Shares").all();
        assert.deepEqual(byParam.map(r => r.Shares), [1]);

        await assert.rejects(s.advanced.rawQuery("from Posts as p select counter(x, 'Likes')").all(),
            h.errorNamed("InvalidQueryException"));
    });

    it("patch scripts read, increment and delete counters", async () => {
        const { store } = ctx;
        const op = await store.operations.send(new PatchByQueryOperation(
            "from Posts where title = 'one' update { incrementCounter(this, 'Likes', 5); this.likes = counter(this, 'likes'); " +
            "incrementCounter(id(this), 'Patched'); deleteCounter(this, 'Shares'); }"));
        await op.waitForCompletion();
        const got = await store.operations.send(new GetCountersOperation("posts/1"));
        assert.deepEqual(got.counters.map(c => [c.counterName, c.totalValue]), [["Likes", 15], ["Patched", 1]]);
        const s = store.openSession();
        const post = await s.load("posts/1");
        assert.equal(post.likes, 15);
        assert.deepEqual(s.advanced.getMetadataFor(post)["@counters"], ["Likes", "Patched"]);
    });

    it("refuses a missing document and drops counters with their document", async () => {
        const { store } = ctx;
        let s = store.openSession();
        s.countersFor("posts/missing").increment("Likes");
        await assert.rejects(s.saveChanges(), h.errorNamed("DocumentDoesNotExistException"));
        await assert.rejects(store.operations.send(new CounterBatchOperation(counterBatch("posts/missing", [["Increment", "x", 1]]))),
            h.errorNamed("DocumentDoesNotExistException"));

        s = store.openSession();
        await s.store(new Post("two"), "posts/2");
        s.countersFor("posts/2").increment("Likes", 3);
        await s.saveChanges();
        s = store.openSession();
        s.delete("posts/2");
        await s.saveChanges();
        s = store.openSession();
        await s.store(new Post("two again"), "posts/2");
        await s.saveChanges();
        const got = await store.operations.send(new GetCountersOperation("posts/2"));
        assert.deepEqual(got.counters, []);
    });
});

const DB = `compat_counters_${Date.now().toString(36)}`;
const TAGS = ["A", "B", "C"];

describe("counters on a 3-node cluster", () => {
    let tmp;
    let nodes = [];
    const stores = [];
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
    const pinned = node => {
        const store = new DocumentStore(node.url, DB);
        store.conventions.disableTopologyUpdates = true;
        store.initialize();
        stores.push(store);
        return store;
    };

    before(async () => {
        let bin;
        ({ tmp, bin } = prepare("i3"));
        const ports = {};
        for (const t of TAGS) {
            ports[t] = { http: await freePort(), raft: await freePort() };
        }
        const urlOf = t => `http://127.0.0.1:${ports[t].http}`;
        nodes = TAGS.map((t, i) => new Node(tmp, t, ports[t].http, ports[t].raft, { join: i === 0 ? null : urlOf(TAGS[0]) }));
        await startCluster(nodes, bin);
        const store = new DocumentStore(nodes.map(n => n.url), DB);
        store.initialize();
        stores.push(store);
        await store.maintenance.server.send(new CreateDatabaseOperation({ databaseName: DB }, 3));
        await waitDatabaseOn(nodes, DB);
    }, { timeout: 180_000 });

    after(async () => {
        for (const s of stores) {
            s.dispose();
        }
        for (const n of nodes) {
            await n.kill9();
        }
        if (failed) {
            dumpLogs("i3", nodes);
        }
        removeTmp(tmp, "i3");
    });

    it("increments on A, B and C at once read back the exact same sum on each", step(async () => {
        const [a, b, c] = nodes.map(pinned);
        let s = a.openSession();
        await s.store(new Post("clustered"), "posts/c");
        await s.saveChanges();
        for (const st of [b, c]) {
            await eventually("posts/c replicated", 20_000, async () => {
                const got = await st.openSession().load("posts/c");
                return [got !== null, "not there yet"];
            });
        }
        const rounds = 20;
        let want = 0;
        const work = [a, b, c].map(async (st, i) => {
            for (let r = 0; r < rounds; r++) {
                const sess = st.openSession();
                sess.countersFor("posts/c").increment("Hits", i + 1);
                sess.countersFor("posts/c").increment(`node${i}`, 1);
                await sess.saveChanges();
            }
        });
        await Promise.all(work);
        want = rounds * (1 + 2 + 3);
        for (const [i, st] of [a, b, c].entries()) {
            await eventually(`sum on ${TAGS[i]}`, 20_000, async () => {
                const r = await st.operations.send(new GetCountersOperation("posts/c"));
                const m = Object.fromEntries(r.counters.map(x => [x.counterName, x.totalValue]));
                const ok = m.Hits === want && m.node0 === rounds && m.node1 === rounds && m.node2 === rounds;
                return [ok, JSON.stringify(m)];
            });
        }
        // Every node lists the same counters in the document's metadata, and no conflict.
        for (const st of [a, b, c]) {
            const sess = st.openSession();
            const doc = await sess.load("posts/c");
            assert.deepEqual(sess.advanced.getMetadataFor(doc)["@counters"], ["Hits", "node0", "node1", "node2"]);
            const full = await st.operations.send(new GetCountersOperation("posts/c", "Hits", true));
            assert.equal(Object.keys(full.counters[0].counterValues).length, 3, "one part per node");
        }
        for (const n of nodes) {
            const r = await n.request("GET", `/databases/${DB}/replication/conflicts`);
            assert.equal(r.status, 200);
            assert.equal((r.json.Results || []).length, 0, `conflicts on ${n.tag}: ${r.text}`);
        }
    }));
});
