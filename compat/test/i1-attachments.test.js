"use strict";
// I1: attachments through the npm client, unchanged.
//
//   one node (ROOKERY_URL): session.advanced.attachments.store (Buffer and stream, in the
//   session's multipart SaveChanges), get (streamed content + details), exists, getNames after a
//   load, delete; PutAttachmentOperation / GetAttachmentOperation / DeleteAttachmentOperation;
//   a document PUT keeps its attachments; the download's safety headers.
//   3 nodes (its own cluster, like c1/c2): stored on A, the same bytes read back on B and C.
const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const crypto = require("node:crypto");
const { Readable } = require("node:stream");
const {
    DocumentStore, CreateDatabaseOperation,
    PutAttachmentOperation, GetAttachmentOperation, DeleteAttachmentOperation,
} = require("ravendb");
const h = require("./helpers");
const { eventually, prepare, removeTmp, Node, startCluster, waitDatabaseOn, killAllSync, dumpLogs, freePort } =
    require("./cluster-helpers");

class User {
    constructor(name) {
        this.name = name;
    }
}

// Content generated at test time (never committed).
const bytesOf = (seed, n) => {
    const out = Buffer.alloc(n);
    let x = seed >>> 0 || 1;
    for (let i = 0; i < n; i++) {
        x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
        out[i] = x & 0xff;
    }
    return out;
};
const sha = b => crypto.createHash("sha256").update(b).digest("base64");

async function readAll(stream) {
    const parts = [];
    for await (const p of stream) {
        parts.push(Buffer.from(p));
    }
    return Buffer.concat(parts);
}

// The content and details of an attachment, or null.
async function fetchAttachment(store, id, name) {
    const session = store.openSession();
    const result = await session.advanced.attachments.get(id, name);
    if (!result) {
        return null;
    }
    try {
        return { data: await readAll(result.data), details: result.details };
    } finally {
        result.dispose();
    }
}

describe("attachments on one node", () => {
    let ctx;
    before(async () => {
        ctx = await h.freshDatabase("att");
    });
    after(async () => {
        await ctx.teardown();
    });

    it("store (Buffer and stream) in SaveChanges, get, exists, getNames, delete", async () => {
        const photo = bytesOf(1, 300 * 1024 + 7);
        const notes = bytesOf(2, 1000);
        const s = ctx.store.openSession();
        const user = new User("ann");
        await s.store(user, "users/1");
        s.advanced.attachments.store(user, "photo.jpg", photo, "image/jpeg");
        s.advanced.attachments.store("users/1", "notes.txt", Readable.from([notes.subarray(0, 10), notes.subarray(10)]), "text/plain");
        await s.saveChanges();

        const got = await fetchAttachment(ctx.store, "users/1", "photo.jpg");
        assert.ok(got, "photo.jpg is there");
        assert.ok(got.data.equals(photo), "the same bytes come back");
        assert.equal(got.details.name, "photo.jpg");
        assert.equal(got.details.documentId, "users/1");
        assert.equal(got.details.contentType, "image/jpeg");
        assert.equal(got.details.size, photo.length);
        assert.equal(got.details.hash, sha(photo));
        assert.ok(got.details.changeVector, "a change vector");
        const txt = await fetchAttachment(ctx.store, "users/1", "notes.txt");
        assert.ok(txt.data.equals(notes));

        const s2 = ctx.store.openSession();
        assert.equal(await s2.advanced.attachments.exists("users/1", "photo.jpg"), true);
        assert.equal(await s2.advanced.attachments.exists("users/1", "nope"), false);
        const loaded = await s2.load("users/1", User);
        const names = s2.advanced.attachments.getNames(loaded);
        const byName = Object.fromEntries(names.map(n => [n.name, n]));
        assert.deepEqual(Object.keys(byName).sort(), ["notes.txt", "photo.jpg"]);
        assert.equal(byName["photo.jpg"].hash, sha(photo));
        assert.equal(byName["photo.jpg"].contentType, "image/jpeg");
        assert.equal(byName["photo.jpg"].size, photo.length);
        assert.match(s2.advanced.getMetadataFor(loaded)["@flags"], /HasAttachments/);

        // Changing the document keeps its attachments.
        loaded.name = "ann2";
        await s2.saveChanges();
        assert.ok((await fetchAttachment(ctx.store, "users/1", "photo.jpg")).data.equals(photo));

        const s3 = ctx.store.openSession();
        s3.advanced.attachments.delete("users/1", "photo.jpg");
        await s3.saveChanges();
        const s4 = ctx.store.openSession();
        assert.equal(await s4.advanced.attachments.exists("users/1", "photo.jpg"), false);
        assert.equal(await fetchAttachment(ctx.store, "users/1", "photo.jpg"), null);
        const again = await s4.load("users/1", User);
        assert.deepEqual(s4.advanced.attachments.getNames(again).map(n => n.name), ["notes.txt"]);
    });

    it("PutAttachmentOperation, GetAttachmentOperation, DeleteAttachmentOperation", async () => {
        const s = ctx.store.openSession();
        await s.store(new User("bob"), "users/2");
        await s.saveChanges();
        const data = bytesOf(3, 70_000);
        const put = await ctx.store.operations.send(new PutAttachmentOperation("users/2", "data.bin", data, "application/x-test"));
        assert.equal(put.name, "data.bin");
        assert.equal(put.hash, sha(data));
        assert.equal(put.size, data.length);
        const res = await ctx.store.operations.send(new GetAttachmentOperation("users/2", "data.bin", "Document", null));
        try {
            assert.ok((await readAll(res.data)).equals(data));
            assert.equal(res.details.contentType, "application/x-test");
        } finally {
            res.dispose();
        }
        await ctx.store.operations.send(new DeleteAttachmentOperation("users/2", "data.bin"));
        const s2 = ctx.store.openSession();
        assert.equal(await s2.advanced.attachments.exists("users/2", "data.bin"), false);
    });

    it("downloads are sandboxed and not sniffed; a missing document is an error", async () => {
        const s = ctx.store.openSession();
        await s.store(new User("eve"), "users/3");
        await s.saveChanges();
        await ctx.store.operations.send(new PutAttachmentOperation("users/3", "x.html", Buffer.from("<script>alert(1)</script>"), "text/html"));
        const r = await fetch(`${ctx.store.urls[0]}/databases/${ctx.database}/attachments?id=users%2F3&name=x.html`);
        assert.equal(r.status, 200);
        assert.equal(r.headers.get("content-security-policy"), "sandbox");
        assert.equal(r.headers.get("x-content-type-options"), "nosniff");
        await r.arrayBuffer();
        await assert.rejects(ctx.store.operations.send(new PutAttachmentOperation("users/none", "a", Buffer.from("x"), "")));
    });
});

const DB = `compat_att_${Date.now().toString(36)}`;
const TAGS = ["A", "B", "C"];

describe("attachments on a 3-node cluster", () => {
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
        ({ tmp, bin } = prepare("i1"));
        const ports = {};
        for (const t of TAGS) {
            ports[t] = { http: await freePort(), raft: await freePort() };
        }
        nodes = TAGS.map((t, i) => new Node(tmp, t, ports[t].http, ports[t].raft, {
            join: i === 0 ? null : `http://127.0.0.1:${ports[TAGS[0]].http}`,
        }));
        await startCluster(nodes, bin);
        const store = new DocumentStore(nodes.map(n => n.url), DB);
        store.initialize();
        stores.push(store);
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
            dumpLogs("i1", nodes);
        }
        removeTmp(tmp, "i1");
    });

    it("stored on A, the same bytes are read on B and C", step(async () => {
        const data = bytesOf(7, 600 * 1024 + 3); // three chunks
        const a = pinned(nodes[0]);
        const s = a.openSession();
        const user = new User("replicated");
        await s.store(user, "users/r1");
        s.advanced.attachments.store(user, "blob.bin", data, "application/octet-stream");
        await s.saveChanges();
        for (const node of nodes.slice(1)) {
            const store = pinned(node);
            let got = null;
            await eventually(`attachment on ${node.tag}`, 20_000, async () => {
                got = await fetchAttachment(store, "users/r1", "blob.bin").catch(() => null);
                return [got !== null, "not there yet"];
            });
            assert.ok(got.data.equals(data), `the same bytes on ${node.tag}`);
            assert.equal(got.details.hash, sha(data));
            const session = store.openSession();
            const loaded = await session.load("users/r1", User);
            assert.deepEqual(session.advanced.attachments.getNames(loaded).map(n => n.name), ["blob.bin"]);
        }
    }));
});
