"use strict";
// F2 (issue 11): static JavaScript indexes with the npm client on one node: IndexCreation with a
// load() index whose results follow the referenced document, a map-reduce index, every index
// operation of §1.9 the client has, a C# definition refused, waitForIndexesAfterSaveChanges,
// patch and delete by query as long-running operations, and streaming a query.
const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const {
    AbstractJavaScriptIndexCreationTask,
    IndexCreation,
    IndexDefinition,
    IndexQuery,
    PutIndexesOperation,
    GetIndexesOperation,
    GetIndexOperation,
    GetIndexNamesOperation,
    GetIndexStatisticsOperation,
    GetIndexErrorsOperation,
    DeleteIndexOperation,
    ResetIndexOperation,
    DisableIndexOperation,
    EnableIndexOperation,
    SetIndexesPriorityOperation,
    SetIndexesLockOperation,
    GetIndexingStatusOperation,
    StopIndexOperation,
    StartIndexOperation,
    StopIndexingOperation,
    StartIndexingOperation,
    PatchByQueryOperation,
    DeleteByQueryOperation,
} = require("ravendb");
const h = require("./helpers");

class Pet {
    constructor(init) {
        Object.assign(this, init);
    }
}

class Person {
    constructor(init) {
        Object.assign(this, init);
    }
}

class Order {
    constructor(init) {
        Object.assign(this, init);
    }
}

// Pets/ByOwner: each pet with its owner's name, read with load() from People.
class Pets_ByOwner extends AbstractJavaScriptIndexCreationTask {
    constructor() {
        super();
        const { load } = this.mapUtils();
        this.map("Pets", p => ({ Name: p.Name, OwnerName: load(p.OwnerId, "People").Name }));
    }
}

// Orders/Totals: total and number of orders per company.
class Orders_Totals extends AbstractJavaScriptIndexCreationTask {
    constructor() {
        super();
        this.map("Orders", o => ({ Company: o.Company, Total: o.Total, Count: 1 }));
        this.reduce(r => r.groupBy(x => x.Company).aggregate(g => ({
            Company: g.key,
            Total: g.values.reduce((a, b) => a + b.Total, 0),
            Count: g.values.reduce((a, b) => a + b.Count, 0),
        })));
    }
}

function jsIndex(name, maps, reduce) {
    const def = new IndexDefinition();
    def.name = name;
    def.maps = new Set(maps);
    if (reduce) {
        def.reduce = reduce;
    }
    return def;
}

// Keys of IndexStats.collections, which the client turns into a Map (or leaves an object).
function collectionKeys(stats) {
    const c = stats.collections;
    return c instanceof Map ? [...c.keys()] : Object.keys(c || {});
}

describe("static JavaScript indexes and index operations", () => {
    let ctx;
    const ownerPets = async (ownerName, session = ctx.store.openSession()) =>
        (await session.query({ indexName: "Pets/ByOwner" })
            .waitForNonStaleResults(15_000)
            .whereEquals("OwnerName", ownerName)
            .all()).map(p => p.Name).sort();

    before(async () => {
        ctx = await h.freshDatabase("indexes");
        const s = ctx.store.openSession();
        await s.store(new Person({ Name: "Alice" }), "people/1");
        await s.store(new Person({ Name: "Bob" }), "people/2");
        await s.store(new Pet({ Name: "Rex", OwnerId: "people/1" }), "pets/1");
        await s.store(new Pet({ Name: "Tom", OwnerId: "people/1" }), "pets/2");
        await s.store(new Pet({ Name: "Fido", OwnerId: "people/2" }), "pets/3");
        await s.store(new Order({ Company: "companies/1", Total: 10 }), "orders/1");
        await s.store(new Order({ Company: "companies/1", Total: 15 }), "orders/2");
        await s.store(new Order({ Company: "companies/2", Total: 7 }), "orders/3");
        await s.saveChanges();
    });
    after(async () => ctx && ctx.teardown());

    describe("IndexCreation with a load() index and a map-reduce index", () => {
        it("IndexCreation.createIndexes puts both indexes; GetIndexNamesOperation lists them", async () => {
            await IndexCreation.createIndexes([new Pets_ByOwner(), new Orders_Totals()], ctx.store);
            const names = await ctx.store.maintenance.send(new GetIndexNamesOperation(0, 100));
            assert.ok(names.includes("Pets/ByOwner"), `names: ${names}`);
            assert.ok(names.includes("Orders/Totals"), `names: ${names}`);
        });

        it("querying the load() index by OwnerName finds the owner's pets", async () => {
            let stats;
            const r = await ctx.store.openSession().query({ indexName: "Pets/ByOwner" })
                .waitForNonStaleResults()
                .statistics(s => { stats = s; })
                .whereEquals("OwnerName", "Alice")
                .all();
            assert.deepEqual(r.map(p => p.Name).sort(), ["Rex", "Tom"]);
            assert.equal(stats.indexName, "Pets/ByOwner");
            assert.equal(stats.isStale, false);
            assert.deepEqual(await ownerPets("Bob"), ["Fido"]);
        });

        it("a query on a class with the index class returns typed pets", async () => {
            const r = await ctx.store.openSession().query(Pet, Pets_ByOwner)
                .waitForNonStaleResults().whereEquals("OwnerName", "Bob").all();
            assert.equal(r.length, 1);
            assert.ok(r[0] instanceof Pet, `got ${r[0] && r[0].constructor.name}`);
            assert.equal(r[0].id, "pets/3");
        });

        it("renaming the owner changes the load() index results (the referenced document is tracked)", async () => {
            const s = ctx.store.openSession();
            const alice = await s.load("people/1");
            alice.Name = "Alicia";
            await s.saveChanges();
            assert.deepEqual(await ownerPets("Alicia"), ["Rex", "Tom"], "the pets follow their owner's new name");
            assert.deepEqual(await ownerPets("Alice"), [], "the old name must be gone from the index");
            assert.deepEqual(await ownerPets("Bob"), ["Fido"], "other owners are unaffected");
        });

        it("a new pet of an existing owner and a pet moved to another owner are indexed", async () => {
            const s = ctx.store.openSession();
            await s.store(new Pet({ Name: "Kitty", OwnerId: "people/2" }), "pets/4");
            const fido = await s.load("pets/3");
            fido.OwnerId = "people/1";
            await s.saveChanges();
            assert.deepEqual(await ownerPets("Alicia"), ["Fido", "Rex", "Tom"]);
            assert.deepEqual(await ownerPets("Bob"), ["Kitty"]);
        });

        it("the map-reduce index sums per company, and follows new orders", async () => {
            const totals = async () => {
                const r = await ctx.store.openSession().query({ indexName: "Orders/Totals" })
                    .waitForNonStaleResults().orderBy("Company").all();
                return r.map(x => [x.Company, x.Total, x.Count]);
            };
            assert.deepEqual(await totals(), [["companies/1", 25, 2], ["companies/2", 7, 1]]);
            const s = ctx.store.openSession();
            await s.store(new Order({ Company: "companies/2", Total: 3 }), "orders/4");
            await s.saveChanges();
            assert.deepEqual(await totals(), [["companies/1", 25, 2], ["companies/2", 10, 2]]);
            const one = await ctx.store.openSession().query({ indexName: "Orders/Totals" })
                .waitForNonStaleResults().whereEquals("Company", "companies/1").single();
            assert.equal(one.Total, 25);
        });
    });

    describe("index operations", () => {
        it("PutIndexesOperation puts a JavaScript definition and returns its name", async () => {
            const res = await ctx.store.maintenance.send(new PutIndexesOperation(
                jsIndex("People/ByName", ["map('People', p => ({ Name: p.Name }))"])));
            assert.equal(res.length, 1);
            assert.equal(res[0].index, "People/ByName");
            const r = await ctx.store.openSession().query({ indexName: "People/ByName" })
                .waitForNonStaleResults().whereEquals("Name", "Bob").all();
            assert.deepEqual(r.map(x => x.Name), ["Bob"]);
        });

        it("GetIndexesOperation returns the definitions with their JavaScript maps and type", async () => {
            const defs = await ctx.store.maintenance.send(new GetIndexesOperation(0, 100));
            const byName = Object.fromEntries(defs.map(d => [d.name, d]));
            assert.ok(byName["Pets/ByOwner"], `got ${Object.keys(byName)}`);
            assert.equal(byName["Pets/ByOwner"].type, "JavaScriptMap");
            const maps = [...byName["Pets/ByOwner"].maps];
            assert.equal(maps.length, 1);
            assert.match(maps[0], /load\(p\.OwnerId, "People"\)/);
            assert.equal(byName["Orders/Totals"].type, "JavaScriptMapReduce");
            assert.match(byName["Orders/Totals"].reduce, /groupBy/);
        });

        it("GetIndexOperation returns one definition, and null for an unknown name", async () => {
            const def = await ctx.store.maintenance.send(new GetIndexOperation("People/ByName"));
            assert.equal(def.name, "People/ByName");
            assert.equal(def.type, "JavaScriptMap");
            assert.deepEqual([...def.maps], ["map('People', p => ({ Name: p.Name }))"]);
            assert.equal(await ctx.store.maintenance.send(new GetIndexOperation("No/Such/Index")), null);
        });

        it("GetIndexStatisticsOperation reports entries, the source collection and the state", async () => {
            await ownerPets("Bob"); // caught up
            const stats = await ctx.store.maintenance.send(new GetIndexStatisticsOperation("Pets/ByOwner"));
            assert.equal(stats.name, "Pets/ByOwner");
            // The client camel-cases every key of the response, the collection names
            // under Collections included ("Pets" arrives as "pets").
            assert.ok(collectionKeys(stats).map(k => k.toLowerCase()).includes("pets"), `collections: ${collectionKeys(stats)}`);
            assert.equal(stats.entriesCount, 4, "four pets");
            assert.equal(stats.state, "Normal");
            assert.equal(stats.type, "JavaScriptMap");
            assert.equal(stats.isStale ?? stats.stale, false, "caught up"); // the client camel-cases IsStale
        });

        it("GetIndexErrorsOperation records a failing document without stopping the index", async () => {
            await ctx.store.maintenance.send(new PutIndexesOperation(
                jsIndex("Pets/Shouting", ["map('Pets', p => ({ Loud: p.Nickname.toUpperCase() }))"])));
            const s = ctx.store.openSession();
            await s.store(new Pet({ Name: "Loud", Nickname: "loudy", OwnerId: "people/2" }), "pets/5");
            await s.saveChanges();
            const r = await ctx.store.openSession().query({ indexName: "Pets/Shouting" })
                .waitForNonStaleResults().whereEquals("Loud", "LOUDY").all();
            assert.deepEqual(r.map(p => p.Name), ["Loud"], "documents that map fine are indexed");
            const all = await ctx.store.maintenance.send(new GetIndexErrorsOperation());
            const mine = all.find(e => e.name === "Pets/Shouting");
            assert.ok(mine, `errors of ${all.map(e => e.name)}`);
            assert.ok(mine.errors.length >= 4, `pets without Nickname fail: ${JSON.stringify(mine.errors)}`);
            assert.ok(mine.errors.some(e => e.document === "pets/1"), JSON.stringify(mine.errors));
            assert.ok(mine.errors.every(e => typeof e.error === "string" && e.error.length > 0));
            const only = await ctx.store.maintenance.send(new GetIndexErrorsOperation(["Pets/ByOwner"]));
            assert.deepEqual(only.map(e => [e.name, e.errors.length]), [["Pets/ByOwner", 0]]);
        });

        it("SetIndexesPriorityOperation and SetIndexesLockOperation show in the definition", async () => {
            await ctx.store.maintenance.send(new SetIndexesPriorityOperation("Pets/ByOwner", "High"));
            await ctx.store.maintenance.send(new SetIndexesLockOperation("Pets/ByOwner", "LockedIgnore"));
            const def = await ctx.store.maintenance.send(new GetIndexOperation("Pets/ByOwner"));
            assert.equal(def.priority, "High");
            assert.equal(def.lockMode, "LockedIgnore");
            const stats = await ctx.store.maintenance.send(new GetIndexStatisticsOperation("Pets/ByOwner"));
            assert.equal(stats.priority, "High");
            assert.equal(stats.lockMode, "LockedIgnore");
            await ctx.store.maintenance.send(new SetIndexesLockOperation("Pets/ByOwner", "Unlock"));
            await ctx.store.maintenance.send(new SetIndexesPriorityOperation("Pets/ByOwner", "Normal"));
            const back = await ctx.store.maintenance.send(new GetIndexOperation("Pets/ByOwner"));
            assert.equal(back.lockMode, "Unlock");
            assert.equal(back.priority, "Normal");
        });

        it("DisableIndexOperation / EnableIndexOperation: GetIndexingStatusOperation follows", async () => {
            const statusOf = async name => {
                const st = await ctx.store.maintenance.send(new GetIndexingStatusOperation());
                assert.equal(st.status, "Running", "indexing as a whole keeps running");
                const one = st.indexes.find(i => i.name === name);
                assert.ok(one, `indexes: ${JSON.stringify(st.indexes)}`);
                return one.status;
            };
            assert.equal(await statusOf("Pets/ByOwner"), "Running");
            await ctx.store.maintenance.send(new DisableIndexOperation("Pets/ByOwner"));
            assert.equal(await statusOf("Pets/ByOwner"), "Disabled");
            const stats = await ctx.store.maintenance.send(new GetIndexStatisticsOperation("Pets/ByOwner"));
            assert.equal(stats.state, "Disabled");
            await ctx.store.maintenance.send(new EnableIndexOperation("Pets/ByOwner"));
            assert.equal(await statusOf("Pets/ByOwner"), "Running");
            assert.deepEqual(await ownerPets("Bob"), ["Kitty", "Loud"], "an enabled index answers again");
        });

        it("StopIndexOperation / StopIndexingOperation pause indexing, StartIndex(ing)Operation resumes it", async () => {
            const status = async () => {
                const st = await ctx.store.maintenance.send(new GetIndexingStatusOperation());
                return [st.status, Object.fromEntries(st.indexes.map(i => [i.name, i.status]))];
            };
            await ctx.store.maintenance.send(new StopIndexOperation("Pets/ByOwner"));
            let [all, each] = await status();
            assert.equal(all, "Running");
            assert.equal(each["Pets/ByOwner"], "Paused");
            assert.equal(each["People/ByName"], "Running");
            await ctx.store.maintenance.send(new StartIndexOperation("Pets/ByOwner"));
            await ctx.store.maintenance.send(new StopIndexingOperation());
            [all, each] = await status();
            assert.equal(all, "Paused");
            assert.ok(Object.values(each).every(s => s === "Paused"), JSON.stringify(each));
            await ctx.store.maintenance.send(new StartIndexingOperation());
            [all, each] = await status();
            assert.equal(all, "Running");
            assert.ok(Object.values(each).every(s => s === "Running"), JSON.stringify(each));
            assert.deepEqual(await ownerPets("Bob"), ["Kitty", "Loud"], "a resumed index answers");
        });

        it("ResetIndexOperation rebuilds the index with the same results", async () => {
            await ctx.store.maintenance.send(new ResetIndexOperation("Pets/ByOwner"));
            assert.deepEqual(await ownerPets("Alicia"), ["Fido", "Rex", "Tom"]);
            const stats = await ctx.store.maintenance.send(new GetIndexStatisticsOperation("Pets/ByOwner"));
            assert.equal(stats.entriesCount, 5);
        });

        it("DeleteIndexOperation removes the index; querying it then fails with IndexDoesNotExistException", async () => {
            await ctx.store.maintenance.send(new DeleteIndexOperation("People/ByName"));
            const names = await ctx.store.maintenance.send(new GetIndexNamesOperation(0, 100));
            assert.ok(!names.includes("People/ByName"), `names: ${names}`);
            await assert.rejects(
                ctx.store.openSession().query({ indexName: "People/ByName" }).whereEquals("Name", "Bob").all(),
                h.errorNamed("IndexDoesNotExistException"));
        });

        it("a C#/LINQ definition is refused with a message that says JavaScript indexes are supported", async () => {
            const def = jsIndex("Pets/Linq", ["from p in docs.Pets select new { p.Name }"]);
            await assert.rejects(ctx.store.maintenance.send(new PutIndexesOperation(def)), err => {
                assert.match(err.message, /JavaScript/, `${err.name}: ${err.message}`);
                return true;
            });
            const names = await ctx.store.maintenance.send(new GetIndexNamesOperation(0, 100));
            assert.ok(!names.includes("Pets/Linq"), "a refused definition must not be stored");
        });

        it("a JavaScript definition that does not compile is refused and not stored", async () => {
            await assert.rejects(ctx.store.maintenance.send(new PutIndexesOperation(
                jsIndex("Pets/Broken", ["map('Pets', p => ({ Name: p.Name }"]))));
            const names = await ctx.store.maintenance.send(new GetIndexNamesOperation(0, 100));
            assert.ok(!names.includes("Pets/Broken"));
        });
    });

    describe("waiting for indexes, patch and delete by query, streaming", () => {
        it("waitForIndexesAfterSaveChanges: a query right after saveChanges sees the write", async () => {
            const s = ctx.store.openSession();
            s.advanced.waitForIndexesAfterSaveChanges({ indexes: ["Pets/ByOwner"], timeout: 15_000, throwOnTimeout: true });
            await s.store(new Pet({ Name: "Nemo", OwnerId: "people/2" }), "pets/6");
            await s.saveChanges();
            // No waitForNonStaleResults here: the batch returned only once the index had it.
            const r = await ctx.store.openSession().query({ indexName: "Pets/ByOwner" })
                .whereEquals("OwnerName", "Bob").all();
            assert.ok(r.map(p => p.Name).includes("Nemo"), `got ${r.map(p => p.Name)}`);
        });

        it("PatchByQueryOperation patches every match once waitForCompletion resolves", async () => {
            const op = await ctx.store.operations.send(new PatchByQueryOperation(
                "from Pets where OwnerId = 'people/2' update { this.Vaccinated = true; }"));
            await op.waitForCompletion();
            const s = ctx.store.openSession();
            const pets = await s.load(["pets/1", "pets/4", "pets/5", "pets/6"]);
            assert.equal(pets["pets/4"].Vaccinated, true);
            assert.equal(pets["pets/5"].Vaccinated, true);
            assert.equal(pets["pets/6"].Vaccinated, true);
            assert.equal(pets["pets/1"].Vaccinated, undefined, "pets of other owners are untouched");
        });

        it("PatchByQueryOperation over a static index with parameters", async () => {
            const iq = new IndexQuery();
            iq.query = "from index 'Pets/ByOwner' where OwnerName = $owner update { this.Owner = $owner; }";
            iq.queryParameters = { owner: "Alicia" };
            const op = await ctx.store.operations.send(new PatchByQueryOperation(iq));
            await op.waitForCompletion();
            const pets = await ctx.store.openSession().load(["pets/1", "pets/2", "pets/3", "pets/4"]);
            assert.deepEqual(["pets/1", "pets/2", "pets/3"].map(id => pets[id].Owner), ["Alicia", "Alicia", "Alicia"]);
            assert.equal(pets["pets/4"].Owner, undefined);
        });

        it("DeleteByQueryOperation deletes every match once waitForCompletion resolves", async () => {
            const iq = new IndexQuery();
            iq.query = "from Orders where Total < $max";
            iq.queryParameters = { max: 8 };
            const op = await ctx.store.operations.send(new DeleteByQueryOperation(iq));
            await op.waitForCompletion();
            const s = ctx.store.openSession();
            const orders = await s.load(["orders/1", "orders/2", "orders/3", "orders/4"]);
            assert.equal(orders["orders/3"], null, "Total 7 < 8: deleted");
            assert.equal(orders["orders/4"], null, "Total 3 < 8: deleted");
            assert.ok(orders["orders/1"] && orders["orders/2"], "the others stay");
            const totals = await ctx.store.openSession().query({ indexName: "Orders/Totals" })
                .waitForNonStaleResults().all();
            assert.deepEqual(totals.map(x => x.Company), ["companies/1"], "the map-reduce index follows deletes");
        });

        it("session.advanced.stream(query) streams every match with its id", async () => {
            assert.deepEqual(await ownerPets("Alicia"), ["Fido", "Rex", "Tom"]); // caught up
            const s = ctx.store.openSession();
            // The client refuses waitForNonStaleResults on a stream (streams do not wait by design).
            const query = s.query({ indexName: "Pets/ByOwner" }).whereEquals("OwnerName", "Alicia");
            let streamStats;
            const stream = await s.advanced.stream(query, st => { streamStats = st; });
            const got = [];
            for await (const item of stream) {
                got.push([item.id, item.document.Name]);
            }
            got.sort();
            assert.deepEqual(got, [["pets/1", "Rex"], ["pets/2", "Tom"], ["pets/3", "Fido"]]);
            assert.ok(streamStats, "stream statistics are reported");
            assert.equal(streamStats.indexName, "Pets/ByOwner");
            assert.equal(streamStats.totalResults, 3);
        });
    });
});
