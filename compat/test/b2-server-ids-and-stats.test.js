"use strict";
// §12 (b).1, (b).5 / §3.6 / §5: server-side ids (trailing '/'), GUID ids for literals without an id,
// collection statistics and database statistics.
const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { GetCollectionStatisticsOperation, GetStatisticsOperation } = require("ravendb");
const h = require("./helpers");

describe("server-side ids and statistics", () => {
    let ctx;
    const serverIds = [];
    let guidId;
    before(async () => {
        ctx = await h.freshDatabase("srvids");
    });
    after(async () => ctx && ctx.teardown());

    it("store(obj, 'companies/') gets a server id companies/<19 digits>-A", async () => {
        const s = ctx.store.openSession();
        const a = new h.Company("etag one");
        const b = new h.Company("etag two");
        await s.store(a, "companies/");
        await s.store(b, "companies/");
        await s.saveChanges();
        for (const c of [a, b]) {
            assert.match(c.id, /^companies\/\d{19}-A$/);
        }
        assert.notEqual(a.id, b.id, "two server ids in one batch must differ");
        serverIds.push(a.id, b.id);

        const r = ctx.store.openSession();
        const loaded = await r.load(a.id, h.Company);
        assert.equal(loaded.name, "etag one");
        assert.equal(r.advanced.getMetadataFor(loaded)["@collection"], "Companies");
        assert.equal((await r.load(b.id, h.Company)).name, "etag two");
    });

    it("later server ids sort after earlier ones", async () => {
        const s = ctx.store.openSession();
        const c = new h.Company("etag three");
        await s.store(c, "companies/");
        await s.saveChanges();
        assert.match(c.id, /^companies\/\d{19}-A$/);
        for (const earlier of serverIds) {
            assert.ok(c.id > earlier, `${c.id} should sort after ${earlier}`);
        }
        serverIds.push(c.id);
    });

    it("a plain object literal with @metadata.@collection and no id gets a GUID id", async () => {
        const s = ctx.store.openSession();
        const thing = { name: "x", "@metadata": { "@collection": "Things" } };
        await s.store(thing);
        await s.saveChanges();
        const id = thing.id || s.advanced.getDocumentId(thing);
        assert.match(id, h.GUID_RE);
        guidId = id;

        const r = ctx.store.openSession();
        const loaded = await r.load(id);
        assert.ok(loaded, "the GUID document must be loadable");
        assert.equal(loaded.name, "x");
        assert.equal(r.advanced.getMetadataFor(loaded)["@collection"], "Things");
    });

    it("each id-less literal gets its own GUID", async () => {
        const s = ctx.store.openSession();
        const t = { name: "y", "@metadata": { "@collection": "Things" } };
        await s.store(t);
        await s.saveChanges();
        const id = t.id || s.advanced.getDocumentId(t);
        assert.match(id, h.GUID_RE);
        assert.notEqual(id, guidId);
    });

    it("GetCollectionStatisticsOperation counts documents per collection, @hilo included", async () => {
        // One HiLo-generated document adds Users and the @hilo document Raven/Hilo/users.
        const s = ctx.store.openSession();
        const u = new h.User("hilo user", 1);
        await s.store(u);
        await s.saveChanges();
        assert.equal(u.id, "users/1-A");

        const stats = await ctx.store.maintenance.send(new GetCollectionStatisticsOperation());
        const cols = stats.collections;
        assert.equal(cols.Companies, 3, `collections: ${JSON.stringify(cols)}`);
        assert.equal(cols.Things, 2, `collections: ${JSON.stringify(cols)}`);
        assert.equal(cols.Users, 1, `collections: ${JSON.stringify(cols)}`);
        assert.equal(cols["@hilo"], 1, `collections: ${JSON.stringify(cols)}`);
        // 3 Companies + 2 Things + 1 User + Raven/Hilo/users
        assert.equal(stats.countOfDocuments, 7);
        const sum = Object.values(cols).reduce((a, b) => a + b, 0);
        assert.equal(sum, stats.countOfDocuments, "collection counts must add up to countOfDocuments");
    });

    it("GetStatisticsOperation reports countOfDocuments, and counts follow deletes", async () => {
        let stats = await ctx.store.maintenance.send(new GetStatisticsOperation());
        assert.equal(stats.countOfDocuments, 7);

        const s = ctx.store.openSession();
        await s.delete(serverIds[0]);
        await s.saveChanges();

        stats = await ctx.store.maintenance.send(new GetStatisticsOperation());
        assert.equal(stats.countOfDocuments, 6);
        const cstats = await ctx.store.maintenance.send(new GetCollectionStatisticsOperation());
        assert.equal(cstats.countOfDocuments, 6);
        assert.equal(cstats.collections.Companies, 2);
    });
});
