"use strict";
// G1 (issue 13): the npm client's smuggler unchanged: store.smuggler.export writes a
// .ravendbdump file (the server streams it; the client then polls the operation to
// Completed), store.smuggler.import sends it as multipart and waits; documents with their
// change vectors, identities, HiLo documents and index definitions come back in a fresh
// database. The operation's result is readable after it finished.
const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const {
    DatabaseSmugglerExportOptions,
    DatabaseSmugglerImportOptions,
    IndexDefinition,
    PutIndexesOperation,
    GetIndexNamesOperation,
    GetOperationStateOperation,
    NextIdentityForOperation,
} = require("ravendb");
const h = require("./helpers");

class Person {
    constructor(init) {
        Object.assign(this, init);
    }
}

describe("smuggler: export and import with the npm client", () => {
    let src, dst, dir;

    before(async () => {
        src = await h.freshDatabase("smugsrc");
        dst = await h.freshDatabase("smugdst");
        dir = fs.mkdtempSync(path.join(os.tmpdir(), "rookery-smuggler-"));
        const s = src.store.openSession();
        for (let i = 0; i < 250; i++) {
            await s.store(new Person({ Name: "p" + i, Age: i % 90, Tags: ["a", "b" + (i % 3)] }));
        }
        await s.store(new Person({ Name: "explicit" }), "people/explicit");
        await s.saveChanges();
        await src.store.maintenance.send(new NextIdentityForOperation("orders"));
        await src.store.maintenance.send(new NextIdentityForOperation("orders"));
        const def = new IndexDefinition();
        def.name = "People/ByName";
        def.maps = new Set(["map('People', p => ({ Name: p.Name }))"]);
        await src.store.maintenance.send(new PutIndexesOperation(def));
    });
    after(async () => {
        if (dir) fs.rmSync(dir, { recursive: true, force: true });
        await Promise.all([src, dst].filter(Boolean).map(c => c.teardown()));
    });

    it("export writes a dump file and its operation completes", async () => {
        const file = path.join(dir, "people.ravendbdump");
        const op = await src.store.smuggler.export(new DatabaseSmugglerExportOptions(), file);
        await op.waitForCompletion();
        const bytes = fs.readFileSync(file);
        assert.ok(bytes.length > 100, `dump of ${bytes.length} bytes`);
        assert.equal(bytes[0], 0x1f, "a gzip stream");
        assert.equal(bytes[1], 0x8b, "a gzip stream");
        // Finished operations stay readable: the client polls them.
        const state = await src.store.maintenance.send(new GetOperationStateOperation(op._id));
        assert.equal(state.status, "Completed");
        const docs = state.result.Documents || state.result.documents;
        assert.ok(docs && (docs.ReadCount ?? docs.readCount) >= 251, JSON.stringify(state.result));
    });

    it("import reads the dump into a fresh database: documents, change vectors, identities, HiLo, indexes", async () => {
        const file = path.join(dir, "people.ravendbdump");
        const op = await dst.store.smuggler.import(new DatabaseSmugglerImportOptions(), file);
        await op.waitForCompletion();
        const a = src.store.openSession();
        const b = dst.store.openSession();
        const ids = ["people/explicit", "people/1-A", "people/250-A"];
        for (const id of ids) {
            const x = await a.load(id);
            const y = await b.load(id);
            assert.ok(y, `${id} imported`);
            assert.equal(y.Name, x.Name);
            assert.deepEqual(y.Tags, x.Tags);
            assert.equal(b.advanced.getChangeVectorFor(y), a.advanced.getChangeVectorFor(x), `${id}: the change vector is kept`);
        }
        const hilo = await b.load("Raven/Hilo/people");
        assert.ok(hilo && hilo.Max >= 250, `HiLo document: ${JSON.stringify(hilo)}`);
        // The identity goes on from where the source was (2): the next is 3.
        const next = await dst.store.maintenance.send(new NextIdentityForOperation("orders"));
        assert.equal(next, 3);
        const names = await dst.store.maintenance.send(new GetIndexNamesOperation(0, 10));
        assert.ok(names.includes("People/ByName"), `indexes: ${names}`);
        const count = await b.query({ collection: "People" }).count();
        assert.equal(count, 251);
    });

    it("export options: only some collections, and a transform script that drops documents", async () => {
        const s = src.store.openSession();
        await s.store({ Name: "c1", "@metadata": { "@collection": "Companies" } }, "companies/1");
        await s.saveChanges();
        const file = path.join(dir, "filtered.ravendbdump");
        const opts = new DatabaseSmugglerExportOptions();
        opts.operateOnTypes = ["Documents"];
        opts.collections = ["People"];
        opts.transformScript = "if (this.Age > 10) throw 'skip';";
        const op = await src.store.smuggler.export(opts, file);
        await op.waitForCompletion();
        const third = await h.freshDatabase("smugthird");
        try {
            const imp = await third.store.smuggler.import(new DatabaseSmugglerImportOptions(), file);
            await imp.waitForCompletion();
            const q = third.store.openSession();
            const people = await q.query({ collection: "People" }).all();
            assert.ok(people.length > 0 && people.every(p => p.Age === undefined || p.Age <= 10), `people: ${people.length}`);
            assert.equal(await q.query({ collection: "Companies" }).count(), 0);
        } finally {
            await third.teardown();
        }
    });
});
