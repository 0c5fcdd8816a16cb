"use strict";
// §12 (a).7 / §3.9: ETag / If-None-Match / 304 on GET /docs, observed through the request executor.
// A second load of an unchanged document in a new session must be answered 304 and served from the
// client's cache; after a change the new content must come back (200), never the stale cache.
const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const h = require("./helpers");

describe("HTTP cache (ETag / 304)", () => {
    let ctx;
    let executor;
    const id = "users/cached";
    before(async () => {
        ctx = await h.freshDatabase("cache");
        const s = ctx.store.openSession();
        await s.store(new h.User("v1", 1), id);
        await s.saveChanges();
        executor = ctx.store.getRequestExecutor();
    });
    after(async () => ctx && ctx.teardown());

    // Loads `docId` in a brand-new session; returns the entity and the HTTP responses seen for GET /docs.
    async function loadInNewSession(docId) {
        const rec = h.recordResponses(executor);
        try {
            const session = ctx.store.openSession();
            const entity = await session.load(docId, h.User);
            assert.equal(session.advanced.numberOfRequests, 1);
            return { entity, responses: rec.seen.filter(r => r.url.includes("/docs?")) };
        } finally {
            rec.stop();
        }
    }

    it("the second load of an unchanged document in a new session is a 304 served from the cache", async () => {
        const first = await loadInNewSession(id);
        assert.equal(first.entity.name, "v1");
        assert.deepEqual(first.responses.map(r => r.status), [200], "first load must be a normal 200");
        assert.ok(executor.cache.numberOfItems >= 1, "client cached nothing: the 200 carried no ETag header");

        const before = executor.numberOfServerRequests;
        const second = await loadInNewSession(id);
        assert.equal(executor.numberOfServerRequests, before + 1, "the conditional GET still goes to the server");
        assert.deepEqual(second.responses.map(r => r.status), [304],
            "expected 304 Not Modified for If-None-Match with the current ETag");
        assert.ok(second.entity instanceof h.User);
        assert.equal(second.entity.name, "v1", "the cached body must be used for a 304");
        assert.equal(second.entity.age, 1);
    });

    it("after the document changes, a load returns the new content, not the stale cache", async () => {
        const w = ctx.store.openSession();
        const u = await w.load(id, h.User);
        u.name = "v2";
        u.age = 2;
        await w.saveChanges();

        const fresh = await loadInNewSession(id);
        assert.deepEqual(fresh.responses.map(r => r.status), [200], "a changed document must not be answered 304");
        assert.equal(fresh.entity.name, "v2");
        assert.equal(fresh.entity.age, 2);

        // And the refreshed cache entry is what a later 304 serves.
        const again = await loadInNewSession(id);
        assert.deepEqual(again.responses.map(r => r.status), [304]);
        assert.equal(again.entity.name, "v2");
    });

    it("a change made by another client is seen too (the ETag is the server's, not the client's)", async () => {
        const other = h.newStore(ctx.database);
        try {
            const s = other.openSession();
            const u = await s.load(id, h.User);
            u.name = "v3";
            await s.saveChanges();
        } finally {
            other.dispose();
        }
        const fresh = await loadInNewSession(id);
        assert.deepEqual(fresh.responses.map(r => r.status), [200]);
        assert.equal(fresh.entity.name, "v3");
    });

    it("a remembered 404 is not served once the document exists", async () => {
        const missing = "users/later";
        assert.equal((await loadInNewSession(missing)).entity, null);
        assert.equal((await loadInNewSession(missing)).entity, null);

        const w = ctx.store.openSession();
        await w.store(new h.User("now here", 5), missing);
        await w.saveChanges();

        const found = await loadInNewSession(missing);
        assert.ok(found.entity, "document created after a cached 404 must be returned");
        assert.equal(found.entity.name, "now here");
    });

    it("after a delete, a load returns null, not the cached document", async () => {
        const w = ctx.store.openSession();
        await w.delete(id);
        await w.saveChanges();
        const gone = await loadInNewSession(id);
        assert.equal(gone.entity, null);
    });

    it("multi-id loads are cached too and invalidated when one of the documents changes", async () => {
        const w = ctx.store.openSession();
        await w.store(new h.User("a", 1), "users/m1");
        await w.store(new h.User("b", 1), "users/m2");
        await w.saveChanges();

        const loadBoth = async () => {
            const rec = h.recordResponses(executor);
            try {
                const res = await ctx.store.openSession().load(["users/m1", "users/m2"], h.User);
                return { res, statuses: rec.seen.filter(r => r.url.includes("/docs?")).map(r => r.status) };
            } finally {
                rec.stop();
            }
        };
        assert.deepEqual((await loadBoth()).statuses, [200]);
        const cached = await loadBoth();
        assert.deepEqual(cached.statuses, [304]);
        assert.equal(cached.res["users/m2"].name, "b");

        const u = ctx.store.openSession();
        const m2 = await u.load("users/m2", h.User);
        m2.name = "b2";
        await u.saveChanges();

        const changed = await loadBoth();
        assert.deepEqual(changed.statuses, [200]);
        assert.equal(changed.res["users/m2"].name, "b2");
        assert.equal(changed.res["users/m1"].name, "a");
    });
});
