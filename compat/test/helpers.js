"use strict";
// Shared setup for the compatibility tests. Every test file gets its own database.

const crypto = require("node:crypto");
const {
    DocumentStore,
    CreateDatabaseOperation,
    DeleteDatabasesOperation,
} = require("ravendb");

function serverUrl() {
    const url = process.env.ROOKERY_URL;
    if (!url) {
        throw new Error("ROOKERY_URL is not set: run the suite through compat/run.js (npm test)");
    }
    return url.replace(/\/+$/, "");
}

// Letters, digits, '_', '-', '.' only (RavenDB database-name rules).
function uniqueDbName(tag) {
    return `compat_${tag}_${Date.now().toString(36)}_${crypto.randomBytes(3).toString("hex")}`;
}

function newStore(database) {
    const store = new DocumentStore(serverUrl(), database);
    store.initialize();
    return store;
}

async function createDatabase(store, name) {
    return store.maintenance.server.send(new CreateDatabaseOperation({ databaseName: name }));
}

async function deleteDatabase(store, name) {
    return store.maintenance.server.send(
        new DeleteDatabasesOperation({ databaseNames: [name], hardDelete: true }));
}

// Creates a fresh database and a store bound to it.
// Returns { store, database, teardown }; teardown drops the database and disposes the store.
async function freshDatabase(tag) {
    const database = uniqueDbName(tag);
    const ctx = { database, store: newStore(database) };
    await createDatabase(ctx.store, database);
    ctx.teardown = async () => {
        try {
            await deleteDatabase(ctx.store, database);
        } finally {
            ctx.store.dispose();
        }
    };
    return ctx;
}

// assert.rejects predicate: the error's name must be `name`; the message is kept for diagnostics.
function errorNamed(name) {
    return err => {
        if (err && err.name === name) {
            return true;
        }
        throw new Error(`expected ${name}, got ${err && err.name}: ${err && err.message}`);
    };
}

const sleep = ms => new Promise(r => setTimeout(r, ms));

// Records every HTTP response of a request executor: { url, status }.
function recordResponses(executor) {
    const seen = [];
    const onSucceed = e => seen.push({ url: e.url, status: e.response.status });
    const onFailed = e => seen.push({ url: e.url, status: e.response ? e.response.status : 0, failed: true });
    executor.on("succeedRequest", onSucceed);
    executor.on("failedRequest", onFailed);
    return {
        seen,
        stop() {
            executor.off("succeedRequest", onSucceed);
            executor.off("failedRequest", onFailed);
        },
    };
}

const GUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

class User {
    constructor(name, age) {
        this.name = name;
        this.age = age;
    }
}

class Company {
    constructor(name) {
        this.name = name;
    }
}

class Order {
    constructor(companyId, total) {
        this.companyId = companyId;
        this.total = total;
    }
}

class Item {
    constructor(n) {
        this.n = n;
    }
}

module.exports = {
    serverUrl,
    uniqueDbName,
    newStore,
    createDatabase,
    deleteDatabase,
    freshDatabase,
    errorNamed,
    sleep,
    recordResponses,
    GUID_RE,
    User,
    Company,
    Order,
    Item,
};
