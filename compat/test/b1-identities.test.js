"use strict";
// §12 (b).1-4 / §4: identity ids in batches, identity next/seed, debug/identities,
// and Rookery's own guarantee that an identity never overwrites an existing document.
const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const {
    NextIdentityForOperation,
    SeedIdentityForOperation,
    GetIdentitiesOperation,
} = require("ravendb");
const h = require("./helpers");

describe("identities", () => {
    let ctx;
    before(async () => {
        ctx = await h.freshDatabase("ident");
    });
    after(async () => ctx && ctx.teardown());

    const send = op => ctx.store.maintenance.send(op);
    const load = async id => ctx.store.openSession({ noCaching: true }).load(id, h.Company);

    it("store(entity, 'companies|') gets the id companies/1 after saveChanges", async () => {
        const s = ctx.store.openSession();
        const c = new h.Company("first");
        await s.store(c, "companies|");
        await s.saveChanges();
        assert.equal(c.id, "companies/1");
        const r = ctx.store.openSession();
        const loaded = await r.load("companies/1", h.Company);
        assert.ok(loaded, "companies/1 must exist");
        assert.equal(loaded.name, "first");
        assert.equal(r.advanced.getMetadataFor(loaded)["@collection"], "Companies");
    });

    it("NextIdentityForOperation('companies') continues the same counter: 2", async () => {
        assert.equal(await send(new NextIdentityForOperation("companies")), 2);
    });

    it("SeedIdentityForOperation('companies', 100) → 100, and GetIdentitiesOperation shows it", async () => {
        assert.equal(await send(new SeedIdentityForOperation("companies", 100)), 100);
        assert.deepEqual(await send(new GetIdentitiesOperation()), { "companies|": 100 });
    });

    it("seeding lower without force keeps the higher value; with forceUpdate it lowers it", async () => {
        assert.equal(await send(new SeedIdentityForOperation("companies", 50)), 100);
        assert.equal(await send(new SeedIdentityForOperation("companies", 50, true)), 50);
        const ids = await send(new GetIdentitiesOperation());
        assert.equal(ids["companies|"], 50, `identities: ${JSON.stringify(ids)}`);
        assert.equal(await send(new NextIdentityForOperation("companies")), 51);
    });

    it("the next batch identity follows the seeded value", async () => {
        const s = ctx.store.openSession();
        const c = new h.Company("after seed");
        await s.store(c, "companies|");
        await s.saveChanges();
        assert.equal(c.id, "companies/52");
    });

    it("several '|' ids in one batch get consecutive values", async () => {
        const s = ctx.store.openSession();
        const a = new h.Order(null, 1);
        const b = new h.Order(null, 2);
        await s.store(a, "orders|");
        await s.store(b, "orders|");
        await s.saveChanges();
        assert.deepEqual([a.id, b.id], ["orders/1", "orders/2"]);
        const ids = await send(new GetIdentitiesOperation());
        assert.equal(ids["orders|"], 2, `identities: ${JSON.stringify(ids)}`);
        assert.equal(ids["companies|"], 52, `identities: ${JSON.stringify(ids)}`);
    });

    it("Rookery guarantee: an identity never overwrites an existing document", async () => {
        const s = ctx.store.openSession();
        await s.store(new h.Company("explicit five"), "companies/5");
        await s.saveChanges();
        const cvBefore = await (async () => {
            const r = ctx.store.openSession({ noCaching: true });
            const e = await r.load("companies/5", h.Company);
            return r.advanced.getChangeVectorFor(e);
        })();

        assert.equal(await send(new SeedIdentityForOperation("companies", 4, true)), 4);

        const s2 = ctx.store.openSession();
        const c = new h.Company("from identity");
        await s2.store(c, "companies|");
        await s2.saveChanges();
        assert.notEqual(c.id, "companies/5", "identity overwrote the existing companies/5");
        assert.equal(c.id, "companies/6", "expected the next free identity value");

        const r = ctx.store.openSession({ noCaching: true });
        const five = await r.load("companies/5", h.Company);
        assert.equal(five.name, "explicit five", "companies/5 must be unchanged");
        assert.equal(r.advanced.getChangeVectorFor(five), cvBefore, "companies/5 must not have been rewritten");
        assert.equal((await load("companies/6")).name, "from identity");

        const s3 = ctx.store.openSession();
        const d = new h.Company("and the next");
        await s3.store(d, "companies|");
        await s3.saveChanges();
        assert.equal(d.id, "companies/7");
    });
});
