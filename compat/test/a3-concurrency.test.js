"use strict";
// §12 (a).3 / §3.6 / §3.7: change-vector checks in bulk_docs → 409 ConcurrencyException,
// and a rejected batch is all-or-nothing.
const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const h = require("./helpers");

describe("optimistic concurrency", () => {
    let ctx;
    const id = "users/occ-1";
    before(async () => {
        ctx = await h.freshDatabase("occ");
        const s = ctx.store.openSession();
        await s.store(new h.User("original", 1), id);
        await s.saveChanges();
    });
    after(async () => ctx && ctx.teardown());

    const reload = async docId => ctx.store.openSession({ noCaching: true }).load(docId, h.User);

    it("two sessions modify the same loaded document: the second saveChanges rejects with ConcurrencyException", async () => {
        const s1 = ctx.store.openSession();
        const s2 = ctx.store.openSession();
        s1.advanced.useOptimisticConcurrency = true;
        s2.advanced.useOptimisticConcurrency = true;
        const u1 = await s1.load(id, h.User);
        const u2 = await s2.load(id, h.User);
        assert.equal(s1.advanced.getChangeVectorFor(u1), s2.advanced.getChangeVectorFor(u2));

        u1.name = "first writer";
        u2.name = "second writer";
        await s1.saveChanges();
        await assert.rejects(s2.saveChanges(), h.errorNamed("ConcurrencyException"));

        assert.equal((await reload(id)).name, "first writer");
    });

    it("with the current change vector, an optimistic save succeeds", async () => {
        const s = ctx.store.openSession();
        s.advanced.useOptimisticConcurrency = true;
        const u = await s.load(id, h.User);
        u.age = 2;
        await s.saveChanges();
        const again = await reload(id);
        assert.equal(again.age, 2);
        assert.equal(again.name, "first writer");
    });

    it("store(entity, id, { changeVector: 'bogus' }) on an existing document rejects with ConcurrencyException", async () => {
        const s = ctx.store.openSession();
        await s.store(new h.User("bogus writer", 3), id, { changeVector: "bogus" });
        await assert.rejects(s.saveChanges(), h.errorNamed("ConcurrencyException"));
        const again = await reload(id);
        assert.equal(again.name, "first writer", "a rejected put must not change the document");
    });

    it("store(entity, id, { changeVector: 'bogus' }) on a missing document rejects with ConcurrencyException", async () => {
        const s = ctx.store.openSession();
        await s.store(new h.User("ghost", 0), "users/occ-missing", { changeVector: "bogus" });
        await assert.rejects(s.saveChanges(), h.errorNamed("ConcurrencyException"));
        assert.equal(await reload("users/occ-missing"), null);
    });

    it("useOptimisticConcurrency on a new entity whose id already exists rejects (ChangeVector \"\" = must be new)", async () => {
        const s = ctx.store.openSession();
        s.advanced.useOptimisticConcurrency = true;
        await s.store(new h.User("intruder", 9), id);
        await assert.rejects(s.saveChanges(), h.errorNamed("ConcurrencyException"));
        assert.equal((await reload(id)).name, "first writer");
    });

    it("useOptimisticConcurrency on a genuinely new id succeeds", async () => {
        const s = ctx.store.openSession();
        s.advanced.useOptimisticConcurrency = true;
        await s.store(new h.User("newcomer", 5), "users/occ-new");
        await s.saveChanges();
        assert.equal((await reload("users/occ-new")).name, "newcomer");
    });

    it("a batch with one violating command is rejected as a whole", async () => {
        const s = ctx.store.openSession();
        await s.store(new h.User("should not exist", 0), "users/occ-atomic");
        await s.store(new h.User("bogus again", 0), id, { changeVector: "bogus" });
        await assert.rejects(s.saveChanges(), h.errorNamed("ConcurrencyException"));
        assert.equal(await reload("users/occ-atomic"), null, "the other put of the failed batch must be rolled back");
        assert.equal((await reload(id)).name, "first writer");
    });

    it("delete with a stale change vector rejects with ConcurrencyException", async () => {
        const s1 = ctx.store.openSession();
        s1.advanced.useOptimisticConcurrency = true;
        const u1 = await s1.load(id, h.User);

        const s2 = ctx.store.openSession();
        const u2 = await s2.load(id, h.User);
        u2.age = 77;
        await s2.saveChanges();

        await s1.delete(u1);
        await assert.rejects(s1.saveChanges(), h.errorNamed("ConcurrencyException"));
        assert.equal((await reload(id)).age, 77, "document must survive the rejected delete");
    });
});
