"use strict";
// §12 (a).9 / §10: create and delete databases through the cluster executor,
// and DatabaseDoesNotExistException for databases that do not exist (§1.2, §9).
const { describe, it, after } = require("node:test");
const assert = require("node:assert/strict");
const { GetStatisticsOperation } = require("ravendb");
const h = require("./helpers");

describe("database lifecycle", () => {
    const stores = [];
    const track = s => (stores.push(s), s);
    after(() => stores.forEach(s => s.dispose()));

    it("CreateDatabaseOperation creates a usable database", async () => {
        const db = h.uniqueDbName("life");
        const store = track(h.newStore(db));
        const res = await h.createDatabase(store, db);
        assert.ok(res, "CreateDatabaseOperation returned nothing");
        assert.equal(res.name, db);

        const session = store.openSession();
        await session.store(new h.User("Ann"), "users/ann");
        await session.saveChanges();
        const loaded = await store.openSession().load("users/ann", h.User);
        assert.equal(loaded.name, "Ann");

        await h.deleteDatabase(store, db);
    });

    it("creating a database that already exists rejects with ConcurrencyException (409)", async () => {
        const db = h.uniqueDbName("dup");
        const store = track(h.newStore(db));
        await h.createDatabase(store, db);
        try {
            await assert.rejects(h.createDatabase(store, db), h.errorNamed("ConcurrencyException"));
        } finally {
            await h.deleteDatabase(store, db);
        }
    });

    it("DeleteDatabasesOperation drops the database: a new store gets DatabaseDoesNotExistException", async () => {
        const db = h.uniqueDbName("drop");
        const store = track(h.newStore(db));
        await h.createDatabase(store, db);
        const s = store.openSession();
        await s.store(new h.User("Bob"), "users/bob");
        await s.saveChanges();

        const res = await h.deleteDatabase(store, db);
        assert.ok(res, "DeleteDatabasesOperation returned nothing");

        const fresh = track(h.newStore(db));
        await assert.rejects(fresh.openSession().load("users/bob"), h.errorNamed("DatabaseDoesNotExistException"));
    });

    it("a store that used the database before it was dropped gets DatabaseDoesNotExistException", async () => {
        const db = h.uniqueDbName("drop2");
        const store = track(h.newStore(db));
        await h.createDatabase(store, db);
        const s = store.openSession();
        await s.store(new h.User("Cy"), "users/cy");
        await s.saveChanges();
        await h.deleteDatabase(store, db);

        // The executor already knows the topology, so this goes straight to /databases/<db>/docs.
        await assert.rejects(
            store.openSession({ noCaching: true }).load("users/cy"),
            h.errorNamed("DatabaseDoesNotExistException"));
    });

    it("a database that never existed: load and maintenance operations reject with DatabaseDoesNotExistException", async () => {
        const db = h.uniqueDbName("nosuch");
        const store = track(h.newStore(db));
        await assert.rejects(store.openSession().load("users/1-A"), h.errorNamed("DatabaseDoesNotExistException"));
        await assert.rejects(store.maintenance.send(new GetStatisticsOperation()),
            h.errorNamed("DatabaseDoesNotExistException"));
        const s = store.openSession();
        await s.store({ name: "x" }, "things/1");
        await assert.rejects(s.saveChanges(), h.errorNamed("DatabaseDoesNotExistException"));
    });
});
