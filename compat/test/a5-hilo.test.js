"use strict";
// §12 (a).2, (a).5 / §2: the HiLo document and the hilo/return on store.dispose().
const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const h = require("./helpers");

describe("HiLo", () => {
    let ctx;
    before(async () => {
        ctx = await h.freshDatabase("hilo");
    });
    after(async () => ctx && ctx.teardown());

    it("the first HiLo id is users/1-A and Raven/Hilo/users holds Max >= 32 in collection @hilo", async () => {
        const s = ctx.store.openSession();
        const u = new h.User("first", 1);
        await s.store(u);
        assert.equal(u.id, "users/1-A");
        await s.saveChanges();

        const r = ctx.store.openSession();
        const hilo = await r.load("Raven/Hilo/users");
        assert.ok(hilo, "Raven/Hilo/users must be a loadable document");
        assert.equal(typeof hilo.Max, "number");
        assert.ok(hilo.Max >= 32, `Max = ${hilo.Max}, expected >= 32`);
        assert.equal(r.advanced.getMetadataFor(hilo)["@collection"], "@hilo");
    });

    it("separate tags get separate generators (companies/1-A alongside users)", async () => {
        const s = ctx.store.openSession();
        const c = new h.Company("c");
        await s.store(c);
        assert.equal(c.id, "companies/1-A");
        await s.saveChanges();
        const hilo = await ctx.store.openSession().load("Raven/Hilo/companies");
        assert.ok(hilo && hilo.Max >= 32);
    });

    it("two stores on the same database never get overlapping ranges", async () => {
        const other = h.newStore(ctx.database);
        try {
            const s = other.openSession();
            const u = new h.User("from other store", 1);
            await s.store(u);
            const m = /^users\/(\d+)-A$/.exec(u.id);
            assert.ok(m, `unexpected id ${u.id}`);
            assert.ok(Number(m[1]) > 32, `second store got ${u.id} inside the first store's range 1..32`);
            await s.saveChanges();
        } finally {
            other.dispose();
        }
    });

    it("after store.dispose() returns the unused range, a fresh store continues at users/2-A", async () => {
        // Use a database of its own so no other store holds a users range.
        const db = h.uniqueDbName("hiloret");
        const first = h.newStore(db);
        await h.createDatabase(first, db);
        let probe;
        let firstDisposed = false;
        try {
            const s = first.openSession();
            const u = new h.User("only one", 1);
            await s.store(u);
            assert.equal(u.id, "users/1-A");
            await s.saveChanges();
            firstDisposed = true;
            first.dispose(); // sends PUT hilo/return?tag=users&end=32&last=1, fire-and-forget

            probe = h.newStore(db);
            // Wait (bounded) for the return to land: Max goes back from 32 to 1.
            let max;
            for (let i = 0; i < 50; i++) {
                const doc = await probe.openSession({ noCaching: true }).load("Raven/Hilo/users");
                max = doc && doc.Max;
                if (max === 1) {
                    break;
                }
                await h.sleep(100);
            }
            assert.equal(max, 1, "PUT /hilo/return?end=32&last=1 must set Max back to 1");

            const s2 = probe.openSession();
            const u2 = new h.User("next", 2);
            await s2.store(u2);
            assert.equal(u2.id, "users/2-A");
            await s2.saveChanges();
        } finally {
            if (!probe) {
                probe = h.newStore(db);
            }
            try {
                await h.deleteDatabase(probe, db);
            } finally {
                probe.dispose();
                if (!firstDisposed) {
                    first.dispose();
                }
            }
        }
    });
});
