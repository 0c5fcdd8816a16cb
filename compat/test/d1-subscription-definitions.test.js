"use strict";
// §7.1–7.2: subscription definitions through the npm client: create (named, unnamed, from a class, from the
// last document), list, state, update, drop connections, delete; a bad query is refused. Workers come later.
const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const h = require("./helpers");

describe("subscription definitions", () => {
    let ctx;
    before(async () => {
        ctx = await h.freshDatabase("subs");
    });
    after(async () => ctx && ctx.teardown());

    it("create with a name returns the name; state and list show it", async () => {
        const name = await ctx.store.subscriptions.create({ query: "from Orders where Total > 10", name: "OrdersSub" });
        assert.equal(name, "OrdersSub");
        const st = await ctx.store.subscriptions.getSubscriptionState("OrdersSub");
        assert.equal(st.subscriptionName, "OrdersSub");
        assert.equal(st.query, "from Orders where Total > 10");
        assert.equal(st.disabled, false);
        assert.ok(st.subscriptionId > 0);
    });

    it("create without a name gets its id as the name; from a class and from the last document", async () => {
        const unnamed = await ctx.store.subscriptions.create({ query: "from Companies" });
        assert.match(unnamed, /^\d+$/);
        const fromClass = await ctx.store.subscriptions.create({ documentType: h.Company, changeVector: "LastDocument", name: "ByClass" });
        assert.equal(fromClass, "ByClass");
        const all = await ctx.store.subscriptions.getSubscriptions(0, 10);
        assert.deepEqual(all.map(s => s.subscriptionName).sort(), ["ByClass", "OrdersSub", unnamed].sort());
        assert.equal(all.find(s => s.subscriptionName === "ByClass").query, "from 'Companies' as doc");
    });

    it("a query that does not parse is refused with its position", async () => {
        await assert.rejects(ctx.store.subscriptions.create({ query: "from Orders where Total >", name: "Bad" }),
            err => /position 25/.test(err.message));
    });

    it("update changes the query and disables; drop answers; delete removes it", async () => {
        await ctx.store.subscriptions.update({ name: "OrdersSub", query: "from Orders where Total > 20", disabled: true });
        const st = await ctx.store.subscriptions.getSubscriptionState("OrdersSub");
        assert.equal(st.query, "from Orders where Total > 20");
        assert.equal(st.disabled, true);
        await ctx.store.subscriptions.dropConnection("OrdersSub");
        await ctx.store.subscriptions.delete("OrdersSub");
        const left = await ctx.store.subscriptions.getSubscriptions(0, 10);
        assert.ok(!left.some(s => s.subscriptionName === "OrdersSub"));
    });
});
