"use strict";
// F1 (issue 11): queries with the npm client on one node. Every builder call the issue lists
// (§1.4 of the queries reference for the RQL each one sends), the terminal operations, projections,
// raw RQL with parameters, query includes, statistics, id() and collection queries, dynamic
// group by, typed results and the HTTP cache on a repeated query.
//
// The data set is small and chosen so that every ordering type gives a different order than a
// plain string sort would (Qty as long, Total as double, Code as alphanumeric).
const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const h = require("./helpers");

class Order {
    constructor(init) {
        Object.assign(this, init);
    }
}

class Company {
    constructor(init) {
        Object.assign(this, init);
    }
}

// One collection queried only on Name, so its auto index name is known exactly.
class Invoice {
    constructor(init) {
        Object.assign(this, init);
    }
}

const ORDERS = {
    "orders/1": { Name: "Alpha", Company: "companies/1", Total: 10.5, Qty: 9, Code: "item-9", Tags: ["red", "blue"], Notes: "quick brown fox", Address: { City: "Paris" }, Discount: 1 },
    "orders/2": { Name: "Beta", Company: "companies/1", Total: 20.25, Qty: 10, Code: "item-10", Tags: ["blue"], Notes: "lazy brown dog", Address: { City: "Berlin" } },
    "orders/3": { Name: "Gamma", Company: "companies/2", Total: 30, Qty: 100, Code: "item-100", Tags: ["red", "green", "blue"], Notes: "quick dog", Address: { City: "Paris" }, Discount: 0 },
    "orders/4": { Name: "Delta", Company: "companies/2", Total: 2.75, Qty: 1, Code: "item-1", Tags: ["green"], Notes: "sleepy cat", Address: { City: "Rome" } },
    "orders/5": { Name: "Epsilon", Company: "companies/3", Total: 100, Qty: 50, Code: "item-50", Tags: [], Notes: "brown cow", Address: { City: "Oslo" } },
};

const names = list => list.map(x => x.Name);
const sortedNames = list => names(list).sort();

describe("queries: where operators, ordering, paging, projections, includes, statistics", () => {
    let ctx;
    const q = session => session.query({ collection: "Orders" }).waitForNonStaleResults();

    before(async () => {
        ctx = await h.freshDatabase("queries");
        const s = ctx.store.openSession();
        for (const [id, o] of Object.entries(ORDERS)) {
            await s.store(new Order(o), id);
        }
        await s.store(new Company({ Name: "Acme" }), "companies/1");
        await s.store(new Company({ Name: "Globex" }), "companies/2");
        await s.store(new Company({ Name: "Initech" }), "companies/3");
        await s.store(new Invoice({ Name: "inv-a", Amount: 1 }), "invoices/1");
        await s.store(new Invoice({ Name: "inv-b", Amount: 2 }), "invoices/2");
        await s.saveChanges();
    });
    after(async () => ctx && ctx.teardown());

    describe("where operators", () => {
        it("whereEquals finds exactly the matching document", async () => {
            const r = await q(ctx.store.openSession()).whereEquals("Name", "Beta").all();
            assert.deepEqual(names(r), ["Beta"]);
            assert.equal(r[0].Total, 20.25);
        });

        it("whereEquals is case-insensitive; whereEquals(..., exact=true) is not", async () => {
            const s = ctx.store.openSession();
            assert.deepEqual(names(await q(s).whereEquals("Name", "beta").all()), ["Beta"]);
            assert.deepEqual(names(await q(s).whereEquals("Name", "beta", true).all()), [],
                "exact(Name = 'beta') must not match 'Beta'");
            assert.deepEqual(names(await q(s).whereEquals("Name", "Beta", true).all()), ["Beta"]);
        });

        it("whereNotEquals and not().whereEquals exclude the value", async () => {
            const s = ctx.store.openSession();
            assert.deepEqual(sortedNames(await q(s).whereNotEquals("Name", "Alpha").all()), ["Beta", "Delta", "Epsilon", "Gamma"]);
            assert.deepEqual(sortedNames(await q(s).not().whereEquals("Name", "Alpha").all()), ["Beta", "Delta", "Epsilon", "Gamma"]);
        });

        it("whereGreaterThan / whereLessThan are strict, the OrEqual forms are inclusive (numbers, not strings)", async () => {
            const s = ctx.store.openSession();
            assert.deepEqual(sortedNames(await q(s).whereGreaterThan("Total", 20.25).all()), ["Epsilon", "Gamma"]);
            assert.deepEqual(sortedNames(await q(s).whereGreaterThanOrEqual("Total", 20.25).all()), ["Beta", "Epsilon", "Gamma"]);
            assert.deepEqual(sortedNames(await q(s).whereLessThan("Total", 10.5).all()), ["Delta"]);
            assert.deepEqual(sortedNames(await q(s).whereLessThanOrEqual("Total", 10.5).all()), ["Alpha", "Delta"]);
            // 100 > 30 numerically, but "100" < "30" as strings.
            assert.deepEqual(sortedNames(await q(s).whereGreaterThan("Qty", 50).all()), ["Gamma"]);
        });

        it("whereBetween is inclusive on both ends", async () => {
            const r = await q(ctx.store.openSession()).whereBetween("Total", 10.5, 30).all();
            assert.deepEqual(sortedNames(r), ["Alpha", "Beta", "Gamma"]);
        });

        it("whereIn matches any listed value (an array parameter); unknown values match nothing", async () => {
            const r = await q(ctx.store.openSession()).whereIn("Name", ["Alpha", "Gamma", "Nope"]).all();
            assert.deepEqual(sortedNames(r), ["Alpha", "Gamma"]);
        });

        it("containsAll needs every value in the array field; containsAny one of them", async () => {
            const s = ctx.store.openSession();
            assert.deepEqual(sortedNames(await q(s).containsAll("Tags", ["red", "blue"]).all()), ["Alpha", "Gamma"]);
            assert.deepEqual(sortedNames(await q(s).containsAny("Tags", ["green"]).all()), ["Delta", "Gamma"]);
        });

        it("whereStartsWith and whereEndsWith match prefixes and suffixes", async () => {
            const s = ctx.store.openSession();
            assert.deepEqual(names(await q(s).whereStartsWith("Name", "Al").all()), ["Alpha"]);
            assert.deepEqual(sortedNames(await q(s).whereEndsWith("Name", "ta").all()), ["Beta", "Delta"]);
        });

        it("whereExists matches documents that have the field, even when its value is 0", async () => {
            const r = await q(ctx.store.openSession()).whereExists("Discount").all();
            assert.deepEqual(sortedNames(r), ["Alpha", "Gamma"]);
        });

        it("whereRegex matches the pattern", async () => {
            const r = await q(ctx.store.openSession()).whereRegex("Name", "^(Al|Be)").all();
            assert.deepEqual(sortedNames(r), ["Alpha", "Beta"]);
        });

        it("search matches any term by default, every term with 'AND'", async () => {
            const s = ctx.store.openSession();
            assert.deepEqual(sortedNames(await q(s).search("Notes", "quick").all()), ["Alpha", "Gamma"]);
            assert.deepEqual(sortedNames(await q(s).search("Notes", "quick dog").all()), ["Alpha", "Beta", "Gamma"]);
            assert.deepEqual(sortedNames(await q(s).search("Notes", "quick dog", "AND").all()), ["Gamma"]);
        });

        it("orElse joins clauses with or; consecutive where calls are and", async () => {
            const s = ctx.store.openSession();
            const or = await q(s).whereEquals("Name", "Alpha").orElse().whereEquals("Name", "Delta").all();
            assert.deepEqual(sortedNames(or), ["Alpha", "Delta"]);
            const and = await q(s).whereEquals("Company", "companies/1").whereGreaterThan("Total", 15).all();
            assert.deepEqual(names(and), ["Beta"]);
        });

        it("openSubclause/closeSubclause group an or inside an and", async () => {
            const r = await q(ctx.store.openSession())
                .openSubclause()
                .whereEquals("Company", "companies/1").orElse().whereEquals("Company", "companies/2")
                .closeSubclause()
                .andAlso()
                .whereGreaterThan("Total", 15)
                .all();
            assert.deepEqual(sortedNames(r), ["Beta", "Gamma"]);
        });

        it("not() before a subclause negates the whole group", async () => {
            const r = await q(ctx.store.openSession())
                .not().openSubclause()
                .whereEquals("Name", "Alpha").orElse().whereEquals("Name", "Beta")
                .closeSubclause()
                .all();
            assert.deepEqual(sortedNames(r), ["Delta", "Epsilon", "Gamma"]);
        });

        it("a nested path (Address.City) is queryable", async () => {
            const r = await q(ctx.store.openSession()).whereEquals("Address.City", "Paris").all();
            assert.deepEqual(sortedNames(r), ["Alpha", "Gamma"]);
        });
    });

    describe("ordering and paging", () => {
        it("orderBy without a type sorts strings; orderByDescending reverses", async () => {
            const s = ctx.store.openSession();
            assert.deepEqual(names(await q(s).orderBy("Name").all()), ["Alpha", "Beta", "Delta", "Epsilon", "Gamma"]);
            assert.deepEqual(names(await q(s).orderByDescending("Name").all()), ["Gamma", "Epsilon", "Delta", "Beta", "Alpha"]);
        });

        it("orderBy 'Long' sorts numerically (a string sort would put 100 before 50)", async () => {
            const r = await q(ctx.store.openSession()).orderBy("Qty", "Long").all();
            assert.deepEqual(r.map(x => x.Qty), [1, 9, 10, 50, 100]);
        });

        it("orderByDescending 'Double' sorts fractional numbers numerically, descending", async () => {
            const r = await q(ctx.store.openSession()).orderByDescending("Total", "Double").all();
            assert.deepEqual(r.map(x => x.Total), [100, 30, 20.25, 10.5, 2.75]);
        });

        it("orderBy 'AlphaNumeric' sorts the digits inside strings as numbers", async () => {
            const r = await q(ctx.store.openSession()).orderBy("Code", "AlphaNumeric").all();
            assert.deepEqual(r.map(x => x.Code), ["item-1", "item-9", "item-10", "item-50", "item-100"]);
        });

        it("skip and take page through an ordered result; statistics keep the total", async () => {
            let stats;
            const r = await q(ctx.store.openSession())
                .statistics(s => { stats = s; })
                .orderBy("Name").skip(1).take(2).all();
            assert.deepEqual(names(r), ["Beta", "Delta"]);
            assert.equal(stats.totalResults, 5, "TotalResults counts every match, not the page");
            assert.equal(stats.skippedResults, 0);
        });

        it("take alone limits (limit with a null offset), skip past the end gives nothing", async () => {
            const s = ctx.store.openSession();
            assert.deepEqual(names(await q(s).orderBy("Name").take(3).all()), ["Alpha", "Beta", "Delta"]);
            assert.deepEqual(await q(s).orderBy("Name").skip(10).take(3).all(), []);
        });
    });

    describe("terminal operations", () => {
        it("first returns the first of the ordered results and throws when there is none", async () => {
            const s = ctx.store.openSession();
            const first = await q(s).orderBy("Total", "Double").first();
            assert.equal(first.Name, "Delta");
            await assert.rejects(q(s).whereEquals("Name", "Nobody").first(), h.errorNamed("InvalidOperationException"));
        });

        it("firstOrNull returns null when nothing matches", async () => {
            const s = ctx.store.openSession();
            assert.equal(await q(s).whereEquals("Name", "Nobody").firstOrNull(), null);
            assert.equal((await q(s).whereEquals("Name", "Gamma").firstOrNull()).Total, 30);
        });

        it("single returns the only match and throws for two", async () => {
            const s = ctx.store.openSession();
            assert.equal((await q(s).whereEquals("Name", "Epsilon").single()).Qty, 50);
            await assert.rejects(q(s).whereEquals("Company", "companies/1").single(), h.errorNamed("InvalidOperationException"));
        });

        it("count reads TotalResults; any is true only when something matches", async () => {
            const s = ctx.store.openSession();
            assert.equal(await q(s).whereEquals("Company", "companies/1").count(), 2);
            assert.equal(await q(s).count(), 5);
            assert.equal(await q(s).whereEquals("Company", "companies/3").any(), true);
            assert.equal(await q(s).whereEquals("Company", "companies/404").any(), false);
        });
    });

    describe("projections, raw RQL, includes", () => {
        it("selectFields returns only the selected fields", async () => {
            const r = await q(ctx.store.openSession()).whereEquals("Name", "Alpha").selectFields(["Name", "Total"]).all();
            assert.equal(r.length, 1);
            assert.equal(r[0].Name, "Alpha");
            assert.equal(r[0].Total, 10.5);
            assert.equal(r[0].Tags, undefined, "Tags was not selected");
            assert.equal(r[0].Notes, undefined, "Notes was not selected");
        });

        it("distinct().selectFields gives each value once", async () => {
            const r = await q(ctx.store.openSession()).distinct().selectFields("Company").all();
            assert.deepEqual(r.map(x => (typeof x === "string" ? x : x.Company)).sort(), ["companies/1", "companies/2", "companies/3"]);
        });

        it("rawQuery with addParameter sends named parameters", async () => {
            const r = await ctx.store.openSession().advanced
                .rawQuery("from Orders where Total > $min order by Total as double")
                .addParameter("min", 20)
                .waitForNonStaleResults()
                .all();
            assert.deepEqual(names(r), ["Beta", "Gamma", "Epsilon"]);
        });

        it("rawQuery with an array parameter for in", async () => {
            const r = await ctx.store.openSession().advanced
                .rawQuery("from Orders where Name in ($names)")
                .addParameter("names", ["Delta", "Epsilon"])
                .waitForNonStaleResults()
                .all();
            assert.deepEqual(sortedNames(r), ["Delta", "Epsilon"]);
        });

        it("include(...) on a query: the included documents then load without a request", async () => {
            const s = ctx.store.openSession();
            const r = await q(s).whereEquals("Company", "companies/2").include("Company").all();
            assert.deepEqual(sortedNames(r), ["Delta", "Gamma"]);
            const before = s.advanced.numberOfRequests;
            assert.equal(before, 1, "one query request");
            assert.ok(s.advanced.isLoaded("companies/2"), "the included company must be tracked");
            const c = await s.load("companies/2");
            assert.equal(c.Name, "Globex");
            assert.equal(s.advanced.numberOfRequests, before, "loading an included document must not send a request");
        });
    });

    describe("statistics, id() and collection queries, waitForNonStaleResults", () => {
        it("statistics name the auto index (Auto/Invoices/ByName), the totals, the node and staleness", async () => {
            let stats;
            const r = await ctx.store.openSession().query({ collection: "Invoices" })
                .waitForNonStaleResults()
                .statistics(s => { stats = s; })
                .whereEquals("Name", "inv-b")
                .all();
            assert.deepEqual(r.map(x => x.Amount), [2]);
            assert.equal(stats.indexName, "Auto/Invoices/ByName");
            assert.equal(stats.totalResults, 1);
            assert.equal(stats.skippedResults, 0);
            assert.equal(stats.isStale, false);
            assert.equal(stats.nodeTag, "A");
            assert.ok(stats.durationInMs >= 0, `durationInMs ${stats.durationInMs}`);
            assert.ok(stats.indexTimestamp instanceof Date, "IndexTimestamp is parsed as a date");
            assert.equal(typeof stats.resultEtag, "number");
        });

        it("whereEquals('id', ...) is an id() query served by the collection (collection/Orders)", async () => {
            let stats;
            const r = await ctx.store.openSession().query({ collection: "Orders" })
                .statistics(s => { stats = s; })
                .whereEquals("id", "orders/3")
                .all();
            assert.deepEqual(names(r), ["Gamma"]);
            assert.equal(stats.indexName, "collection/Orders");
            assert.equal(stats.isStale, false);
        });

        it("whereIn('id', [...]) returns those documents; a plain collection query uses no index", async () => {
            let stats;
            const s = ctx.store.openSession();
            const byIds = await s.query({ collection: "Orders" }).whereIn("id", ["orders/1", "orders/5", "orders/404"]).all();
            assert.deepEqual(sortedNames(byIds), ["Alpha", "Epsilon"]);
            const all = await s.query({ collection: "Orders" }).statistics(x => { stats = x; }).all();
            assert.equal(all.length, 5);
            assert.equal(stats.indexName, "collection/Orders");
        });

        it("waitForNonStaleResults: a document written just before is found by the next query", async () => {
            const w = ctx.store.openSession();
            await w.store(new Order({ Name: "Zeta", Company: "companies/9", Total: 1, Qty: 1, Code: "z", Tags: [], Notes: "new" }), "orders/zeta");
            await w.saveChanges();
            let stats;
            const r = await ctx.store.openSession().query({ collection: "Orders" })
                .waitForNonStaleResults(10_000)
                .statistics(s => { stats = s; })
                .whereEquals("Company", "companies/9")
                .all();
            assert.deepEqual(names(r), ["Zeta"]);
            assert.equal(stats.isStale, false);
            const d = ctx.store.openSession();
            await d.delete("orders/zeta");
            await d.saveChanges();
            const gone = await ctx.store.openSession().query({ collection: "Orders" })
                .waitForNonStaleResults().whereEquals("Company", "companies/9").all();
            assert.deepEqual(gone, [], "a deleted document must leave the index");
        });
    });

    describe("group by", () => {
        it("groupBy('Company').selectKey().selectCount() counts per company", async () => {
            let stats;
            const r = await ctx.store.openSession().query({ collection: "Orders" })
                .waitForNonStaleResults()
                .statistics(s => { stats = s; })
                .groupBy("Company").selectKey().selectCount()
                .all();
            const byCompany = Object.fromEntries(r.map(x => [x.Company, x.count]));
            assert.deepEqual(byCompany, { "companies/1": 2, "companies/2": 2, "companies/3": 1 });
            assert.match(stats.indexName, /^Auto\/Orders\/By.*ReducedByCompany$/);
        });

        it("groupBy('Company').selectKey().selectSum(Total as Sum) sums per company", async () => {
            const r = await ctx.store.openSession().query({ collection: "Orders" })
                .waitForNonStaleResults()
                .groupBy("Company").selectKey().selectSum({ fieldName: "Total", projectedName: "Sum" })
                .all();
            const byCompany = Object.fromEntries(r.map(x => [x.Company, x.Sum]));
            assert.deepEqual(byCompany, { "companies/1": 30.75, "companies/2": 32.75, "companies/3": 100 });
        });
    });

    describe("typed results and the HTTP cache", () => {
        it("a query with a document type returns instances of the class", async () => {
            const s = ctx.store.openSession();
            const r = await s.query({ collection: "Orders", documentType: Order }).waitForNonStaleResults()
                .whereEquals("Name", "Gamma").all();
            assert.equal(r.length, 1);
            assert.ok(r[0] instanceof Order, `expected an Order, got ${r[0] && r[0].constructor.name}`);
            assert.equal(r[0].id, "orders/3");
            const byClass = await s.query(Order).waitForNonStaleResults().whereEquals("Name", "Beta").all();
            assert.ok(byClass[0] instanceof Order);
            assert.equal(byClass[0].id, "orders/2");
            assert.equal(s.advanced.getMetadataFor(byClass[0])["@collection"], "Orders");
        });

        it("results are tracked: a change to a queried entity is saved by saveChanges", async () => {
            const s = ctx.store.openSession();
            const [o] = await s.query({ collection: "Orders", documentType: Order }).whereEquals("id", "orders/4").all();
            o.Notes = "sleepy cat, awake";
            await s.saveChanges();
            const again = await ctx.store.openSession().load("orders/4");
            assert.equal(again.Notes, "sleepy cat, awake");
        });

        it("a second identical query is answered 304 from the client's cache (durationInMs -1)", async () => {
            const run = async () => {
                let stats;
                const r = await ctx.store.openSession().query({ collection: "Orders" })
                    .statistics(s => { stats = s; })
                    .whereEquals("Name", "Alpha").all();
                return { r, stats };
            };
            await q(ctx.store.openSession()).whereEquals("Name", "Alpha").all(); // the index is caught up
            const first = await run();
            const rec = h.recordResponses(ctx.store.getRequestExecutor());
            const second = await run();
            rec.stop();
            const queries = rec.seen.filter(x => x.url.includes("/queries"));
            assert.deepEqual(queries.map(x => x.status), [304], "the repeated query must be a 304");
            assert.equal(second.stats.durationInMs, -1, "a cached answer reports durationInMs -1");
            assert.deepEqual(names(second.r), names(first.r));
        });
    });
});
