"use strict";
// The antipattern app of d3 (not a test file), in its own process, talking to the parent over IPC.
//
// It opens $RUNAWAY_SUBS subscriptions "from Orders" from the beginning of time, as fast as it can. It keeps a
// worker on each of the first $RUNAWAY_LONG of them for good (a "background job" per subscription, which
// takes LONG_DELAY_MS over each batch of LONG_BATCH documents) and serves "page views" on the others:
// $RUNAWAY_LOOPS loops, each of which opens a worker on its next subscription, processes
// $RUNAWAY_PAGE_BATCHES batches of $RUNAWAY_BATCH documents, disposes the worker and moves on. A page view
// whose worker fails waits a little and the loop carries on with the next one, as a careless app would.
//
// To the parent: {type:"created", names, ms} once, then {type:"stats", …} every 200 ms.
// From the parent: {type:"mark", phase:"between"} just before it disables the subscriptions and
// {type:"mark", phase:"after"} once they are disabled: the app sorts its page views by when they ran
// ("running" at the first mark, opened "between" the marks, opened "after" the second) and counts how each
// group's page views end and how many batches they got. {type:"stop"} disposes everything and exits.
//
// Unhandled rejections are counted, not fatal: ravendb 7.2.2 leaves a pending read unawaited when a worker is
// disposed or closed while its handler runs (see sub-worker-child.js).
const h = require("./helpers");

const SUBS = Number(process.env.RUNAWAY_SUBS || 200);
const LOOPS = Number(process.env.RUNAWAY_LOOPS || 20);
const BATCH = Number(process.env.RUNAWAY_BATCH || 50);
const PAGE_BATCHES = Number(process.env.RUNAWAY_PAGE_BATCHES || 3);
const LONG = Number(process.env.RUNAWAY_LONG || 20);
const LONG_BATCH = 10;
const LONG_DELAY_MS = 50;
const PAGE_IDLE_MS = 5000; // a page view with nothing to show gives up

const store = h.newStore(process.env.SUB_DB);
const bump = (o, k) => {
    o[k] = (o[k] || 0) + 1;
};

const stats = {
    docs: 0, batches: 0, started: 0, ended: 0, open: 0, retries: 0,
    outcomes: {},  // how page views ended: "disposed" or an error name
    unhandled: {}, // unhandled rejections by name
    phase: "before",
    groups: {
        running: { started: 0, ended: 0, batches: 0, outcomes: {} },
        between: { started: 0, ended: 0, batches: 0, outcomes: {} },
        after: { started: 0, ended: 0, batches: 0, outcomes: {} },
    },
    long: { started: 0, ended: 0, batches: 0, outcomes: {} }, // the background workers
};

process.on("unhandledRejection", err => bump(stats.unhandled, (err && err.name) || String(err)));

let stopping = false;
const open = new Set();

function pageView(name) {
    return new Promise(resolve => {
        const worker = store.subscriptions.getSubscriptionWorker({ subscriptionName: name, maxDocsPerBatch: BATCH });
        const page = { worker, batches: 0, group: stats.groups[stats.phase], error: null, disposed: false };
        open.add(page);
        stats.started++;
        stats.open++;
        if (page.group) {
            page.group.started++;
        }
        let idle;
        const leave = () => {
            if (!page.disposed) {
                page.disposed = true;
                worker.dispose();
            }
        };
        const armIdle = () => {
            clearTimeout(idle);
            idle = setTimeout(leave, PAGE_IDLE_MS);
        };
        armIdle();
        worker.on("batch", (batch, done) => {
            stats.docs += batch.items.length;
            stats.batches++;
            page.batches++;
            if (page.group) {
                page.group.batches++;
            }
            armIdle();
            done();
            if (page.batches >= PAGE_BATCHES || stopping) {
                setImmediate(leave); // after the acknowledgement is written
            }
        });
        worker.on("error", err => {
            page.error = page.error || err.name;
        });
        worker.on("connectionRetry", () => stats.retries++);
        worker.on("end", () => {
            clearTimeout(idle);
            open.delete(page);
            const outcome = page.error || (page.disposed ? "disposed" : "ended");
            stats.ended++;
            stats.open--;
            bump(stats.outcomes, outcome);
            if (page.group) {
                page.group.ended++;
                bump(page.group.outcomes, outcome);
            }
            resolve(page);
        });
    });
}

// A background worker: never leaves; ends only when the server ends it (or on stop).
function background(name) {
    return new Promise(resolve => {
        const worker = store.subscriptions.getSubscriptionWorker({ subscriptionName: name, maxDocsPerBatch: LONG_BATCH });
        const job = { worker, error: null, disposed: false };
        open.add(job);
        stats.long.started++;
        worker.on("batch", (batch, done) => {
            stats.docs += batch.items.length;
            stats.batches++;
            stats.long.batches++;
            setTimeout(done, LONG_DELAY_MS);
        });
        worker.on("error", err => {
            job.error = job.error || err.name;
        });
        worker.on("connectionRetry", () => stats.retries++);
        worker.on("end", () => {
            open.delete(job);
            stats.long.ended++;
            bump(stats.long.outcomes, job.error || (job.disposed ? "disposed" : "ended"));
            resolve();
        });
    });
}

async function loop(i, names) {
    for (let k = 0; !stopping; k++) {
        const page = await pageView(names[(i + k * LOOPS) % names.length]);
        if (page.error && !stopping) {
            await h.sleep(250);
        }
    }
}

async function main() {
    const t0 = Date.now();
    const names = [];
    for (let i = 0; i < SUBS; i += 20) {
        const n = Math.min(20, SUBS - i);
        names.push(...await Promise.all(Array.from({ length: n }, () => store.subscriptions.create({ query: "from Orders" }))));
    }
    process.send({ type: "created", names, ms: Date.now() - t0 });

    const report = setInterval(() => process.send({ type: "stats", stats }), 200);
    process.on("message", m => {
        if (m.type === "mark") {
            if (stats.phase === "before") {
                for (const page of open) {
                    if (!("group" in page)) {
                        continue; // a background worker
                    }
                    page.group = stats.groups.running;
                    page.group.started++;
                }
            }
            stats.phase = m.phase;
            process.send({ type: "stats", stats });
        } else if (m.type === "stop") {
            stopping = true;
            for (const page of open) {
                page.disposed = true;
                page.worker.dispose();
            }
        }
    });
    const pages = names.slice(LONG);
    await Promise.all([
        ...names.slice(0, LONG).map(background),
        ...Array.from({ length: LOOPS }, (_, i) => loop(i, pages)),
    ]);
    clearInterval(report);
    store.dispose();
    process.send({ type: "stats", stats }, () => process.exit(0));
}

main().catch(err => {
    process.send({ type: "fatal", message: err.stack || String(err) });
    process.exit(1);
});
