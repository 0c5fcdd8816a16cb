"use strict";
// Issue 14: lazy operations (one POST /multi_get for all pending lazy loads and queries) and
// GetDetailedStatisticsOperation.
const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { GetDetailedStatisticsOperation, GetStatisticsOperation } = require("ravendb");
const h = require("./helpers");

describe("lazy operations and detailed statistics", () => {
    let ctx;
    before(async () => {
        ctx = await h.freshDatabase("lazy");
        const s = ctx.store.openSession();
        await s.store(new h.User("Ann", 30), "users/1");
        await s.store(new h.User("Bob", 40), "users/2");
        await s.store(new h.User("Cid", 50), "users/3");
        await s.store(new h.Company("Acme"), "companies/1");
        await s.saveChanges();
        // A first request, so the executor's topology is settled before we count.
        await ctx.store.maintenance.send(new GetStatisticsOperation());
    });
    after(async () => ctx && ctx.teardown());

    it("lazy loads and a lazy query are answered by one multi_get request", async () => {
        const rec = h.recordResponses(ctx.store.getRequestExecutor());
        try {
            const s = ctx.store.openSession();
            const ann = s.advanced.lazily.load("users/1", h.User);
            const two = s.advanced.lazily.load(["users/2", "users/404"], h.User);
            const old = s.query({ collection: "Users" }).whereGreaterThan("age", 35).lazily();
            const count = s.query({ collection: "Users" }).countLazily();
            assert.equal(rec.seen.length, 0, "nothing is sent before a value is asked for");
            assert.equal((await ann.getValue()).name, "Ann");
            const multi = rec.seen.filter(r => r.url.includes("/multi_get"));
            assert.equal(rec.seen.length, 1, "one HTTP request: " + JSON.stringify(rec.seen));
            assert.equal(multi.length, 1);
            const got = await two.getValue();
            assert.equal(got["users/2"].name, "Bob");
            assert.equal(got["users/404"], null);
            const names = (await old.getValue()).map(u => u.name).sort();
            assert.deepEqual(names, ["Bob", "Cid"]);
            assert.equal(await count.getValue(), 3);
            assert.equal(rec.seen.length, 1, "the other lazy values came with the same request");
            assert.equal(s.advanced.numberOfRequests, 1);
        } finally {
            rec.stop();
        }
    });

    it("executeAllPendingLazyOperations sends the pending operations in one request", async () => {
        const rec = h.recordResponses(ctx.store.getRequestExecutor());
        try {
            const s = ctx.store.openSession();
            const a = s.advanced.lazily.load("users/3", h.User);
            const c = s.advanced.lazily.load("companies/1", h.Company);
            const q = s.query({ collection: "Users" }).whereEquals("name", "Ann").lazily();
            await s.advanced.eagerly.executeAllPendingLazyOperations();
            assert.equal(rec.seen.length, 1);
            assert.match(rec.seen[0].url, /\/multi_get/);
            assert.equal((await a.getValue()).name, "Cid");
            assert.equal((await c.getValue()).name, "Acme");
            assert.equal((await q.getValue())[0].name, "Ann");
            assert.equal(rec.seen.length, 1);
            // Loaded lazily, now tracked: a plain load needs no request.
            assert.equal((await s.load("users/3", h.User)).name, "Cid");
            assert.equal(rec.seen.length, 1);
        } finally {
            rec.stop();
        }
    });

    it("GetDetailedStatisticsOperation has the statistics and the detailed counts", async () => {
        const s = ctx.store.openSession();
        await s.store(new h.Company("Ident"), "companies|");
        await s.saveChanges();
        const st = await ctx.store.maintenance.send(new GetDetailedStatisticsOperation());
        assert.equal(st.countOfDocuments, 5);
        assert.equal(st.countOfIdentities, 1);
        assert.equal(st.countOfCompareExchange, 0);
        assert.equal(st.countOfCompareExchangeTombstones, 0);
        assert.equal(st.countOfTimeSeriesDeletedRanges, 0);
        assert.equal(st.countOfConflicts, 0);
        assert.equal(typeof st.databaseId, "string");
        assert.match(st.databaseChangeVector, /^A:\d+-/);
        assert.equal(typeof st.sizeOnDisk.sizeInBytes, "number");
    });
});
