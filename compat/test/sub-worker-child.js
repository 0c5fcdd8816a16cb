"use strict";
// A subscription worker in its own process, for d2 (not a test file). It connects to $SUB_NAME of $SUB_DB
// and reports to the parent over IPC: {type:"batch", ids}, {type:"error", name}, {type:"end"}.
//
// SUB_MODE=hang:  never calls the batch callback, so the batch is never acknowledged; the parent kills
//                 the process with SIGKILL while it "processes".
// SUB_MODE=throw: the batch handler throws.
//
// Why a process of its own for "throw": when the handler fails, ravendb 7.2.2 closes its socket while its
// read of the next batch is still pending and nobody awaits it any more; when the server then closes its side,
// that read rejects ("Subscription stream has ended unexpectedly") with no handler. Node's test runner fails
// any test that sees an unhandled rejection, so the worker runs here, where it is reported as
// {type:"unhandled", name} for the parent to look at instead.
const h = require("./helpers");

process.on("unhandledRejection", err => {
    process.send({ type: "unhandled", name: err && err.name, message: err && err.message });
});

const mode = process.env.SUB_MODE || "hang";
const store = h.newStore(process.env.SUB_DB);
const worker = store.subscriptions.getSubscriptionWorker({
    subscriptionName: process.env.SUB_NAME,
    maxDocsPerBatch: Number(process.env.SUB_BATCH || 4096),
});
worker.on("batch", batch => {
    process.send({ type: "batch", ids: batch.items.map(i => i.id) });
    if (mode === "throw") {
        throw new Error("the handler failed");
    }
    // hang: no callback.
});
worker.on("error", err => {
    process.send({ type: "error", name: err.name, message: err.message });
});
worker.on("connectionRetry", () => process.send({ type: "retry" }));
worker.on("end", () => process.send({ type: "end" }));
