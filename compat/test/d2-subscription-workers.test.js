"use strict";
// §7.3–7.5: subscription workers through the npm client's getSubscriptionWorker: delivery in etag order
// within maxDocsPerBatch, existing then new documents, the position moving on ack; redelivery after a worker
// is killed (a real child process, SIGKILL) or its handler throws; OpenIfFree and TakeOver;
// CloseWhenNoDocsLeft, dropped connections, unknown subscriptions, where-clauses and includes.
//
// Every test gets its own database, so each subscription sees only that test's documents.
const { describe, it, beforeEach, afterEach } = require("node:test");
const assert = require("node:assert/strict");
const { fork } = require("node:child_process");
const path = require("node:path");
const h = require("./helpers");
const s = require("./sub-helpers");

describe("subscription workers", () => {
    let ctx;
    let workers;
    let children;
    beforeEach(async () => {
        ctx = await h.freshDatabase("subw");
        workers = [];
        children = [];
    });
    afterEach(async () => {
        for (const w of workers) {
            w.dispose();
        }
        for (const c of children) {
            if (c.exitCode === null && c.signalCode === null) {
                c.kill("SIGKILL");
            }
        }
        if (ctx) {
            await ctx.teardown();
        }
    });

    const worker = opts => {
        const w = ctx.store.subscriptions.getSubscriptionWorker(opts);
        workers.push(w);
        return w;
    };
    // A worker in a child process (sub-worker-child.js): messages holds what it reported; next(pred) waits
    // for the first reported message matching pred.
    const childWorker = (name, mode, batch) => {
        const proc = fork(path.join(__dirname, "sub-worker-child.js"), [], {
            env: { ...process.env, SUB_DB: ctx.database, SUB_NAME: name, SUB_MODE: mode, SUB_BATCH: String(batch) },
            stdio: ["ignore", "inherit", "inherit", "ipc"],
        });
        children.push(proc);
        const messages = [];
        const waiters = [];
        proc.on("message", m => {
            messages.push(m);
            for (const w of waiters.splice(0)) {
                w();
            }
        });
        const exited = new Promise(resolve => proc.once("exit", (code, signal) => {
            resolve({ code, signal });
            for (const w of waiters.splice(0)) {
                w();
            }
        }));
        const next = (pred, what) => s.withDeadline(new Promise((resolve, reject) => {
            const check = () => {
                const m = messages.find(pred);
                if (m) {
                    resolve(m);
                } else if (proc.exitCode !== null || proc.signalCode !== null) {
                    reject(new Error(`the child worker exited before ${what}: ${JSON.stringify(messages)}`));
                } else {
                    waiters.push(check);
                }
            };
            check();
        }), 20_000, what);
        return { process: proc, messages, exited, next };
    };
    const state = name => ctx.store.subscriptions.getSubscriptionState(name);
    // Waits until the subscription's stored position is the etag of changeVector: the batch holding it
    // was acknowledged (and the worker is waiting for the next one).
    const acked = (name, changeVector) => s.until(async () => {
        const st = await state(name);
        const cv = st.changeVectorForNextBatchStartingPoint;
        return cv && s.etagOf(cv) === s.etagOf(changeVector) && st;
    }, `${name} acknowledged up to ${changeVector}`);

    it("delivers existing documents, then new ones, in etag order and in batches of at most maxDocsPerBatch; the position moves", async () => {
        const first = await s.storeOrders(ctx.store, 25, i => i * 3);
        await ctx.store.subscriptions.create({ query: "from Orders", name: "All" });
        assert.equal((await state("All")).changeVectorForNextBatchStartingPoint, null);

        const t = s.track(worker({ subscriptionName: "All", maxDocsPerBatch: 10, documentType: h.Order }));
        await s.until(() => t.items.length >= 25, "the 25 existing orders");
        assert.deepEqual(t.items.map(i => i.id), first);
        assert.deepEqual(t.batches.map(b => b.length), [10, 10, 5]);
        assert.ok(t.items[7].result instanceof h.Order);
        assert.equal(t.items[7].result.total, 21);
        const st1 = await acked("All", t.items[24].changeVector);

        // New documents while the worker waits.
        const more = await s.storeOrders(ctx.store, 5, i => 1000 + i);
        await s.until(() => t.items.length >= 30, "the 5 new orders");
        assert.deepEqual(t.items.map(i => i.id), [...first, ...more]);
        assert.ok(t.batches.every(b => b.length <= 10), `batch sizes ${t.batches.map(b => b.length)}`);
        const etags = t.items.map(i => s.etagOf(i.changeVector));
        for (let i = 1; i < etags.length; i++) {
            assert.ok(etags[i] > etags[i - 1], `etag order broken at ${i}: ${etags}`);
        }
        const st2 = await acked("All", t.items[29].changeVector);
        assert.notEqual(st2.changeVectorForNextBatchStartingPoint, st1.changeVectorForNextBatchStartingPoint);
        assert.ok(st2.lastBatchAckTime, "lastBatchAckTime is set");
        assert.deepEqual(t.errors, []);
        assert.equal(t.items.length, 30, "nothing delivered twice");
    });

    it("a worker killed (SIGKILL) in the middle of a batch gets it again on the next connection", async () => {
        const ids = await s.storeOrders(ctx.store, 6);
        await ctx.store.subscriptions.create({ query: "from Orders", name: "Killed" });

        const child = childWorker("Killed", "hang", 4);
        const msg = await child.next(m => m.type === "batch", "the child's first batch");
        assert.deepEqual(msg.ids, ids.slice(0, 4));
        child.process.kill("SIGKILL");
        assert.equal((await child.exited).signal, "SIGKILL");

        // The server notices the dead connection and frees the subscription; nothing was acknowledged.
        await s.until(async () => (await s.connectionDetails(ctx.database, "Killed")).Results.length === 0,
            "the killed worker's connection to go away");
        assert.equal((await state("Killed")).changeVectorForNextBatchStartingPoint, null);

        const t = s.track(worker({ subscriptionName: "Killed", maxDocsPerBatch: 4 }));
        await s.until(() => t.items.length >= 6, "all six orders on the new worker");
        assert.deepEqual(t.batches[0], msg.ids, "the killed batch again, first");
        assert.deepEqual(t.items.map(i => i.id), ids);
        await acked("Killed", t.items[5].changeVector);
        // The monitor (recomputed at most once a second) counts the four documents sent twice.
        await s.until(async () => (await s.getJSON(`/databases/${ctx.database}/subscriptions/monitor?name=Killed`)).Redeliveries === 4,
            "the monitor to count 4 redelivered documents");
        assert.deepEqual(t.errors, []);
    });

    it("a handler that throws (ignoreSubscriberErrors false) stops the worker without an ack; the next worker gets the batch", async () => {
        const ids = await s.storeOrders(ctx.store, 3);
        await ctx.store.subscriptions.create({ query: "from Orders", name: "Throws" });

        const bad = childWorker("Throws", "throw", 2);
        const first = await bad.next(m => m.type === "batch", "the failing worker's batch");
        assert.deepEqual(first.ids, ids.slice(0, 2));
        await bad.next(m => m.type === "end", "the failing worker to stop");
        assert.deepEqual(bad.messages.filter(m => m.type === "error").map(m => m.name), ["SubscriberErrorException"]);
        assert.equal(bad.messages.filter(m => m.type === "batch" || m.type === "retry").length, 1, "no second batch, no reconnect");
        assert.equal((await state("Throws")).changeVectorForNextBatchStartingPoint, null, "nothing acknowledged");
        await s.until(async () => (await s.connectionDetails(ctx.database, "Throws")).Results.length === 0,
            "the failed worker's connection to go away");

        const good = s.track(worker({ subscriptionName: "Throws", maxDocsPerBatch: 2 }));
        await s.until(() => good.items.length >= 3, "all three orders on the next worker");
        assert.deepEqual(good.batches[0], ids.slice(0, 2));
        assert.deepEqual(good.items.map(i => i.id), ids);
        assert.deepEqual(good.errors, []);
    });

    it("OpenIfFree on a busy subscription fails with SubscriptionInUseException and the first worker keeps going; TakeOver takes it", async () => {
        const ids = await s.storeOrders(ctx.store, 2);
        await ctx.store.subscriptions.create({ query: "from Orders", name: "Busy" });
        const first = s.track(worker({ subscriptionName: "Busy" }));
        await s.until(() => first.items.length >= 2, "the first worker's orders");
        await acked("Busy", first.items[1].changeVector);

        const second = s.track(worker({ subscriptionName: "Busy", strategy: "OpenIfFree" }));
        await s.until(() => second.ended, "the second (OpenIfFree) worker to give up");
        assert.deepEqual(second.errors.map(e => e.name), ["SubscriptionInUseException"]);
        assert.deepEqual(second.items, []);
        assert.equal(second.retries, 0);

        const next = await s.storeOrders(ctx.store, 1);
        await s.until(() => first.items.length >= 3, "the first worker to get the next order");
        assert.deepEqual(first.items.map(i => i.id), [...ids, ...next]);
        assert.deepEqual(first.errors, []);
        await acked("Busy", first.items[2].changeVector);

        const third = s.track(worker({ subscriptionName: "Busy", strategy: "TakeOver" }));
        await s.until(() => first.ended, "the first worker to be taken over");
        assert.deepEqual(first.errors.map(e => e.name), ["SubscriptionInUseException"]);
        assert.equal(first.retries, 0);
        await s.until(async () => {
            const d = await s.connectionDetails(ctx.database, "Busy");
            return d.Results.length === 1 && d.Results[0].Strategy === "TakeOver";
        }, "the TakeOver worker to hold the subscription");

        const later = await s.storeOrders(ctx.store, 2);
        await s.until(() => third.items.length >= 2, "the TakeOver worker to get the following orders");
        assert.deepEqual(third.items.map(i => i.id), later);
        assert.equal(first.items.length, 3, "the first worker got nothing after the takeover");
        assert.deepEqual(third.errors, []);
    });

    it("CloseWhenNoDocsLeft ends the worker with SubscriptionClosedException once everything is delivered", async () => {
        const ids = await s.storeOrders(ctx.store, 3);
        await ctx.store.subscriptions.create({ query: "from Orders", name: "Drain" });
        const t = s.track(worker({ subscriptionName: "Drain", maxDocsPerBatch: 2, closeWhenNoDocsLeft: true }));
        await s.until(() => t.ended, "the draining worker to end");
        assert.deepEqual(t.items.map(i => i.id), ids);
        assert.deepEqual(t.errors.map(e => e.name), ["SubscriptionClosedException"]);
        assert.equal(t.errors[0].canReconnect, false);
        assert.equal(t.retries, 0);
        assert.equal(s.etagOf((await state("Drain")).changeVectorForNextBatchStartingPoint), s.etagOf(t.items[2].changeVector));
    });

    it("dropConnection closes the worker with SubscriptionClosedException and it does not reconnect", async () => {
        await s.storeOrders(ctx.store, 1);
        await ctx.store.subscriptions.create({ query: "from Orders", name: "Dropped" });
        const t = s.track(worker({ subscriptionName: "Dropped" }));
        await s.until(() => t.items.length >= 1, "the order");
        await acked("Dropped", t.items[0].changeVector);
        await ctx.store.subscriptions.dropConnection("Dropped");
        await s.until(() => t.ended, "the dropped worker to end");
        assert.deepEqual(t.errors.map(e => e.name), ["SubscriptionClosedException"]);
        assert.equal(t.retries, 0);
        await s.until(async () => (await s.connectionDetails(ctx.database, "Dropped")).Results.length === 0,
            "no worker on the dropped subscription");
        assert.equal((await state("Dropped")).disabled, false, "dropping does not disable");
    });

    it("a worker on an unknown subscription fails with SubscriptionDoesNotExistException", async () => {
        const t = s.track(worker({ subscriptionName: "NoSuchSubscription" }));
        await s.until(() => t.ended, "the worker to end");
        assert.deepEqual(t.errors.map(e => e.name), ["SubscriptionDoesNotExistException"]);
        assert.equal(t.retries, 0);
    });

    it("a where clause delivers only the matching documents", async () => {
        const ids = await s.storeOrders(ctx.store, 10, i => i * 10); // totals 0, 10, …, 90
        await ctx.store.subscriptions.create({ query: "from Orders where total > 50", name: "Big" });
        const t = s.track(worker({ subscriptionName: "Big", maxDocsPerBatch: 3, documentType: h.Order }));
        await s.until(() => t.items.length >= 4, "the four big orders");
        assert.deepEqual(t.items.map(i => i.id), ids.slice(6));
        assert.deepEqual(t.items.map(i => i.result.total), [60, 70, 80, 90]);

        // A small order and then a big one: only the big one comes, and it comes after the small one's etag.
        const [small, big] = await s.storeOrders(ctx.store, 2, i => (i === 0 ? 5 : 500));
        await s.until(() => t.items.length >= 5, "the new big order");
        assert.equal(t.items[4].id, big);
        assert.ok(!t.items.some(i => i.id === small));
        await acked("Big", t.items[4].changeVector);
        assert.equal(t.items.length, 5);
        assert.deepEqual(t.errors, []);
    });

    it("includes arrive with the batch: a session opened on the batch loads them without a request", async () => {
        {
            const session = ctx.store.openSession();
            await session.store(new h.Company("Acme"), "companies/1");
            await session.store(new h.Company("Globex"), "companies/2");
            await session.store(new h.Order("companies/1", 10));
            await session.store(new h.Order("companies/1", 20));
            await session.saveChanges();
        }
        const name = await ctx.store.subscriptions.create({ documentType: h.Order, includes: b => b.includeDocuments("companyId") });
        assert.match((await state(name)).query, /include doc\.companyId/);

        const seen = [];
        const t = s.track(worker({ subscriptionName: name, documentType: h.Order }), (batch, done) => {
            (async () => {
                const session = batch.openSession();
                const order = await session.load(batch.items[0].id, h.Order);
                const company = await session.load(order.companyId, h.Company);
                const beforeOther = session.advanced.numberOfRequests;
                const other = await session.load("companies/2", h.Company); // not included: one request
                seen.push({ includes: batch.getNumberOfIncludes(), company: company && company.name, beforeOther,
                    after: session.advanced.numberOfRequests, other: other && other.name });
            })().then(() => done(), done);
        });
        await s.until(() => seen.length >= 1, "the batch with its includes");
        assert.deepEqual(seen[0], { includes: 1, company: "Acme", beforeOther: 0, after: 1, other: "Globex" });
        assert.equal(t.items.length, 2);
        assert.deepEqual(t.errors, []);
    });
});
