"use strict";
// H3 (issue 14): the Changes API with the npm client, unchanged: store.changes() over one websocket
// (GET /databases/{db}/changes), forDocument / forDocumentsInCollection / forDocumentsStartingWith /
// forAllDocuments / forIndex / forAllIndexes / forOperationId / forAllOperations / forCounterOfDocument /
// forAllCounters / forTimeSeriesOfDocument, each seeing what
// ANOTHER client (another DocumentStore) does; and a consumer that stops reading, dropped by the
// server with a reason while the writes keep their latency.
const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const {
    AbstractJavaScriptIndexCreationTask,
    IndexQuery,
    DeleteByQueryOperation,
    GetNextOperationIdCommand,
} = require("ravendb");
const { WebSocket } = require("ws");
const h = require("./helpers");
const ch = require("./cluster-helpers");

class Fruit {
    constructor(init) {
        Object.assign(this, init);
    }
}

class Fruits_ByName extends AbstractJavaScriptIndexCreationTask {
    constructor() {
        super();
        this.map("Fruits", f => ({ Name: f.Name }));
    }
}

// Collects what an observable delivers; waitFor(pred) resolves with the first match (already
// delivered or later), or rejects after ms.
function collect(observable) {
    const got = [];
    const waiters = [];
    const errors = [];
    observable.on("data", v => {
        got.push(v);
        for (const w of [...waiters]) {
            if (w.pred(v)) {
                waiters.splice(waiters.indexOf(w), 1);
                w.resolve(v);
            }
        }
    });
    observable.on("error", e => errors.push(e));
    return {
        got,
        errors,
        waitFor(what, pred, ms = 10_000) {
            const found = got.find(pred);
            if (found) {
                return Promise.resolve(found);
            }
            return new Promise((resolve, reject) => {
                const w = { pred, resolve };
                waiters.push(w);
                setTimeout(() => {
                    const i = waiters.indexOf(w);
                    if (i >= 0) {
                        waiters.splice(i, 1);
                        reject(new Error(`no ${what} within ${ms} ms; got ${JSON.stringify(got)}`));
                    }
                }, ms);
            });
        },
    };
}

describe("H3 Changes API", () => {
    let ctx;
    let writer; // another client: every write below goes through it
    let changes;

    before(async () => {
        ctx = await h.freshDatabase("h3");
        writer = h.newStore(ctx.database);
        changes = ctx.store.changes();
        await changes.ensureConnectedNow();
    });

    after(async () => {
        if (changes) {
            changes.dispose();
        }
        if (writer) {
            writer.dispose();
        }
        if (ctx) {
            await ctx.teardown();
        }
    });

    it("forDocument sees a put and a delete made by another client, with RavenDB's fields", async () => {
        const obs = changes.forDocument("fruits/1");
        const c = collect(obs);
        await obs.ensureSubscribedNow();
        const s = writer.openSession();
        await s.store(new Fruit({ Name: "apple" }), "fruits/1");
        await s.store(new Fruit({ Name: "pear" }), "fruits/2");
        await s.saveChanges();
        const put = await c.waitFor("put of fruits/1", v => v.type === "Put");
        assert.equal(put.id, "fruits/1");
        assert.equal(put.collectionName, "Fruits");
        assert.match(put.changeVector, /^A:\d+-/);
        const d = writer.openSession();
        await d.delete("fruits/1");
        await d.saveChanges();
        const del = await c.waitFor("delete of fruits/1", v => v.type === "Delete");
        assert.equal(del.id, "fruits/1");
        assert.ok(c.got.every(v => v.id === "fruits/1"), "only fruits/1");
        assert.deepEqual(c.errors, []);
    });

    it("forDocumentsInCollection, forDocumentsStartingWith and forAllDocuments filter as RavenDB does", async () => {
        const inColl = changes.forDocumentsInCollection("Fruits");
        const byPrefix = changes.forDocumentsStartingWith("veg/");
        const all = changes.forAllDocuments();
        const cColl = collect(inColl);
        const cPrefix = collect(byPrefix);
        const cAll = collect(all);
        await Promise.all([inColl.ensureSubscribedNow(), byPrefix.ensureSubscribedNow(), all.ensureSubscribedNow()]);
        const s = writer.openSession();
        await s.store(new Fruit({ Name: "plum" }), "fruits/3");
        await s.store({ Name: "leek", "@metadata": { "@collection": "Vegetables" } }, "veg/1");
        await s.saveChanges();
        await cColl.waitFor("fruits/3 in Fruits", v => v.id === "fruits/3");
        await cPrefix.waitFor("veg/1 by prefix", v => v.id === "veg/1");
        await cAll.waitFor("fruits/3 in all", v => v.id === "fruits/3");
        await cAll.waitFor("veg/1 in all", v => v.id === "veg/1");
        await h.sleep(200); // anything wrongly delivered would have arrived with the rest
        assert.ok(cColl.got.every(v => v.collectionName === "Fruits"), JSON.stringify(cColl.got));
        assert.ok(cPrefix.got.every(v => v.id.startsWith("veg/")), JSON.stringify(cPrefix.got));
    });

    it("forIndex and forAllIndexes: an index created through the client reports its batches", async () => {
        const one = changes.forIndex("Fruits/ByName");
        const all = changes.forAllIndexes();
        const cOne = collect(one);
        const cAll = collect(all);
        await Promise.all([one.ensureSubscribedNow(), all.ensureSubscribedNow()]);
        await new Fruits_ByName().execute(writer);
        const batch = await cOne.waitFor("BatchCompleted", v => v.type === "BatchCompleted");
        assert.equal(batch.name, "Fruits/ByName");
        await cAll.waitFor("IndexAdded", v => v.type === "IndexAdded" && v.name === "Fruits/ByName");
        // A later write is indexed and reported again.
        const before = cOne.got.length;
        const s = writer.openSession();
        await s.store(new Fruit({ Name: "cherry" }), "fruits/4");
        await s.saveChanges();
        await cOne.waitFor("a second batch", v => v.type === "BatchCompleted" && cOne.got.indexOf(v) >= before);
        assert.ok(cOne.got.every(v => v.name === "Fruits/ByName"));
    });

    it("forOperationId and forAllOperations follow a delete-by-query to Completed", async () => {
        // Operation ids are the node's; the next one started is the one after this reservation.
        const cmd = new GetNextOperationIdCommand();
        await writer.getRequestExecutor().execute(cmd);
        const base = cmd.result;
        assert.equal(typeof base, "number");
        const byId = [];
        for (let i = 1; i <= 16; i++) { // other test files may start operations meanwhile
            const obs = changes.forOperationId(base + i);
            byId.push({ id: base + i, c: collect(obs) });
            await obs.ensureSubscribedNow();
        }
        const allObs = changes.forAllOperations();
        const cAll = collect(allObs);
        await allObs.ensureSubscribedNow();
        const iq = new IndexQuery();
        iq.query = "from Fruits where Name = 'plum'";
        const op = await writer.operations.send(new DeleteByQueryOperation(iq));
        await op.waitForCompletion();
        const mine = byId.find(x => x.id === op.id);
        assert.ok(mine, `operation ${op.id} is within ${base + 1}..${base + 16}`);
        const done = await mine.c.waitFor("Completed", v => v.state && v.state.status === "Completed");
        assert.equal(done.operationId, op.id, "OperationId is a number");
        assert.equal(done.state.result.total, 1);
        await cAll.waitFor("Completed in all", v => v.operationId === op.id && v.state.status === "Completed");
        for (const other of byId.filter(x => x !== mine)) {
            assert.ok(other.c.got.every(v => v.operationId === other.id));
        }
    });

    it("forCounterOfDocument, forAllCounters and forTimeSeriesOfDocument see another client's counters and series", async () => {
        const one = changes.forCounterOfDocument("FRUITS/10", "likes");
        const allCounters = changes.forAllCounters();
        const series = changes.forTimeSeriesOfDocument("fruits/10");
        const seriesNamed = changes.forTimeSeriesOfDocument("fruits/10", "Steps");
        const cOne = collect(one);
        const cAll = collect(allCounters);
        const cSeries = collect(series);
        const cNamed = collect(seriesNamed);
        await Promise.all([one, allCounters, series, seriesNamed].map(o => o.ensureSubscribedNow()));
        const s = writer.openSession();
        await s.store(new Fruit({ Name: "fig" }), "fruits/10");
        await s.store(new Fruit({ Name: "kiwi" }), "fruits/11");
        await s.saveChanges();
        const c1 = writer.openSession();
        c1.countersFor("fruits/10").increment("Likes", 5);
        c1.countersFor("fruits/11").increment("Likes");
        await c1.saveChanges();
        const c2 = writer.openSession();
        c2.countersFor("fruits/10").increment("Likes", -2);
        await c2.saveChanges();

        const put = await cOne.waitFor("Put of Likes", v => v.type === "Put");
        assert.deepEqual(Object.keys(put).sort(), ["changeVector", "collectionName", "documentId", "name", "type", "value"]);
        assert.equal(put.name, "Likes");
        assert.equal(put.value, 5);
        assert.equal(put.documentId, "fruits/10");
        assert.equal(put.collectionName, "Fruits");
        assert.match(put.changeVector, /^A:\d+-/);
        const inc = await cOne.waitFor("Increment of Likes", v => v.type === "Increment");
        assert.equal(inc.value, 3, "the counter's new total");
        await cAll.waitFor("fruits/10 Likes = 3", v => v.documentId === "fruits/10" && v.value === 3);
        assert.deepEqual(cAll.got.map(v => `${v.type} ${v.documentId}/${v.name}=${v.value}`),
            ["Put fruits/10/Likes=5", "Put fruits/11/Likes=1", "Increment fruits/10/Likes=3"]);

        const at = new Date(Date.UTC(2024, 4, 1, 10, 0, 0));
        const later = new Date(at.getTime() + 60_000);
        const t1 = writer.openSession();
        const ts = t1.timeSeriesFor("fruits/10", "HeartRate");
        ts.append(at, 70);
        ts.append(later, [71]);
        await t1.saveChanges();
        const tsPut = await cSeries.waitFor("Put of HeartRate", v => v.type === "Put");
        assert.equal(tsPut.name, "HeartRate");
        assert.equal(tsPut.documentId, "fruits/10");
        assert.equal(tsPut.collectionName, "Fruits");
        assert.match(tsPut.changeVector, /^A:\d+-/);
        assert.ok(tsPut.from instanceof Date && tsPut.to instanceof Date, "From and To parsed as dates");
        assert.equal(tsPut.from.getTime(), at.getTime());
        assert.equal(tsPut.to.getTime(), later.getTime());
        const t2 = writer.openSession();
        t2.timeSeriesFor("fruits/10", "HeartRate").delete(at, at);
        await t2.saveChanges();
        const tsDel = await cSeries.waitFor("Delete of HeartRate", v => v.type === "Delete");
        assert.equal(tsDel.from.getTime(), at.getTime());
        assert.equal(tsDel.to.getTime(), at.getTime());

        await h.sleep(200); // anything wrongly delivered would have arrived with the rest
        assert.deepEqual(cOne.got.map(v => v.type), ["Put", "Increment"], "only fruits/10's Likes");
        assert.deepEqual(cNamed.got, [], "another series of the document");
        assert.deepEqual(cSeries.got.map(v => v.type), ["Put", "Delete"]);
        for (const c of [cOne, cAll, cSeries, cNamed]) {
            assert.deepEqual(c.errors, []);
        }
    });

    it("a bad command gets RavenDB's Error message and the socket is closed", async () => {
        const url = `${h.serverUrl().replace("http://", "ws://")}/databases/${ctx.database}/changes`;
        const ws = new WebSocket(url);
        const frames = [];
        ws.on("message", d => frames.push(...[].concat(JSON.parse(d))));
        await new Promise((resolve, reject) => {
            ws.once("open", resolve);
            ws.once("error", reject);
        });
        ws.send(JSON.stringify({ CommandId: 1, Command: "watch-docs", Param: null }));
        ws.send(JSON.stringify({ CommandId: 2, Command: "frobnicate", Param: null }));
        const [code] = await new Promise(resolve => ws.once("close", (c, r) => resolve([c, r.toString()])));
        assert.equal(code, 1008);
        assert.deepEqual(frames[0], { TopologyChange: true });
        assert.deepEqual(frames[1], { CommandId: 1, Type: "Confirm" });
        assert.equal(frames[2].Type, "Error");
        assert.match(frames[2].Exception, /frobnicate/);
    });

    it("the socket of a database that does not exist is refused before the upgrade", async () => {
        const ws = new WebSocket(`${h.serverUrl().replace("http://", "ws://")}/databases/no_such_db_h3/changes`);
        const status = await new Promise(resolve => {
            ws.once("unexpected-response", (req, res) => resolve(res.statusCode));
            ws.once("open", () => resolve("open"));
            ws.once("error", () => {});
        });
        ws.terminate();
        assert.ok(typeof status === "number" && status >= 400, `refused (${status})`);
    });
});

// A consumer that stops reading: its own node, with a small queue bound so the test stays short.
describe("H3 Changes API: a slow consumer", () => {
    let tmp;
    let node;
    let store;

    before(async () => {
        const p = ch.prepare("h3");
        tmp = p.tmp;
        const [httpPort, raftPort] = [await ch.freePort(), await ch.freePort()];
        node = new ch.Node(tmp, "A", httpPort, raftPort);
        node.args.push("--changes-max-pending", "500");
        node.start(p.bin);
        await node.waitReady();
        store = new (require("ravendb").DocumentStore)(node.url, "slow");
        store.initialize();
        await h.createDatabase(store, "slow");
    });

    after(async () => {
        if (store) {
            store.dispose();
        }
        if (node) {
            await node.kill9();
        }
        ch.removeTmp(tmp, "h3");
    });

    async function droppedSlow() {
        const r = await node.request("GET", "/metrics");
        const m = r.text.match(/^rookery_changes_dropped_total\{reason="slow"\} (\d+)/m);
        return m ? Number(m[1]) : 0;
    }

    it("is dropped with a reason while every write stays fast, and a reading subscriber gets everything", async () => {
        const url = `${node.url.replace("http://", "ws://")}/databases/slow/changes`;
        const open = async () => {
            const ws = new WebSocket(url);
            await new Promise((resolve, reject) => {
                ws.once("open", resolve);
                ws.once("error", reject);
            });
            return ws;
        };
        // The reader: a normal client's subscription.
        const good = store.changes();
        await good.ensureConnectedNow();
        const goodAll = good.forAllDocuments();
        let goodCount = 0;
        goodAll.on("data", () => goodCount++);
        await goodAll.ensureSubscribedNow();
        // The slow one: subscribes, then stops reading (its socket is paused).
        const slow = await open();
        const confirmed = new Promise(resolve => slow.on("message", d => {
            if ([].concat(JSON.parse(d)).some(m => m.Type === "Confirm")) {
                resolve();
            }
        }));
        slow.send(JSON.stringify({ CommandId: 1, Command: "watch-docs", Param: null }));
        await confirmed;
        slow.pause();
        const closed = new Promise(resolve => slow.once("close", (code, reason) => resolve({ code, reason: reason.toString() })));

        const pad = "x".repeat(400); // long ids: the socket buffers fill with fewer documents
        let worst = 0;
        let written = 0;
        for (let batch = 0; batch < 400 && (await droppedSlow()) === 0; batch++) {
            const s = store.openSession();
            for (let i = 0; i < 100; i++) {
                await s.store({ n: written + i, "@metadata": { "@collection": "Items" } }, `items/${pad}/${written + i}`);
            }
            const t0 = Date.now();
            await s.saveChanges();
            worst = Math.max(worst, Date.now() - t0);
            written += 100;
        }
        assert.equal(await droppedSlow(), 1, `the slow socket was dropped (after ${written} documents)`);
        // A write that waited for the stalled socket would take the server's write deadline (30 s).
        assert.ok(worst < 2000, `every write under 2 s (worst ${worst} ms over ${written} documents)`);
        // Once it reads again it finds what was in flight, then the close frame with the reason.
        slow.resume();
        const { code, reason } = await closed;
        assert.equal(code, 1008);
        assert.match(reason, /^too slow: \d+ notifications pending$/);
        await ch.eventually("the reader got every document", 20_000, async () => [goodCount === written, `${goodCount} of ${written}`]);
        good.dispose();
    });
});
