"use strict";
// §12 (a) / §12.1 (a): store + saveChanges + load with HiLo ids, missing ids, multi-id load,
// includes, exists, loadStartingWith paging, delete.
const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const h = require("./helpers");

describe("documents: store, load, include, exists, startsWith, delete", () => {
    let ctx;
    let johnId;
    before(async () => {
        ctx = await h.freshDatabase("docs");
    });
    after(async () => ctx && ctx.teardown());

    it("store assigns the HiLo id users/1-A right after store() on a fresh database", async () => {
        const session = ctx.store.openSession();
        const john = new h.User("John", 42);
        await session.store(john);
        assert.equal(john.id, "users/1-A");
        assert.equal(session.advanced.numberOfRequests, 0, "store() must not send a request by itself");
        await session.saveChanges();
        assert.equal(session.advanced.numberOfRequests, 1, "saveChanges() is one bulk_docs request");
        assert.equal(john.id, "users/1-A");
        johnId = john.id;
    });

    it("load in a new session returns a class instance with the stored fields and metadata", async () => {
        const session = ctx.store.openSession();
        const user = await session.load(johnId, h.User);
        assert.ok(user instanceof h.User, "expected a User instance");
        assert.equal(user.id, johnId);
        assert.equal(user.name, "John");
        assert.equal(user.age, 42);

        const metadata = session.advanced.getMetadataFor(user);
        assert.equal(metadata["@collection"], "Users");
        assert.equal(metadata["@id"], johnId);
        assert.equal(metadata["Raven-Node-Type"], "User");
        assert.equal(typeof metadata["@last-modified"], "string");
        assert.ok(!Number.isNaN(Date.parse(metadata["@last-modified"])), "@last-modified must be a date");

        const cv = session.advanced.getChangeVectorFor(user);
        assert.equal(typeof cv, "string");
        assert.ok(cv.length > 0, "change vector must be non-empty");
    });

    it("the next HiLo id in the same store continues the range (users/2-A)", async () => {
        const session = ctx.store.openSession();
        const u = new h.User("Second", 1);
        await session.store(u);
        assert.equal(u.id, "users/2-A");
        await session.saveChanges();
    });

    it("an update through a loaded entity changes the stored document and its change vector", async () => {
        const s1 = ctx.store.openSession();
        const user = await s1.load("users/2-A", h.User);
        const cvBefore = s1.advanced.getChangeVectorFor(user);
        user.age = 2;
        // The client sends @id, @change-vector and @last-modified back inside @metadata (§3.1);
        // the server must replace them with its own values, not store the stale ones.
        await s1.saveChanges();
        const cvAfterSave = s1.advanced.getChangeVectorFor(user);
        assert.notEqual(cvAfterSave, cvBefore, "change vector must change on update");
        const s2 = ctx.store.openSession();
        const again = await s2.load("users/2-A", h.User);
        assert.equal(again.age, 2);
        assert.equal(again.name, "Second");
        assert.equal(s2.advanced.getChangeVectorFor(again), cvAfterSave,
            "stored change vector must be the one bulk_docs returned");
        assert.equal(s2.advanced.getMetadataFor(again)["@id"], "users/2-A");
    });

    it("ids are case-insensitive and case-preserving", async () => {
        const session = ctx.store.openSession();
        const user = await session.load("USERS/1-a", h.User);
        assert.ok(user, "load with a differently cased id must find the document");
        assert.equal(user.name, "John");
        assert.equal(session.advanced.getMetadataFor(user)["@id"], johnId, "the first stored spelling is returned");
        assert.equal(await session.advanced.exists("Users/1-A"), true);
    });

    it("load of a missing id returns null", async () => {
        const session = ctx.store.openSession();
        assert.equal(await session.load("users/404"), null);
        assert.equal(await session.load("users/999-A", h.User), null);
        // Asked again in a new session (the client now sends If-None-Match: "404 Response").
        assert.equal(await ctx.store.openSession().load("users/999-A", h.User), null);
    });

    it("multi-id load returns an object keyed by id with null for missing ids", async () => {
        const session = ctx.store.openSession();
        const res = await session.load([johnId, "users/404", "users/2-A"], h.User);
        assert.deepEqual(Object.keys(res).sort(), [johnId, "users/2-A", "users/404"].sort());
        assert.ok(res[johnId] instanceof h.User);
        assert.equal(res[johnId].name, "John");
        assert.equal(res["users/2-A"].name, "Second");
        assert.equal(res["users/404"], null);
        assert.equal(session.advanced.numberOfRequests, 1, "one GET /docs for several ids");
    });

    it("include: load(order) with include(companyId), then load(companyId) makes no second request", async () => {
        const w = ctx.store.openSession();
        await w.store(new h.Company("Acme"), "companies/acme");
        await w.store(new h.Order("companies/acme", 10), "orders/inc-1");
        await w.saveChanges();

        const session = ctx.store.openSession();
        const order = await session.include("companyId").load("orders/inc-1", h.Order);
        assert.ok(order, "order not loaded");
        assert.equal(order.companyId, "companies/acme");
        assert.equal(session.advanced.numberOfRequests, 1);
        assert.ok(session.advanced.isLoaded("companies/acme"), "included document must be tracked");
        const company = await session.load("companies/acme", h.Company);
        assert.equal(session.advanced.numberOfRequests, 1, "included document must not be fetched again");
        assert.ok(company instanceof h.Company);
        assert.equal(company.name, "Acme");
    });

    it("include with several ids, one of them missing", async () => {
        const session = ctx.store.openSession();
        const res = await session.include("companyId").load(["orders/inc-1", "orders/none"], h.Order);
        assert.equal(res["orders/inc-1"].companyId, "companies/acme");
        assert.equal(res["orders/none"], null);
        const company = await session.load("companies/acme", h.Company);
        assert.equal(company.name, "Acme");
        assert.equal(session.advanced.numberOfRequests, 1);
    });

    it("exists returns true for a stored document and false for a missing one", async () => {
        const session = ctx.store.openSession();
        assert.equal(await session.advanced.exists(johnId), true);
        assert.equal(await session.advanced.exists("companies/acme"), true);
        assert.equal(await session.advanced.exists("users/404"), false);
    });

    it("loadStartingWith pages through a prefix and excludes other prefixes", async () => {
        const w = ctx.store.openSession();
        const expected = [];
        for (let i = 1; i <= 30; i++) {
            const id = `occ/${String(i).padStart(2, "0")}`;
            expected.push(id);
            await w.store(new h.Item(i), id);
        }
        // Neighbours that must not match the prefix "occ/".
        await w.store(new h.Item(100), "occx/1");
        await w.store(new h.Item(101), "oc/1");
        await w.store(new h.Item(102), "other/occ/1");
        await w.saveChanges();

        const ids = list => list.map(e => e.id);
        const s = ctx.store.openSession();

        const all = await s.advanced.loadStartingWith("occ/", { start: 0, pageSize: 100 });
        assert.deepEqual(ids(all).sort(), expected);

        const defaultPage = await s.advanced.loadStartingWith("occ/");
        assert.equal(defaultPage.length, 25, "client default pageSize is 25");

        const pages = [];
        for (let start = 0; start < 30; start += 10) {
            const page = await s.advanced.loadStartingWith("occ/", { start, pageSize: 10 });
            assert.equal(page.length, 10, `page at start=${start}`);
            pages.push(...ids(page));
        }
        assert.equal(new Set(pages).size, 30, "pages must not overlap");
        assert.deepEqual([...pages].sort(), expected);

        const tail = await s.advanced.loadStartingWith("occ/", { start: 25, pageSize: 10 });
        assert.equal(tail.length, 5);
        const past = await s.advanced.loadStartingWith("occ/", { start: 30, pageSize: 10 });
        assert.equal(past.length, 0);

        const none = await s.advanced.loadStartingWith("nothing-here/");
        assert.deepEqual(none, []);

        const item = all.find(e => e.id === "occ/07");
        assert.equal(item.n, 7);
    });

    it("delete then load returns null", async () => {
        const w = ctx.store.openSession();
        await w.store(new h.User("Doomed", 1), "users/doomed");
        await w.saveChanges();
        assert.ok(await ctx.store.openSession().load("users/doomed"));

        const d = ctx.store.openSession();
        await d.delete("users/doomed");
        await d.saveChanges();
        assert.equal(await ctx.store.openSession().load("users/doomed"), null);
        assert.equal(await ctx.store.openSession().advanced.exists("users/doomed"), false);
    });

    it("delete of a loaded entity then load returns null", async () => {
        const s = ctx.store.openSession();
        const order = await s.load("orders/inc-1", h.Order);
        await s.delete(order);
        await s.saveChanges();
        assert.equal(await ctx.store.openSession().load("orders/inc-1"), null);
    });
});
