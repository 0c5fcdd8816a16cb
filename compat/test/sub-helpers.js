"use strict";
// What the subscription worker files (d2, d3) share: polling with a deadline, watching a worker's events,
// the server's subscription endpoints over plain HTTP, /metrics. Not a test file (run.js runs *.test.js only).

const h = require("./helpers");

// Polls fn (sync or async) until it returns a truthy value, which it returns; fails after ms with `what`.
async function until(fn, what, ms = 15_000, every = 25) {
    const deadline = Date.now() + ms;
    let last;
    for (;;) {
        try {
            const v = await fn();
            if (v) {
                return v;
            }
        } catch (err) {
            last = err;
        }
        if (Date.now() > deadline) {
            throw new Error(`timed out after ${ms} ms waiting for ${what}${last ? ` (last error: ${last.message})` : ""}`);
        }
        await h.sleep(every);
    }
}

// Resolves as promise does, or fails after ms with `what`.
function withDeadline(promise, ms, what) {
    let timer;
    const timeout = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
    });
    return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// The etag part of this node's entry in a change vector ("A:17-<dbid>" → 17).
function etagOf(changeVector) {
    const m = /^[A-Z]+:(\d+)-/.exec(changeVector || "");
    if (!m) {
        throw new Error(`not a change vector: ${changeVector}`);
    }
    return Number(m[1]);
}

// Records a worker's events. onBatch(batch, done, t) replaces the default handler, which calls done at once.
// t.items holds every delivered item (id, changeVector, result), t.batches the ids of each batch.
function track(worker, onBatch) {
    const t = { items: [], batches: [], errors: [], ended: false, retries: 0, worker };
    worker.on("batch", (batch, done) => {
        const items = batch.items.map(i => ({ id: i.id, changeVector: i.changeVector, result: i.result }));
        t.batches.push(items.map(i => i.id));
        t.items.push(...items);
        if (onBatch) {
            onBatch(batch, done, t);
            return;
        }
        done();
    });
    worker.on("error", err => t.errors.push(err));
    worker.on("connectionRetry", () => t.retries++);
    worker.on("end", () => {
        t.ended = true;
    });
    return t;
}

async function getJSON(path) {
    const res = await fetch(h.serverUrl() + path, { signal: AbortSignal.timeout(10_000) });
    const text = await res.text();
    if (!res.ok) {
        throw new Error(`GET ${path} → ${res.status}: ${text.slice(0, 300)}`);
    }
    return JSON.parse(text);
}

async function postJSON(path, body) {
    const res = await fetch(h.serverUrl() + path, {
        method: "POST",
        body: body === undefined ? undefined : JSON.stringify(body),
        headers: { "Content-Type": "application/json" },
        signal: AbortSignal.timeout(10_000),
    });
    const text = await res.text();
    if (!res.ok) {
        throw new Error(`POST ${path} → ${res.status}: ${text.slice(0, 300)}`);
    }
    return text ? JSON.parse(text) : null;
}

const enc = encodeURIComponent;

function monitor(database) {
    return getJSON(`/databases/${enc(database)}/subscriptions/monitor`);
}

function connectionDetails(database, name) {
    return getJSON(`/databases/${enc(database)}/subscriptions/connection-details?name=${enc(name)}`);
}

async function metricsText() {
    const res = await fetch(h.serverUrl() + "/metrics", { signal: AbortSignal.timeout(10_000) });
    if (!res.ok) {
        throw new Error(`GET /metrics → ${res.status}`);
    }
    return res.text();
}

// Samples of one metric family from the Prometheus text format: [{ labels: {…}, value }].
function metricSamples(text, family) {
    const out = [];
    const re = new RegExp(`^${family}\\{([^}]*)\\}\\s+(\\S+)$`, "gm");
    for (const m of text.matchAll(re)) {
        const labels = {};
        for (const l of m[1].matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
            labels[l[1]] = l[2];
        }
        out.push({ labels, value: Number(m[2]) });
    }
    return out;
}

// Stores n Orders in one saveChanges and returns their ids in the order they were stored.
async function storeOrders(store, n, total = i => i) {
    const session = store.openSession();
    const orders = [];
    for (let i = 0; i < n; i++) {
        const o = new h.Order("companies/1", total(i));
        await session.store(o);
        orders.push(o);
    }
    await session.saveChanges();
    return orders.map(o => o.id);
}

module.exports = { until, withDeadline, etagOf, track, getJSON, postJSON, monitor, connectionDetails, metricsText, metricSamples, storeOrders };
