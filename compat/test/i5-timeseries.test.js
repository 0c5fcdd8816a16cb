"use strict";
// I5: time series through the npm client: session.timeSeriesFor(...).append/get/delete, tags,
// several values, ranges and paging, TimeSeriesBatchOperation, GetTimeSeriesOperation,
// GetMultipleTimeSeriesOperation, GetTimeSeriesStatisticsOperation, and the refusal of an
// incremental series; then on a 3-node cluster of its own: appended on one node, read back the
// same on the others.
const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const {
    DocumentStore,
    CreateDatabaseOperation,
    TimeSeriesBatchOperation,
    TimeSeriesOperation,
    GetTimeSeriesOperation,
    GetMultipleTimeSeriesOperation,
    GetTimeSeriesStatisticsOperation,
} = require("ravendb");
const path = require("node:path");
// The append/delete parts of a TimeSeriesOperation are not exported from the package's index.
const { AppendOperation, DeleteOperation } =
    require(path.join(path.dirname(require.resolve("ravendb")), "Documents/Operations/TimeSeries/TimeSeriesOperation.js"));
const h = require("./helpers");
const { eventually, prepare, removeTmp, Node, startCluster, waitDatabaseOn, killAllSync, dumpLogs, freePort } =
    require("./cluster-helpers");

const base = Date.UTC(2026, 11, 7, 0, 0, 0); // ms
const at = (seconds) => new Date(base + seconds * 1000);

function plain(entries) {
    return (entries || []).map(e => ({ t: e.timestamp.toISOString(), tag: e.tag || null, values: e.values }));
}

describe("time series on one node", () => {
    let ctx;
    before(async () => {
        ctx = await h.freshDatabase("ts");
        const s = ctx.store.openSession();
        await s.store(new h.User("John", 40), "users/1");
        await s.store(new h.User("Jane", 30), "users/2");
        await s.saveChanges();
    });
    after(async () => ctx && ctx.teardown());

    it("appends through the session (tags, several values) and reads them back in order", async () => {
        const s = ctx.store.openSession();
        const ts = s.timeSeriesFor("users/1", "HeartRate");
        for (let i = 0; i < 100; i++) {
            ts.append(at(i), [60 + i, i / 2], i % 2 ? "watches/fitbit" : undefined);
        }
        ts.append(at(200), 99.5);
        await s.saveChanges();

        const r = ctx.store.openSession();
        const all = await r.timeSeriesFor("users/1", "HeartRate").get();
        assert.equal(all.length, 101);
        assert.equal(all[0].timestamp.getTime(), at(0).getTime());
        assert.deepEqual(all[0].values, [60, 0]);
        assert.equal(all[0].tag == null, true, "no tag reads back as null/undefined");
        assert.equal(all[1].tag, "watches/fitbit");
        assert.deepEqual(all[100].values, [99.5]);
        assert.equal(all[0].isRollup, false);

        // The document now lists the series.
        const user = await r.load("users/1");
        const md = r.advanced.getMetadataFor(user);
        assert.deepEqual(md["@timeseries"], ["HeartRate"]);
        assert.match(md["@flags"], /HasTimeSeries/);
    });

    it("reads a range and pages through it", async () => {
        const s = ctx.store.openSession();
        const range = await s.timeSeriesFor("users/1", "heartrate").get(at(10), at(19));
        assert.deepEqual(range.map(e => e.timestamp.getTime()), Array.from({ length: 10 }, (_, i) => at(10 + i).getTime()));
        const s2 = ctx.store.openSession();
        const page = await s2.timeSeriesFor("users/1", "HeartRate").get(95, 10); // get(start, pageSize)
        assert.deepEqual(page.map(e => e.values[0]), [155, 156, 157, 158, 159, 99.5]);
        const op = await ctx.store.operations.send(new GetTimeSeriesOperation("users/1", "HeartRate", at(0), at(49), 10, 5));
        assert.equal(op.totalResults, 50, JSON.stringify(op));
        assert.deepEqual(op.entries.map(e => e.values[0]), [70, 71, 72, 73, 74]);
        assert.equal(op.from.getTime(), at(0).getTime());
    });

    it("overwrites a timestamp and deletes a range and a single entry through the session", async () => {
        const s = ctx.store.openSession();
        const ts = s.timeSeriesFor("users/1", "HeartRate");
        ts.append(at(0), [1, 2, 3], "fixed");
        ts.delete(at(20), at(89));
        ts.deleteAt(at(200));
        await s.saveChanges();
        const r = ctx.store.openSession();
        const all = await r.timeSeriesFor("users/1", "HeartRate").get();
        assert.equal(all.length, 30);
        assert.deepEqual(plain(all.slice(0, 1)), [{ t: at(0).toISOString(), tag: "fixed", values: [1, 2, 3] }]);
        assert.equal(all[all.length - 1].timestamp.getTime(), at(99).getTime());
        assert.ok(!all.some(e => e.timestamp >= at(20) && e.timestamp <= at(89)));
    });

    it("TimeSeriesBatchOperation appends and deletes; the stats and multiple-range operations read them", async () => {
        const op = new TimeSeriesOperation("Temperature");
        for (let i = 0; i < 10; i++) {
            op.append(new AppendOperation(at(i * 60), [20 + i], "sensor/1"));
        }
        await ctx.store.operations.send(new TimeSeriesBatchOperation("users/2", op));
        const del = new TimeSeriesOperation("Temperature");
        del.delete(new DeleteOperation(at(0), at(60)));
        await ctx.store.operations.send(new TimeSeriesBatchOperation("users/2", del));

        const got = await ctx.store.operations.send(new GetTimeSeriesOperation("users/2", "Temperature"));
        assert.equal(got.totalResults, 8);
        assert.deepEqual(got.entries.map(e => e.values[0]), [22, 23, 24, 25, 26, 27, 28, 29]);
        assert.equal(got.entries[0].tag, "sensor/1");

        const multi = await ctx.store.operations.send(new GetMultipleTimeSeriesOperation("users/2", [
            { name: "Temperature", from: at(120), to: at(180) },
            { name: "Temperature", from: at(480), to: null },
        ]));
        assert.equal(multi.id, "users/2");
        const ranges = multi.values.get("temperature");
        assert.equal(ranges.length, 2);
        assert.deepEqual(ranges[0].entries.map(e => e.values[0]), [22, 23]);
        assert.deepEqual(ranges[1].entries.map(e => e.values[0]), [28, 29]);

        const stats = await ctx.store.operations.send(new GetTimeSeriesStatisticsOperation("users/2"));
        assert.equal(stats.documentId, "users/2");
        assert.equal(stats.timeSeries.length, 1);
        assert.equal(stats.timeSeries[0].name, "Temperature");
        assert.equal(stats.timeSeries[0].numberOfEntries, 8);
        assert.equal(stats.timeSeries[0].startDate.getTime(), at(120).getTime());
        assert.equal(stats.timeSeries[0].endDate.getTime(), at(540).getTime());
    });

    it("a missing series or document reads as null; deleting every entry removes the name", async () => {
        const s = ctx.store.openSession();
        assert.ok((await s.timeSeriesFor("users/2", "Nope").get()) == null);
        assert.ok((await ctx.store.operations.send(new GetTimeSeriesOperation("users/404", "HeartRate"))) == null);
        const d = ctx.store.openSession();
        d.timeSeriesFor("users/2", "Temperature").delete();
        await d.saveChanges();
        const r = ctx.store.openSession();
        const user = await r.load("users/2");
        assert.equal(r.advanced.getMetadataFor(user)["@timeseries"], undefined);
        assert.ok((await r.timeSeriesFor("users/2", "Temperature").get()) == null);
    });

    it("appending to a missing document fails the whole batch; an incremental series is a 400", async () => {
        const s = ctx.store.openSession();
        await s.store(new h.User("Kept?", 1), "users/3");
        s.timeSeriesFor("users/404", "HeartRate").append(at(1), 1);
        await assert.rejects(s.saveChanges(), err => /missing document: users\/404/.test(err.message));
        const r = ctx.store.openSession();
        assert.equal(await r.load("users/3"), null, "nothing of the failed batch was stored");

        const op = new TimeSeriesOperation("INC:Likes");
        op.append(new AppendOperation(at(1), [1]));
        await assert.rejects(ctx.store.operations.send(new TimeSeriesBatchOperation("users/1", op)),
            err => /Incremental time series/.test(err.message));
    });

    it("deleting the document deletes its series", async () => {
        const s = ctx.store.openSession();
        s.delete("users/1");
        await s.saveChanges();
        const s2 = ctx.store.openSession();
        await s2.store(new h.User("John again", 41), "users/1");
        await s2.saveChanges();
        assert.ok((await ctx.store.operations.send(new GetTimeSeriesOperation("users/1", "HeartRate"))) == null);
    });
});

describe("time series on a 3-node cluster", () => {
    const DB = `compat_ts_${Date.now().toString(36)}`;
    let tmp;
    let nodes = [];
    const stores = [];
    let failed = false;
    const step = fn => async () => {
        try {
            await fn();
        } catch (err) {
            failed = true;
            throw err;
        }
    };
    process.once("exit", () => killAllSync(nodes));
    const pinned = node => {
        const store = new DocumentStore(node.url, DB);
        store.conventions.disableTopologyUpdates = true;
        store.initialize();
        stores.push(store);
        return store;
    };

    before(async () => {
        let bin;
        ({ tmp, bin } = prepare("i5"));
        const a = new Node(tmp, "A", await freePort(), await freePort());
        nodes = [a,
            new Node(tmp, "B", await freePort(), await freePort(), { join: a.url }),
            new Node(tmp, "C", await freePort(), await freePort(), { join: a.url })];
        await startCluster(nodes, bin);
        const store = pinned(a);
        await store.maintenance.server.send(new CreateDatabaseOperation({ databaseName: DB }, 3));
        await waitDatabaseOn(nodes, DB);
    }, { timeout: 180_000 });

    after(async () => {
        for (const s of stores) {
            s.dispose();
        }
        for (const n of nodes) {
            await n.kill9();
        }
        if (failed) {
            dumpLogs("i5", nodes);
        }
        removeTmp(tmp, "i5");
    });

    it("appended on A (session and operation), read back the same on B and C", step(async () => {
        const [a, b, c] = nodes.map(pinned);
        const s = a.openSession();
        await s.store(new h.User("Clustered", 1), "users/c1");
        const ts = s.timeSeriesFor("users/c1", "Power");
        for (let i = 0; i < 500; i++) {
            ts.append(at(i), [i, i * 2], i % 10 === 0 ? "tenth" : undefined);
        }
        await s.saveChanges();
        const op = new TimeSeriesOperation("Power");
        op.delete(new DeleteOperation(at(100), at(199)));
        await a.operations.send(new TimeSeriesBatchOperation("users/c1", op));

        const want = plain((await a.operations.send(new GetTimeSeriesOperation("users/c1", "Power"))).entries);
        assert.equal(want.length, 400);
        for (const [tag, store] of [["B", b], ["C", c]]) {
            await eventually(`series on ${tag}`, 20_000, async () => {
                const got = await store.operations.send(new GetTimeSeriesOperation("users/c1", "Power"));
                const p = got ? plain(got.entries) : [];
                return [JSON.stringify(p) === JSON.stringify(want), `${tag} has ${p.length} entries`];
            });
            const r = store.openSession();
            const user = await r.load("users/c1");
            assert.deepEqual(r.advanced.getMetadataFor(user)["@timeseries"], ["Power"]);
            const page = await store.operations.send(new GetTimeSeriesOperation("users/c1", "Power", at(95), at(210), 3, 4));
            assert.deepEqual(page.entries.map(e => e.values[0]), [98, 99, 200, 201]);
            assert.equal(page.totalResults, 16);
        }
    }));

    it("appends on all three nodes to one series converge", step(async () => {
        const stores3 = nodes.map(pinned);
        await Promise.all(stores3.map(async (st, k) => {
            const s = st.openSession();
            const ts = s.timeSeriesFor("users/c1", "Power");
            for (let i = 0; i < 50; i++) {
                ts.append(at(1000 + i * 3 + k), [k]);
            }
            await s.saveChanges();
        }));
        let want = null;
        await eventually("all nodes equal", 20_000, async () => {
            const all = [];
            for (const st of stores3) {
                const got = await st.operations.send(new GetTimeSeriesOperation("users/c1", "Power", at(1000), at(2000)));
                all.push(JSON.stringify(got ? plain(got.entries) : []));
            }
            want = all[0];
            return [all.every(x => x === all[0]) && JSON.parse(all[0]).length === 150, `lengths ${all.map(x => JSON.parse(x).length)}`];
        });
        assert.equal(JSON.parse(want).length, 150);
    }));
});
