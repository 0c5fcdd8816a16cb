"use strict";
// C2: document replication, failover and a manual conflict, seen through the npm client.
//
// This file starts its OWN 3-node cluster (it does not use ROOKERY_URL), like c1. Replication
// from every node to every other one is dialled through a TCP proxy in this process
// (--replication-peers), one proxy per direction, so a link can be cut and healed. Raft and the
// client's own requests go directly.
//
//   1. a document stored through a store pinned to A loads through stores pinned to B and C,
//      with the same change vector;
//   2. a store given all URLs saves, the node it talks to is killed (-9), and the same store
//      loads everything saved before the kill from the others and keeps saving;
//   3. on the two survivors, with the solver set to manual: cut the link, store one id on each
//      side, heal; the id is listed as a conflict on both, session.load rejects with
//      DocumentConflictException, and storing a new version through the client resolves it on
//      both nodes, with a "manual" entry holding both versions in the resolving node's log.
const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { DocumentStore, CreateDatabaseOperation } = require("ravendb");
const h = require("./helpers");
const { httpJSON, eventually, prepare, removeTmp, Node, startCluster, waitDatabaseOn, killAllSync, dumpLogs, freePort, Proxy } =
    require("./cluster-helpers");

const DB = `compat_repl_${Date.now().toString(36)}`;
const TAGS = ["A", "B", "C"];

class Note {
    constructor(text) {
        this.text = text;
    }
}

describe("replication, failover and conflicts with the npm client", () => {
    let tmp;
    let nodes = [];
    const proxies = {}; // proxies[src][dst]: the link src replicates to dst through
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
    const byTag = tag => nodes.find(n => n.tag === tag);
    process.once("exit", () => killAllSync(nodes));

    // A store that only ever talks to node: no topology updates, so no other URL is known.
    const pinnedStore = node => {
        const store = new DocumentStore(node.url, DB);
        store.conventions.disableTopologyUpdates = true;
        store.initialize();
        stores.push(store);
        return { store, recorder: h.recordResponses(store.getRequestExecutor()) };
    };
    // Origin of the last successful request whose URL contains part.
    const lastOrigin = (recorder, part) => {
        const hit = [...recorder.seen].reverse().find(s => !s.failed && s.url.includes(part));
        return hit && new URL(hit.url).origin;
    };
    const conflictsOn = async node => {
        const r = await httpJSON("GET", `${node.url}/databases/${DB}/replication/conflicts`);
        assert.equal(r.status, 200, `conflicts on ${node.tag}: ${r.text}`);
        return r.json;
    };

    before(async () => {
        let bin;
        ({ tmp, bin } = prepare("c2"));
        const ports = {};
        for (const t of TAGS) {
            ports[t] = { http: await freePort(), raft: await freePort() };
        }
        const urlOf = t => `http://127.0.0.1:${ports[t].http}`;
        for (const src of TAGS) {
            proxies[src] = {};
            for (const dst of TAGS.filter(t => t !== src)) {
                proxies[src][dst] = await new Proxy(`${src}->${dst}`, urlOf(dst)).listen();
            }
        }
        nodes = TAGS.map((t, i) => new Node(tmp, t, ports[t].http, ports[t].raft, {
            join: i === 0 ? null : urlOf(TAGS[0]),
            peers: Object.fromEntries(Object.entries(proxies[t]).map(([dst, p]) => [dst, p.url])),
        }));
        await startCluster(nodes, bin);
    }, { timeout: 180_000 });

    after(async () => {
        for (const s of stores) {
            s.dispose();
        }
        for (const n of nodes) {
            await n.kill9();
        }
        for (const src of Object.keys(proxies)) {
            for (const p of Object.values(proxies[src])) {
                await p.close();
            }
        }
        if (failed) {
            dumpLogs("c2", nodes);
        }
        removeTmp(tmp, "c2");
    });

    it("creates the database on A, B and C", step(async () => {
        const store = new DocumentStore(nodes.map(n => n.url), DB);
        store.initialize();
        stores.push(store);
        await store.maintenance.server.send(new CreateDatabaseOperation({ databaseName: DB }, 3));
        await waitDatabaseOn(nodes, DB);
    }));

    it("a document stored on A loads through stores pinned to B and C with the same change vector", step(async () => {
        const a = pinnedStore(byTag("A"));
        const s = a.store.openSession();
        const note = new Note("written on A");
        await s.store(note, "notes/replicated");
        await s.saveChanges();
        assert.equal(lastOrigin(a.recorder, "/bulk_docs"), byTag("A").url);
        const cv = s.advanced.getChangeVectorFor(note);
        assert.match(cv, /^A:\d+-/, `change vector of a write on A: ${cv}`);

        for (const node of [byTag("B"), byTag("C")]) {
            const p = pinnedStore(node);
            let loaded = null;
            let session = null;
            await eventually(`notes/replicated on ${node.tag}`, 15_000, async () => {
                session = p.store.openSession({ noCaching: true });
                loaded = await session.load("notes/replicated", Note);
                return [loaded !== null, "not there yet"];
            });
            assert.equal(lastOrigin(p.recorder, "/docs"), node.url, `the load went to ${node.tag}`);
            assert.ok(loaded instanceof Note);
            assert.equal(loaded.text, "written on A");
            assert.equal(session.advanced.getChangeVectorFor(loaded), cv, `change vector on ${node.tag}`);
            assert.equal(session.advanced.getMetadataFor(loaded)["@collection"], "Notes");
        }
        // It travelled through the proxies, so cutting them cuts replication.
        assert.ok(proxies.A.B.connections > 0, "A replicated to B without its proxy");
        assert.ok(proxies.A.C.connections > 0, "A replicated to C without its proxy");
    }));

    let killed = null;

    it("kill -9 the node a multi-URL store talks to: it loads everything saved before and keeps saving", step(async () => {
        const store = new DocumentStore(nodes.map(n => n.url), DB);
        store.initialize();
        stores.push(store);
        const recorder = h.recordResponses(store.getRequestExecutor());
        const saved = [];
        const origins = new Set();
        for (let i = 0; i < 5; i++) {
            const s = store.openSession();
            const notes = [new Note(`before-${i}-a`), new Note(`before-${i}-b`)];
            for (const n of notes) {
                await s.store(n);
            }
            await s.saveChanges();
            origins.add(lastOrigin(recorder, "/bulk_docs"));
            saved.push(...notes.map(n => ({ id: n.id, text: n.text, cv: s.advanced.getChangeVectorFor(n) })));
        }
        assert.equal(origins.size, 1, `one node took every write: ${[...origins]}`);
        const [origin] = origins;
        const preferred = await store.getRequestExecutor().getPreferredNode();
        assert.equal(preferred.currentNode.url, origin, "the preferred node is the one that took the writes");
        const target = nodes.find(n => n.url === origin);
        assert.ok(target, `writes went to ${origin}, not a node of the cluster`);

        // Replication is asynchronous: wait until the others have everything, then kill.
        for (const node of nodes.filter(n => n !== target)) {
            for (const w of saved) {
                await eventually(`${w.id} on ${node.tag}`, 15_000, async () => {
                    const r = await node.getDoc(DB, w.id);
                    return [r.status === 200 && r.json.Results[0]["@metadata"]["@change-vector"] === w.cv, `${r.status} ${r.text}`];
                });
            }
        }
        await target.kill9();
        killed = target;
        process.stderr.write(`[c2] the multi-URL store talked to ${target.tag}; killed it\n`);

        const seenBefore = recorder.seen.length;
        const r = store.openSession({ noCaching: true });
        for (const w of saved) {
            const doc = await r.load(w.id, Note);
            assert.ok(doc, `${w.id}, saved on ${target.tag} before the kill, must load after it`);
            assert.equal(doc.text, w.text);
            assert.equal(r.advanced.getChangeVectorFor(doc), w.cv, `${w.id} has its change vector from ${target.tag}`);
        }
        const answered = recorder.seen.slice(seenBefore).filter(x => !x.failed && x.url.includes("/docs"));
        assert.ok(answered.length > 0 && answered.every(x => !x.url.startsWith(target.url)), "the loads were answered by the survivors");

        for (let i = 0; i < 3; i++) {
            const s = store.openSession();
            const n = new Note(`after-${i}`);
            await s.store(n);
            await s.saveChanges();
            const took = lastOrigin(recorder, "/bulk_docs");
            assert.notEqual(took, target.url);
            assert.ok(nodes.some(x => x.url === took && x.running()), `write after the kill went to ${took}`);
            const loaded = await store.openSession({ noCaching: true }).load(n.id, Note);
            assert.ok(loaded, `${n.id} written after the kill must load`);
            assert.equal(loaded.text, n.text);
        }
    }));

    it("a conflict made across a cut link: DocumentConflictException, then resolved by a client write", step(async () => {
        assert.ok(killed, "the failover step ran");
        const [x, y] = nodes.filter(n => n !== killed);
        const ID = "notes/contested";

        // Manual: conflicts stay stored instead of resolving to the latest on arrival.
        // It goes through Raft, which may still be electing a leader after the kill.
        await eventually("manual solver set", 15_000, async () => {
            const r = await httpJSON("POST", `${x.url}/admin/replication/conflicts/solver?name=${DB}`, { ResolveToLatest: false });
            return [r.status === 200, `${r.status} ${r.text}`];
        });
        for (const node of [x, y]) {
            await eventually(`manual solver on ${node.tag}`, 15_000, async () => {
                const r = await httpJSON("GET", `${node.url}/databases/${DB}/replication/conflicts/solver`);
                return [r.status === 200 && r.json.ResolveToLatest === false, r.text];
            });
        }

        const px = pinnedStore(x);
        const py = pinnedStore(y);
        proxies[x.tag][y.tag].cut();
        proxies[y.tag][x.tag].cut();
        const versions = {};
        for (const [p, node] of [[px, x], [py, y]]) {
            const s = p.store.openSession();
            const n = new Note(`written on ${node.tag}`);
            await s.store(n, ID);
            await s.saveChanges();
            assert.equal(lastOrigin(p.recorder, "/bulk_docs"), node.url);
            versions[node.tag] = { text: n.text, cv: s.advanced.getChangeVectorFor(n) };
        }
        // Still cut: each side serves its own version.
        for (const node of [x, y]) {
            const r = await node.getDoc(DB, ID);
            assert.equal(r.status, 200, r.text);
            assert.equal(r.json.Results[0].text, `written on ${node.tag}`, `${node.tag} while the link is cut`);
        }
        const dialsBefore = proxies[x.tag][y.tag].connections + proxies[y.tag][x.tag].connections;
        proxies[x.tag][y.tag].heal();
        proxies[y.tag][x.tag].heal();

        for (const node of [x, y]) {
            await eventually(`${ID} listed as a conflict on ${node.tag}`, 30_000, async () => {
                const c = await conflictsOn(node);
                const row = c.Results.find(r => r.Id === ID);
                return [!!row && row.Versions === 2 && row.Collection === "Notes", JSON.stringify(c)];
            });
        }
        assert.ok(proxies[x.tag][y.tag].connections + proxies[y.tag][x.tag].connections > dialsBefore, "replication reconnected through the healed proxies");

        // What the client throws for a conflicted id.
        for (const [p, node] of [[px, x], [py, y]]) {
            let thrown = null;
            await assert.rejects(p.store.openSession({ noCaching: true }).load(ID, Note), err => {
                thrown = err;
                return h.errorNamed("DocumentConflictException")(err);
            });
            assert.ok(thrown instanceof Error);
            assert.match(thrown.message, new RegExp(`Conflict detected on '${ID}'`, "i"), `${node.tag}: ${thrown.message}`);
            // The client attaches the raw response body (a string) as err.json.
            assert.equal(typeof thrown.json, "string", `${node.tag}: the error carries the response body`);
            const body = JSON.parse(thrown.json);
            assert.equal(body.Type, "Raven.Client.Exceptions.Documents.DocumentConflictException");
            assert.equal(body.DocId, ID);
        }

        // Resolve with a plain store + saveChanges in a new session. Without optimistic
        // concurrency the client sends no change vector for an entity it did not load, so the
        // PUT overwrites whatever is there: the conflict's versions included.
        const s = px.store.openSession();
        const resolved = new Note("resolved by the client");
        await s.store(resolved, ID);
        await s.saveChanges();
        assert.equal(lastOrigin(px.recorder, "/bulk_docs"), x.url);
        const resolvedCv = s.advanced.getChangeVectorFor(resolved);

        for (const [p, node] of [[px, x], [py, y]]) {
            let loaded = null;
            let session = null;
            await eventually(`${ID} loads on ${node.tag}`, 30_000, async () => {
                session = p.store.openSession({ noCaching: true });
                loaded = await session.load(ID, Note);
                return [loaded !== null && loaded.text === resolved.text, loaded && loaded.text];
            });
            assert.equal(session.advanced.getChangeVectorFor(loaded), resolvedCv, `change vector on ${node.tag}`);
            const c = await conflictsOn(node);
            assert.equal(c.TotalResults, 0, `${node.tag} still lists conflicts: ${JSON.stringify(c)}`);
        }

        const log = await httpJSON("GET", `${x.url}/databases/${DB}/conflicts/log?id=${encodeURIComponent(ID)}`);
        assert.equal(log.status, 200, log.text);
        const manual = log.json.Results.filter(e => e.Strategy === "manual");
        assert.equal(manual.length, 1, `one manual resolution on ${x.tag}: ${log.text}`);
        const [entry] = manual;
        assert.equal(entry.Id, ID);
        assert.equal(entry.Node, x.tag);
        assert.equal(entry.Versions.length, 2, log.text);
        const got = entry.Versions.map(v => `${v.Doc.text}|${v.ChangeVector}`).sort();
        const want = Object.values(versions).map(v => `${v.text}|${v.cv}`).sort();
        assert.deepEqual(got, want, "the log keeps both conflicting versions");
        assert.equal(entry.Result.Doc.text, resolved.text);
        assert.equal(entry.Result.ChangeVector, resolvedCv);
    }));
});
