"use strict";
// Issue 14: JavaScript patches through the npm client — session patches (bulk_docs PATCH commands),
// PatchOperation (PATCH /docs) with each status, a patch undone with its failing batch, debug output.
const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { PatchOperation, PatchRequest } = require("ravendb");
const h = require("./helpers");

class Counter {
    constructor(name, count) {
        this.name = name;
        this.count = count;
    }
}

function patchRequest(script, values) {
    const p = new PatchRequest();
    p.script = script;
    if (values) {
        p.values = values;
    }
    return p;
}

describe("patches", () => {
    let ctx;
    before(async () => {
        ctx = await h.freshDatabase("patch");
        const s = ctx.store.openSession();
        await s.store(new h.Order("companies/1", 10), "orders/1");
        await s.store(new Counter("c", 1), "counters/1");
        await s.saveChanges();
    });
    after(async () => ctx && ctx.teardown());

    it("session.advanced.patch and increment change the stored document and the tracked entity", async () => {
        const s = ctx.store.openSession();
        const order = await s.load("orders/1", h.Order);
        s.advanced.patch(order, "total", 42);
        s.advanced.increment("counters/1", "count", 5);
        await s.saveChanges();
        // The session updated its entity from the returned ModifiedDocument.
        assert.equal(order.total, 42);
        const r = ctx.store.openSession();
        assert.equal((await r.load("orders/1", h.Order)).total, 42);
        assert.equal((await r.load("counters/1", Counter)).count, 6);
    });

    it("addOrIncrement and addOrPatch create a missing document and patch an existing one", async () => {
        const s = ctx.store.openSession();
        s.advanced.addOrIncrement("counters/2", new Counter("new", 100), "count", 1);
        s.advanced.addOrIncrement("counters/1", new Counter("ignored", 100), "count", 1);
        s.advanced.addOrPatch("counters/3", new Counter("fresh", 7), "name", "patched");
        await s.saveChanges();
        const r = ctx.store.openSession();
        const c2 = await r.load("counters/2", Counter);
        assert.equal(c2.count, 100, "created as given, not incremented");
        assert.equal(r.advanced.getMetadataFor(c2)["@collection"], "Counters");
        assert.equal((await r.load("counters/1", Counter)).count, 7);
        assert.equal((await r.load("counters/3", Counter)).name, "fresh");

        const t = ctx.store.openSession();
        t.advanced.addOrPatch("counters/3", new Counter("x", 0), "name", "patched");
        await t.saveChanges();
        const u = ctx.store.openSession();
        assert.equal((await u.load("counters/3", Counter)).name, "patched");
    });

    it("PatchOperation reports Patched, NotModified, DocumentDoesNotExist and Created", async () => {
        const patched = await ctx.store.operations.send(
            new PatchOperation("orders/1", null, patchRequest("this.total = this.total + args.add", { add: 8 })));
        assert.equal(patched.status, "Patched");
        assert.equal(patched.document.total, 50);

        const same = await ctx.store.operations.send(
            new PatchOperation("orders/1", null, patchRequest("var t = this.total;")));
        assert.equal(same.status, "NotModified");

        const missing = await ctx.store.operations.send(
            new PatchOperation("orders/404", null, patchRequest("this.total = 1")));
        assert.equal(missing.status, "DocumentDoesNotExist");

        const created = await ctx.store.operations.send(new PatchOperation("orders/2", null,
            patchRequest("this.total = 1"),
            patchRequest("this.total = args.t; this['@metadata']['@collection'] = 'Orders';", { t: 3 })));
        assert.equal(created.status, "Created");
        assert.equal(created.document.total, 3);
        const s = ctx.store.openSession();
        const o2 = await s.load("orders/2", h.Order);
        assert.equal(o2.total, 3);
        assert.equal(s.advanced.getMetadataFor(o2)["@collection"], "Orders");
    });

    it("PatchOperation with a stale change vector: skipped (the client calls a 304 NotModified) or a ConcurrencyException", async () => {
        const skipped = await ctx.store.operations.send(
            new PatchOperation("orders/1", "A:1-AAAAAAAAAAAAAAAAAAAAAA", patchRequest("this.total = 0"), null, true));
        assert.equal(skipped.status, "NotModified");
        await assert.rejects(ctx.store.operations.send(
            new PatchOperation("orders/1", "A:1-AAAAAAAAAAAAAAAAAAAAAA", patchRequest("this.total = 0"))),
        h.errorNamed("ConcurrencyException"));
        const s = ctx.store.openSession();
        assert.equal((await s.load("orders/1", h.Order)).total, 50);
    });

    it("a patch in a session batch is rolled back with the batch when another command fails", async () => {
        const s = ctx.store.openSession();
        s.advanced.increment("counters/1", "count", 1000);
        s.advanced.patch("orders/1", "total", -1);
        const c = new Counter("conflict", 0);
        await s.store(c, "counters/9", { changeVector: "A:1-AAAAAAAAAAAAAAAAAAAAAA" });
        await assert.rejects(s.saveChanges(), h.errorNamed("ConcurrencyException"));
        const r = ctx.store.openSession();
        assert.equal((await r.load("counters/1", Counter)).count, 7);
        assert.equal((await r.load("orders/1", h.Order)).total, 50);
        assert.equal(await r.load("counters/9", Counter), null);
    });

    it("a script that throws fails the batch with a JavaScriptException and writes nothing", async () => {
        const s = ctx.store.openSession();
        await s.store(new Counter("never", 0), "counters/10");
        s.advanced.defer(new (require("ravendb").PatchCommandData)("orders/1", null, patchRequest("this.total = 1; throw new Error('boom')"), null));
        await assert.rejects(s.saveChanges(), err => /JavaScriptException/.test(err.name + err.message) && /boom/.test(err.message));
        const r = ctx.store.openSession();
        assert.equal(await r.load("counters/10", Counter), null);
        assert.equal((await r.load("orders/1", h.Order)).total, 50);
    });

    it("debug output: output() lines and put()/load()/del() actions", async () => {
        const op = new PatchOperation("orders/1", null, patchRequest(
            "output('total is ' + this.total); var c = load('counters/1'); put('logs/1', {n: c.count, '@metadata': {'@collection': 'Logs'}}); del('counters/3'); this.seen = true;"));
        const executor = ctx.store.getRequestExecutor();
        const cmd = op.getCommand(ctx.store, executor.conventions, null, true);
        await executor.execute(cmd);
        assert.equal(cmd.result.status, "Patched");
        assert.deepEqual(cmd.result.debug.Info, ["total is 50"]);
        assert.deepEqual(cmd.result.debug.Actions.LoadDocument, ["counters/1"]);
        assert.deepEqual(cmd.result.debug.Actions.PutDocument, ["logs/1"]);
        assert.deepEqual(cmd.result.debug.Actions.DeleteDocument, ["counters/3"]);
        assert.equal(cmd.result.originalDocument.total, 50);
        assert.equal(cmd.result.modifiedDocument.seen, true);
        const s = ctx.store.openSession();
        assert.equal((await s.load("logs/1")).n, 7);
        assert.equal(await s.load("counters/3"), null);
    });
});
