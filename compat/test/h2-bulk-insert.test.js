"use strict";
// Bulk insert (store.bulkInsert()): GET next-operation-id, then one streamed POST /bulk_insert whose body is a
// JSON array of PUT commands; the operation is readable afterwards and a bad command fails finish().
const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { GetCollectionStatisticsOperation, GetOperationStateOperation } = require("ravendb");
const h = require("./helpers");

// H2_BULK_DOCS shrinks the big insert for a quick run; the suite uses the full million.
const N = Number(process.env.H2_BULK_DOCS || 1_000_000);

class Item {
    constructor(n) {
        this.n = n;
    }
}

describe("bulk insert", () => {
    let ctx;
    before(async () => {
        ctx = await h.freshDatabase("bulkins");
    });
    after(async () => ctx && ctx.teardown());

    it(`stores ${N} small documents; the collection counts them all`, async () => {
        const started = Date.now();
        const bulk = ctx.store.bulkInsert();
        for (let i = 0; i < N; i++) {
            // The client's documented fast path: tryStoreSync writes into the buffer without a promise and
            // says false when a flush is due, which store() then does (awaits cost much under node:test).
            const item = new Item(i), id = "items/" + i;
            if (!bulk.tryStoreSync(item, id)) {
                await bulk.store(item, id);
            }
        }
        await bulk.finish();
        const took = (Date.now() - started) / 1000;
        console.log(`# bulk insert of ${N} documents took ${took.toFixed(1)} s (${Math.round(N / took)} docs/s)`);
        const stats = await ctx.store.maintenance.send(new GetCollectionStatisticsOperation());
        assert.equal(stats.collections["Items"], N);
        assert.equal(stats.countOfDocuments, N);
        const s = ctx.store.openSession();
        const last = await s.load("items/" + (N - 1), Item);
        assert.equal(last.n, N - 1);
        assert.equal(s.advanced.getMetadataFor(last)["@collection"], "Items");
    });

    it("stores given ids and metadata, compressed, and the operation stays readable", async () => {
        const bulk = ctx.store.bulkInsert({ useCompression: true });
        await bulk.store({ name: "Ann", "@metadata": { "@collection": "People" } }, "people/ann");
        await bulk.store(new Item(7), "things/7", { "@collection": "Things", "Tag": "seven" });
        await bulk.store(new Item(8), { "@id": "things/8", "@collection": "Things", "Tag": "eight" });
        await bulk.finish();
        const opId = bulk._operationId;
        assert.ok(opId > 0);

        const s = ctx.store.openSession();
        const seven = await s.load("things/7");
        assert.equal(seven.n, 7);
        const meta = s.advanced.getMetadataFor(seven);
        assert.equal(meta["@collection"], "Things");
        assert.equal(meta["Tag"], "seven");
        const eight = await s.load("things/8");
        assert.equal(eight.n, 8);
        assert.equal(s.advanced.getMetadataFor(eight)["Tag"], "eight");
        assert.ok(await s.load("people/ann"));

        const state = await ctx.store.maintenance.send(new GetOperationStateOperation(opId));
        assert.equal(state.status, "Completed");
        assert.equal(state.result.documentsProcessed ?? state.result.DocumentsProcessed, 3);
    });

    it("a bad document mid-stream fails finish() with the server's error; what came before is stored", async () => {
        const bulk = ctx.store.bulkInsert();
        let err;
        try {
            for (let i = 0; i < 30_000; i++) {
                // The id of document 20,000 is over the 512-byte limit.
                const id = i === 20_000 ? "bad/" + "x".repeat(600) : "before/" + i;
                await bulk.store(new Item(i), id);
            }
            await bulk.finish();
        } catch (e) {
            err = e;
        }
        assert.ok(err, "the bulk insert should fail");
        assert.equal(err.name, "BulkInsertAbortedException");
        assert.match(err.message, /Document id is 6\d\d bytes long; the limit is 512/);
        const stats = await ctx.store.maintenance.send(new GetCollectionStatisticsOperation());
        assert.equal(stats.collections["Items"], N + 20_000);
        const s = ctx.store.openSession();
        assert.ok(await s.load("before/19999"));
        assert.equal(await s.load("before/20001"), null);
    });

    it("counters in a bulk insert are refused with a clear error", async () => {
        const bulk = ctx.store.bulkInsert();
        let err;
        try {
            await bulk.store(new Item(1), "withcounters/1");
            await bulk.countersFor("withcounters/1").increment("likes", 1);
            await bulk.finish();
        } catch (e) {
            err = e;
        }
        assert.ok(err, "the bulk insert should fail");
        assert.match(err.message, /'Counters' is not supported/);
    });
});
