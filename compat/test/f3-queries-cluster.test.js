"use strict";
// F3 (issue 11): queries and indexes on a 3-node cluster with the npm client.
//
// This file starts its OWN cluster (it does not use ROOKERY_URL): three processes of the server
// binary (ROOKERY_BIN, or built here), as c1 does. Index definitions go through the cluster state,
// so an index put through one node must exist and answer on every node, each over its own copy of
// the documents. Each node is queried through a store pinned to it (topology updates disabled), so
// a request never fails over to another node.
const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const {
    DocumentStore,
    CreateDatabaseOperation,
    AbstractJavaScriptIndexCreationTask,
    IndexCreation,
    GetIndexNamesOperation,
    GetIndexOperation,
} = require("ravendb");
const { eventually, prepare, removeTmp, Node, startCluster, waitDatabaseOn, killAllSync, dumpLogs, freePort } = require("./cluster-helpers");

const DB = `compat_qcluster_${Date.now().toString(36)}`;

class Pet {
    constructor(init) {
        Object.assign(this, init);
    }
}

class Person {
    constructor(init) {
        Object.assign(this, init);
    }
}

class Company {
    constructor(init) {
        Object.assign(this, init);
    }
}

class Pets_ByOwner extends AbstractJavaScriptIndexCreationTask {
    constructor() {
        super();
        const { load } = this.mapUtils();
        this.map("Pets", p => ({ Name: p.Name, OwnerName: load(p.OwnerId, "People").Name }));
    }
}

describe("queries and indexes on a 3-node cluster", () => {
    let tmp;
    let nodes = [];
    let store; // all three URLs
    const pinned = {}; // tag -> store that only talks to that node
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

    before(async () => {
        let bin;
        ({ tmp, bin } = prepare("f3"));
        const a = new Node(tmp, "A", await freePort(), await freePort());
        nodes = [a,
            new Node(tmp, "B", await freePort(), await freePort(), { join: a.url }),
            new Node(tmp, "C", await freePort(), await freePort(), { join: a.url })];
        await startCluster(nodes, bin);
    }, { timeout: 180_000 });

    after(async () => {
        for (const s of [store, ...Object.values(pinned)]) {
            if (s) {
                s.dispose();
            }
        }
        for (const n of nodes) {
            await n.kill9();
        }
        if (failed) {
            dumpLogs("f3", nodes);
        }
        removeTmp(tmp, "f3");
    });

    // Pet names the index answers for ownerName on the pinned node tag, waiting for non-stale results.
    const petsOn = async (tag, ownerName) => {
        let stats;
        const r = await pinned[tag].openSession().query({ indexName: "Pets/ByOwner" })
            .waitForNonStaleResults(10_000)
            .statistics(s => { stats = s; })
            .whereEquals("OwnerName", ownerName)
            .all();
        return { names: r.map(p => p.Name).sort(), stats };
    };

    it("creates the database on all three nodes and a store pinned to each", step(async () => {
        store = new DocumentStore(nodes.map(n => n.url), DB);
        store.initialize();
        await store.maintenance.server.send(new CreateDatabaseOperation({ databaseName: DB }, 3));
        await waitDatabaseOn(nodes, DB);
        for (const n of nodes) {
            const s = new DocumentStore(n.url, DB);
            s.conventions.disableTopologyUpdates = true;
            s.initialize();
            pinned[n.tag] = s;
        }
    }));

    it("an index created through node B exists on A, B and C with the same definition", step(async () => {
        await IndexCreation.createIndexes([new Pets_ByOwner()], pinned.B);
        for (const n of nodes) {
            await eventually(`Pets/ByOwner on ${n.tag}`, 15_000, async () => {
                const names = await pinned[n.tag].maintenance.send(new GetIndexNamesOperation(0, 100));
                return [names.includes("Pets/ByOwner"), `names on ${n.tag}: ${names}`];
            });
            const def = await pinned[n.tag].maintenance.send(new GetIndexOperation("Pets/ByOwner"));
            assert.equal(def.type, "JavaScriptMap", n.tag);
            assert.match([...def.maps][0], /load\(p\.OwnerId, "People"\)/, n.tag);
        }
    }));

    it("documents written on node A are found by the index on every node once replicated", step(async () => {
        const s = pinned.A.openSession();
        await s.store(new Person({ Name: "Alice" }), "people/1");
        await s.store(new Person({ Name: "Bob" }), "people/2");
        await s.store(new Pet({ Name: "Rex", OwnerId: "people/1" }), "pets/1");
        await s.store(new Pet({ Name: "Tom", OwnerId: "people/1" }), "pets/2");
        await s.store(new Pet({ Name: "Fido", OwnerId: "people/2" }), "pets/3");
        await s.saveChanges();
        for (const n of nodes) {
            await eventually(`Alice's pets on ${n.tag}`, 20_000, async () => {
                const { names, stats } = await petsOn(n.tag, "Alice");
                assert.equal(stats.nodeTag, n.tag, "the pinned store must be answered by its own node");
                assert.equal(stats.indexName, "Pets/ByOwner");
                return [names.join() === "Rex,Tom", `${n.tag}: ${names}`];
            });
            assert.deepEqual((await petsOn(n.tag, "Bob")).names, ["Fido"], n.tag);
        }
    }));

    it("a document written on node C is found by a dynamic query on node A", step(async () => {
        const s = pinned.C.openSession();
        await s.store(new Company({ Name: "Globex", City: "Springfield" }), "companies/c1");
        await s.saveChanges();
        await eventually("companies/c1 in a query on A", 20_000, async () => {
            let stats;
            const r = await pinned.A.openSession().query({ collection: "Companies" })
                .waitForNonStaleResults(5_000)
                .statistics(x => { stats = x; })
                .whereEquals("City", "Springfield")
                .all();
            return [r.length === 1 && r[0].Name === "Globex" && stats.nodeTag === "A" && stats.indexName === "Auto/Companies/ByCity",
                `${JSON.stringify(r)} ${stats && stats.nodeTag} ${stats && stats.indexName}`];
        });
    }));

    it("renaming the owner on node B changes the load() index results on every node", step(async () => {
        const s = pinned.B.openSession();
        const alice = await s.load("people/1");
        assert.ok(alice, "people/1 replicated to B");
        alice.Name = "Alicia";
        await s.saveChanges();
        for (const n of nodes) {
            await eventually(`renamed owner on ${n.tag}`, 20_000, async () => {
                const now = await petsOn(n.tag, "Alicia");
                const old = await petsOn(n.tag, "Alice");
                return [now.names.join() === "Rex,Tom" && old.names.length === 0,
                    `${n.tag}: Alicia -> ${now.names}, Alice -> ${old.names}`];
            });
        }
    }));

    it("the store on all three URLs queries the index and counts the same on any node", step(async () => {
        const r = await store.openSession().query({ indexName: "Pets/ByOwner" })
            .waitForNonStaleResults().whereEquals("OwnerName", "Alicia").count();
        assert.equal(r, 2);
        for (const n of nodes) {
            const c = await pinned[n.tag].openSession().query({ collection: "Pets" }).count();
            assert.equal(c, 3, `Pets on ${n.tag}`);
        }
    }));
});
