"use strict";
// E1: the npm client against a secured 3-node cluster started as the README says.
//
// This file starts its OWN cluster (it does not use ROOKERY_URL): `studio setup` writes the CA, the
// node certificate and admin.pem for three free loopback ports and prints one `studio serve` line
// per node; each line runs as its own process (plus a free --raft-addr). The binary is ROOKERY_BIN
// when set, else built here. Everything then goes over HTTPS and, for the subscription worker, over
// TCP with TLS, with client certificates as identities.
const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { spawnSync } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");
const {
    DocumentStore,
    CreateDatabaseOperation,
    PutClientCertificateOperation,
    GetCertificatesOperation,
    GetCertificateMetadataOperation,
    DeleteCertificateOperation,
} = require("ravendb");
const h = require("./helpers");
const {
    eventually, prepare, removeTmp, SecuredNode, startCluster, waitDatabaseOn, killAllSync, dumpLogs, freePort,
    httpsJSON, secureSetup, issueClient,
} = require("./cluster-helpers");

const DB = `compat_e1_${Date.now().toString(36)}`;

// A worker's batch, or its error, within ms.
function firstBatch(worker, ms) {
    return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no batch within ${ms} ms`)), ms);
        worker.on("batch", (batch, done) => {
            clearTimeout(timer);
            done();
            resolve(batch);
        });
        worker.on("error", err => {
            clearTimeout(timer);
            reject(err);
        });
    });
}

describe("the npm client on a secured cluster", () => {
    let tmp;
    let bin;
    let certs;
    let nodes = [];
    const stores = [];
    let admin;
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

    // A store on every node's URL presenting pemFile (none when null), trusting the cluster's CA.
    const storeWith = pemFile => {
        const opts = pemFile ? { type: "pem", certificate: fs.readFileSync(pemFile), ca: fs.readFileSync(certs.ca) } : undefined;
        const s = new DocumentStore(nodes.map(n => n.url), DB, opts);
        s.initialize();
        stores.push(s);
        return s;
    };

    before(async () => {
        ({ tmp, bin } = prepare("e1"));
        const hosts = [];
        for (let i = 0; i < 3; i++) {
            hosts.push(`127.0.0.1:${await freePort()}`);
        }
        certs = secureSetup(bin, path.join(tmp, "certs"), hosts);
        const tls = { ca: fs.readFileSync(certs.ca), cert: fs.readFileSync(certs.adminPem), key: fs.readFileSync(certs.adminPem) };
        nodes = [];
        for (let i = 0; i < 3; i++) {
            const args = [...certs.serveArgs[i], "--raft-addr", `127.0.0.1:${await freePort()}`];
            // The first node bootstraps as A; the leader names the others in the order they join.
            nodes.push(new SecuredNode(tmp, "ABC"[i], `https://${hosts[i]}`, args, tmp, tls));
        }
        await startCluster(nodes, bin);
    }, { timeout: 180_000 });

    after(async () => {
        for (const s of stores) {
            s.dispose();
        }
        for (const n of nodes) {
            await n.kill9();
        }
        if (failed) {
            dumpLogs("e1", nodes);
        }
        removeTmp(tmp, "e1");
    });

    it("admin.pem: creates the database on A, B and C, stores and loads; the document replicates", step(async () => {
        admin = storeWith(certs.adminPem);
        await admin.maintenance.server.send(new CreateDatabaseOperation({ databaseName: DB }, 3));
        await waitDatabaseOn(nodes, DB);
        const s = admin.openSession();
        const u = new h.User("secured", 41);
        await s.store(u, "users/1");
        await s.store(new h.User("second", 42), "users/2");
        await s.saveChanges();
        const loaded = await admin.openSession({ noCaching: true }).load("users/1", h.User);
        assert.ok(loaded instanceof h.User);
        assert.equal(loaded.name, "secured");
        for (const n of nodes) {
            await eventually(`users/1 on ${n.tag}`, 10_000, async () => {
                const r = await n.getDoc(DB, "users/1");
                const doc = r.json && r.json.Results && r.json.Results[0];
                return [r.status === 200 && doc && doc.name === "secured", `${r.status} ${r.text.slice(0, 200)}`];
            });
        }
    }));

    it("a read-only certificate: loads work, saveChanges → AuthorizationException; listed; revoked → loads refused", step(async () => {
        const reader = issueClient(bin, certs.dir, "reader");
        const der = Buffer.from(fs.readFileSync(path.join(certs.dir, "reader.crt"), "utf8")
            .replace(/-----[A-Z ]+-----/g, "").replace(/\s+/g, ""), "base64").toString("base64");
        // The client PascalCases the keys of Permissions (the database name); database names are
        // case-insensitive, so the server takes it.
        await admin.maintenance.server.send(new PutClientCertificateOperation("reader", der, { [DB]: "Read" }, "ValidUser"));

        const listed = await admin.maintenance.server.send(new GetCertificatesOperation(0, 100));
        const mine = listed.find(c => c.thumbprint === reader.thumbprint);
        assert.ok(mine, `GetCertificatesOperation lists the reader: ${JSON.stringify(listed.map(c => c.thumbprint))}`);
        assert.equal(mine.securityClearance, "ValidUser");
        const meta = await admin.maintenance.server.send(new GetCertificateMetadataOperation(reader.thumbprint));
        assert.equal(meta.name, "reader");
        assert.equal(meta.securityClearance, "ValidUser");

        const rs = storeWith(reader.pem);
        // The registration is a Raft write: a node has it once it applied it.
        await eventually("the reader loads", 10_000, async () => {
            const u = await rs.openSession({ noCaching: true }).load("users/1", h.User);
            return [u && u.name === "secured", JSON.stringify(u)];
        });
        const s = rs.openSession();
        await s.store(new h.User("not allowed", 1), "users/by-reader");
        await assert.rejects(s.saveChanges(), h.errorNamed("AuthorizationException"));
        const again = await admin.openSession({ noCaching: true }).load("users/by-reader");
        assert.equal(again, null, "the refused save wrote nothing");

        // whoami with the reader's certificate (the client has no operation for it).
        const who = await httpsJSON("GET", `${nodes[2].url}/certificates/whoami`, undefined,
            { ca: fs.readFileSync(certs.ca), cert: fs.readFileSync(reader.pem), key: fs.readFileSync(reader.pem) });
        assert.equal(who.status, 200, who.text);
        assert.equal(who.json.Thumbprint, reader.thumbprint);
        assert.equal(who.json.SecurityClearance, "ValidUser");
        assert.equal(Object.values(who.json.Permissions).join(), "Read");

        await admin.maintenance.server.send(new DeleteCertificateOperation(reader.thumbprint));
        await eventually("the revoked reader is refused", 10_000, async () => {
            try {
                await rs.openSession({ noCaching: true }).load("users/1");
                return [false, "load still works"];
            } catch (err) {
                return [err.name === "AuthorizationException", `${err.name}: ${err.message}`];
            }
        });
        const after = await admin.maintenance.server.send(new GetCertificatesOperation(0, 100));
        assert.ok(!after.some(c => c.thumbprint === reader.thumbprint), "the revoked certificate is no longer listed");
    }));

    it("no certificate, or one the cluster does not know → AuthorizationException", step(async () => {
        // No certificate at all: the client cannot even trust the node, and says a certificate is
        // needed.
        const bare = storeWith(null);
        await assert.rejects(bare.openSession().load("users/1"), err => {
            assert.equal(err.name, "AuthorizationException", err.message);
            assert.match(err.message, /requires client certificate/);
            return true;
        });

        // No certificate, but the CA trusted (NODE_EXTRA_CA_CERTS is read at start, hence a child
        // process): the request reaches the node, which answers RavenDB's 403 InvalidAuth.
        const script = `
            const { DocumentStore } = require("ravendb");
            const s = new DocumentStore(${JSON.stringify(nodes.map(n => n.url))}, ${JSON.stringify(DB)});
            s.initialize();
            s.openSession().load("users/1").then(
                d => { console.log(JSON.stringify({ loaded: d })); s.dispose(); },
                e => { console.log(JSON.stringify({ name: e.name, message: e.message })); s.dispose(); });`;
        const child = spawnSync(process.execPath, ["-e", script], {
            cwd: path.join(__dirname, ".."),
            encoding: "utf8",
            timeout: 60_000,
            env: { ...process.env, NODE_EXTRA_CA_CERTS: certs.ca },
        });
        const lastLine = (child.stdout || "").trim().split("\n").pop();
        const res = JSON.parse(lastLine || "{}");
        assert.equal(res.name, "AuthorizationException", `child: ${child.stdout} ${child.stderr}`);
        assert.match(res.message, /Forbidden access/);
        assert.match(res.message, /InvalidAuth/);

        // The same refusal, raw.
        const raw = await httpsJSON("GET", `${nodes[0].url}/databases/${DB}/docs?id=users/1`, undefined, { ca: fs.readFileSync(certs.ca) });
        assert.equal(raw.status, 403, raw.text);
        assert.equal(raw.json.Type, "InvalidAuth");

        // A certificate the cluster's CA issued but nobody registered.
        const stranger = issueClient(bin, certs.dir, "stranger");
        const st = storeWith(stranger.pem);
        await assert.rejects(st.openSession().load("users/1"), h.errorNamed("AuthorizationException"));
        const s = st.openSession();
        await s.store(new h.User("stranger", 1), "users/stranger"); // no HiLo: that would ask the server already
        await assert.rejects(s.saveChanges(), h.errorNamed("AuthorizationException"));
    }));

    it("a subscription worker over TCP+TLS receives a batch; an unknown certificate's worker is refused", step(async () => {
        const name = await admin.subscriptions.create({ query: "from Users" });
        const worker = admin.subscriptions.getSubscriptionWorker({ subscriptionName: name });
        try {
            const batch = await firstBatch(worker, 30_000);
            const ids = batch.items.map(i => i.id).sort();
            assert.deepEqual(ids, ["users/1", "users/2"]);
            assert.equal(batch.items.find(i => i.id === "users/1").result.name, "secured");
        } finally {
            await worker.dispose();
        }

        const stranger = storeWith(path.join(certs.dir, "stranger.pem"));
        const refused = stranger.subscriptions.getSubscriptionWorker({ subscriptionName: name });
        try {
            await assert.rejects(firstBatch(refused, 30_000), h.errorNamed("AuthorizationException"));
        } finally {
            await refused.dispose();
        }
    }));
});
