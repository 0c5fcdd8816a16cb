"use strict";
// Issue 6's runaway scenario: an app opens 200 subscriptions from the beginning of time within a minute and
// keeps attaching short-lived workers to them (a subscription per page view). The monitor flags them with the
// rules burst, duplicate and from-beginning and a reason naming the count, /metrics exposes the flags, and
// POST …/subscriptions/disable-flagged stops the I/O: every worker ends with SubscriptionClosedException and
// does not reconnect, the subscriptions are Disabled, and the documents-read counter stops moving although
// the app keeps trying.
//
// The app runs in a child process (runaway-app.js); see there why.
const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { fork } = require("node:child_process");
const path = require("node:path");
const h = require("./helpers");
const s = require("./sub-helpers");

const SUBS = 200;
const DOCS = 5000;

describe("runaway subscriptions", () => {
    let ctx;
    let app;
    before(async () => {
        ctx = await h.freshDatabase("runaway");
    });
    after(async () => {
        if (app && app.exitCode === null && app.signalCode === null) {
            app.kill("SIGKILL");
        }
        if (ctx) {
            await ctx.teardown();
        }
    });

    // Documents read by this database's subscriptions, from /metrics.
    const docsRead = async () => s.metricSamples(await s.metricsText(), "rookery_subscription_docs_read_total")
        .filter(x => x.labels.database === ctx.database)
        .reduce((sum, x) => sum + x.value, 0);

    it("200 subscriptions from the beginning of time are flagged, and disable-flagged stops their I/O", async t => {
        for (let i = 0; i < DOCS; i += 500) {
            await s.storeOrders(ctx.store, 500, j => i + j);
        }

        let latest = null;
        let created = null;
        let fatal = null;
        app = fork(path.join(__dirname, "runaway-app.js"), [], {
            env: { ...process.env, SUB_DB: ctx.database, RUNAWAY_SUBS: String(SUBS) },
            stdio: ["ignore", "inherit", "inherit", "ipc"],
        });
        app.on("message", m => {
            if (m.type === "created") {
                created = m;
            } else if (m.type === "stats") {
                latest = m.stats;
            } else if (m.type === "fatal") {
                fatal = m.message;
            }
        });
        const appAlive = () => {
            if (fatal) {
                throw new Error(`the app failed: ${fatal}`);
            }
            return true;
        };
        await s.until(() => appAlive() && created, "the app to create its subscriptions", 30_000);
        assert.equal(created.names.length, SUBS);
        assert.equal(new Set(created.names).size, SUBS);

        // The app's workers read: the counter moves while they run.
        await s.until(() => appAlive() && latest && latest.batches >= 50, "the app's page views to process batches", 30_000);
        const r0 = await docsRead();
        await s.until(async () => (await docsRead()) > r0, "the documents-read counter to move", 15_000, 200);

        // The monitor flags every one of them with the three rules, and says how many there are.
        const mon = await s.monitor(ctx.database);
        const ours = mon.Subscriptions.filter(x => created.names.includes(x.Name));
        assert.equal(ours.length, SUBS);
        for (const rule of ["burst", "duplicate", "from-beginning"]) {
            const findings = mon.Findings.filter(f => f.Rule === rule);
            assert.deepEqual(findings.map(f => f.Subscription).sort(), [...created.names].sort(), `rule ${rule}`);
            for (const f of findings) {
                assert.match(f.Reason, /\b200\b/, `the ${rule} reason names the count: ${f.Reason}`);
            }
        }
        for (const st of ours) {
            const rules = new Set(st.Flags.map(f => f.Rule));
            assert.ok(rules.has("burst") && rules.has("duplicate") && rules.has("from-beginning"), `${st.Name}: ${[...rules]}`);
        }
        assert.ok(ours.reduce((sum, x) => sum + x.DocsRead, 0) > 0, "the monitor counts their reads");

        // /metrics carries the flags.
        const flagged = s.metricSamples(await s.metricsText(), "rookery_subscription_runaway")
            .filter(x => x.labels.database === ctx.database && x.labels.rule === "burst" && x.value === 1);
        assert.deepEqual(flagged.map(x => x.labels.subscription).sort(), [...created.names].sort());

        // Bulk-disable, between two marks for the app.
        app.send({ type: "mark", phase: "between" });
        await s.until(() => latest.phase === "between", "the app to take the first mark");
        const res = await s.postJSON(`/databases/${encodeURIComponent(ctx.database)}/subscriptions/disable-flagged`);
        assert.deepEqual([...res.Disabled].sort(), [...created.names].sort());
        app.send({ type: "mark", phase: "after" });
        await s.until(() => latest.phase === "after", "the app to take the second mark");
        assert.ok(latest.groups.running.started > 0, "page views were running when the subscriptions were disabled");

        // Every worker running then ends, closed by the server (or, if it had just got its last batch, by the
        // page itself); none reconnects; every later attempt is refused before it reads anything.
        await s.until(() => appAlive() && ["running", "between"].every(g => latest.groups[g].ended === latest.groups[g].started),
            "the workers of the disable's time to end", 20_000);
        const { running, between } = latest.groups;
        for (const [group, g] of Object.entries({ running, between })) {
            assert.deepEqual(Object.keys(g.outcomes).filter(k => k !== "SubscriptionClosedException" && k !== "disposed"), [],
                `${group}: ${JSON.stringify(g)}`);
        }
        await s.until(() => appAlive() && latest.long.ended === latest.long.started, "the background workers to end", 20_000);
        assert.equal(latest.long.started, 20);
        assert.deepEqual(latest.long.outcomes, { SubscriptionClosedException: 20 }, "every background worker was closed by the server");
        await s.until(() => latest.groups.after.ended >= 20, "the app to try some more page views", 20_000);
        const { after } = latest.groups;
        assert.deepEqual(Object.keys(after.outcomes), ["SubscriptionClosedException"], `after: ${JSON.stringify(after)}`);
        assert.equal(after.batches, 0, "no batch after the disable");
        assert.equal(latest.retries, 0, "no worker reconnected");

        const all = await ctx.store.subscriptions.getSubscriptions(0, SUBS + 50);
        assert.equal(all.length, SUBS);
        assert.ok(all.every(x => x.disabled), "every subscription is disabled");
        await s.until(async () => (await s.monitor(ctx.database)).Subscriptions.every(x => (x.Workers || []).length === 0),
            "no worker connected on the server", 15_000, 250);

        // The documents-read counter stops: three equal samples a second apart, while the app keeps trying
        // (page views were attempted between the first and the last of them).
        const samples = [];
        await s.until(async () => {
            samples.push({ read: await docsRead(), attempts: latest.groups.after.started });
            const [a, b, c] = samples.slice(-3);
            return c && a.read === b.read && b.read === c.read && c.attempts > a.attempts;
        }, "the documents-read counter to stop", 20_000, 1000);
        const stopped = samples.at(-1).read;
        assert.ok(stopped > r0);

        t.diagnostic(`created in ${created.ms} ms; documents read before the disable ≥ ${r0}, in all ${stopped}; ` +
            `app: ${JSON.stringify({ docs: latest.docs, batches: latest.batches, long: latest.long, groups: latest.groups, unhandled: latest.unhandled })}`);
        app.send({ type: "stop" });
        const exit = await s.withDeadline(new Promise(resolve => app.once("exit", code => resolve(code))), 20_000, "the app to exit");
        assert.equal(exit, 0);
    });
});
