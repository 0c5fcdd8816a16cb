// The studio on a secured three-node cluster started by this spec as the
// README says (the global setup's unsecured node is not used): `studio
// setup` writes the CA, the node and admin certificates and prints each
// node's serve line, `studio setup client` a second client certificate.
// Chromium presents the admin certificate, registers the second one as a
// read-only user on the Certificates page, finds that in the audit log;
// the read-only certificate sees the documents and no action it may not
// take, and a forged POST is refused; without a certificate the browser
// gets the refusal page; revoking locks the certificate out.
"use strict";
const { test, expect } = require("@playwright/test");
const { spawn, spawnSync } = require("node:child_process");
const fs = require("node:fs");
const https = require("node:https");
const os = require("node:os");
const path = require("node:path");
const { shot, freePort, until, studioBinary, waitLive } = require("./helpers");

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "rookery-pw-secured-"));
const certs = path.join(tmp, "certs");
const node = {}; // node A: {url, origin, adminTP, readerTP}
const nodes = []; // in start order: {url, origin, tag, proc, exited, log}
let bin;

// run runs the binary and returns its standard output.
function run(args) {
  const r = spawnSync(bin, args, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(args.join(" ") + ": " + r.status + "\n" + r.stdout + r.stderr);
  return r.stdout;
}

// line finds "prefix: value" in the output of `studio setup`.
function line(out, prefix) {
  const l = out.split("\n").find((x) => x.startsWith(prefix + ": "));
  if (!l) throw new Error("no '" + prefix + ":' line in:\n" + out);
  return l.slice(prefix.length + 2).trim();
}

// serveArgs turns the printed "studio serve ..." command into arguments
// (its values are shell-quoted only when they need it; these do not).
function serveArgs(cmd) {
  const words = cmd.split(/\s+/);
  if (words[0] !== "studio" || words[1] !== "serve") throw new Error("unexpected node command: " + cmd);
  if (words.some((w) => w.startsWith("'"))) throw new Error("quoted values are not expected here: " + cmd);
  return words.slice(1);
}

// adminAPI calls the node's API with the admin certificate (Node's https,
// trusting the cluster's CA).
function adminAPI(method, pathAndQuery, body) {
  return new Promise((resolve, reject) => {
    const req = https.request(
      node.url + pathAndQuery,
      {
        method,
        ca: fs.readFileSync(path.join(certs, "ca.pem")),
        pfx: fs.readFileSync(path.join(certs, "admin.pfx")),
        passphrase: "pw",
        headers: { "Content-Type": "application/json" },
      },
      (res) => {
        let text = "";
        res.on("data", (d) => (text += d));
        res.on("end", () => resolve({ status: res.statusCode, text }));
      }
    );
    req.on("error", reject);
    if (body !== undefined) req.write(JSON.stringify(body));
    req.end();
  });
}

// context opens a browser context presenting a client certificate (name
// of its .pfx in the setup directory), or none.
async function context(browser, name) {
  const opts = { ignoreHTTPSErrors: true }; // the node's certificate comes from the cluster's own CA
  if (name) opts.clientCertificates = nodes.map((n) => ({ origin: n.origin, pfxPath: path.join(certs, name + ".pfx"), passphrase: "pw" }));
  return browser.newContext(opts);
}

test.describe.serial("the studio on a secured three-node cluster", () => {
  test.setTimeout(90_000);

  test.beforeAll(async () => {
    test.setTimeout(120_000);
    bin = studioBinary(tmp);
    const ports = [await freePort(), await freePort(), await freePort()];
    const out = run(["setup", "--hosts", ports.map((p) => "127.0.0.1:" + p).join(","), "--out", certs, "--pfx-password", "pw"]);
    node.adminTP = line(out, "admin thumbprint");
    node.readerTP = line(run(["setup", "client", "--dir", certs, "--name", "reader", "--pfx-password", "pw"]), "reader thumbprint");
    // Each node runs its printed line (its data directory made unique, a
    // free Raft port), the first one bootstrapping, the others joining it.
    for (let i = 0; i < 3; i++) {
      const n = { url: "https://127.0.0.1:" + ports[i], log: path.join(tmp, "node" + (i + 1) + ".log") };
      n.origin = n.url;
      const args = serveArgs(line(out, "node " + (i + 1))).filter((_, j, a) => a[j] !== "--data-dir" && a[j - 1] !== "--data-dir");
      args.push("--data-dir", path.join(tmp, "data" + (i + 1)), "--raft-addr", "127.0.0.1:" + (await freePort()));
      const log = fs.openSync(n.log, "a");
      n.proc = spawn(bin, args, { stdio: ["ignore", log, log] });
      n.exited = new Promise((resolve) => n.proc.on("exit", resolve));
      nodes.push(n);
      if (i === 0) {
        node.url = node.origin = n.url;
        await until("node A", async () => (await adminAPI("GET", "/readyz")).status === 200);
      }
    }
    await until("three voters", async () => {
      const r = await adminAPI("GET", "/admin/cluster/status");
      return r.status === 200 && JSON.parse(r.text).Nodes.filter((x) => x.Suffrage === "voter").length === 3;
    });
    // Nodes 2 and 3 join at once, so which of them is B is not known in
    // advance: each node's tag is read from the cluster.
    const members = JSON.parse((await adminAPI("GET", "/admin/cluster/status")).text).Nodes;
    for (const n of nodes) {
      const m = members.find((x) => x.Url === n.url);
      if (!m) throw new Error("no member at " + n.url + " in " + JSON.stringify(members));
      n.tag = m.Tag;
    }
    await until("a database", async () => (await adminAPI("PUT", "/admin/databases?name=vault", { DatabaseName: "vault" })).status === 201);
    const r = await adminAPI("POST", "/databases/vault/bulk_docs", {
      Commands: [{ Id: "secrets/1", Type: "PUT", Document: { Note: "<b>not markup</b>", "@metadata": { "@collection": "Secrets" } } }],
    });
    if (r.status !== 201) throw new Error("bulk_docs: " + r.status + " " + r.text);
  });

  test.afterAll(async () => {
    for (const n of nodes) if (n.proc.exitCode === null && n.proc.signalCode === null) n.proc.kill("SIGTERM");
    for (const n of nodes) await n.exited;
    if (process.env.ROOKERY_SERVER_LOG) for (const n of nodes) process.stderr.write(fs.readFileSync(n.log, "utf8"));
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  test("the admin certificate: who it is, registers a read-only certificate, finds it in the audit log", async ({ browser }) => {
    const ctx = await context(browser, "admin");
    const page = await ctx.newPage();
    const resp = await page.goto(node.url + "/studio/");
    expect(resp.status()).toBe(200);
    await expect(page.getByTestId("whoami-name")).toHaveText("admin");
    await expect(page.getByTestId("whoami-clearance")).toHaveText("ClusterAdmin");
    await expect(page.getByTestId("reading-node-tag")).toHaveText("A");
    await expect(page.getByTestId("unsecured-warning")).toHaveCount(0);
    await expect(page.getByTestId("dash-databases")).toHaveText("1");
    await waitLive(page); // the websocket works over TLS with the certificate
    await shot(page, "secured-dashboard-admin");

    await page.getByTestId("nav-certificates").click();
    await expect(page).toHaveURL(/\/studio\/certificates$/);
    await expect(page.getByTestId("cert-server-thumbprint")).toHaveText(/^[0-9A-F]{40}$/);
    await expect(page.getByTestId("well-known")).toHaveText(node.adminTP);
    await expect(page.getByTestId("certs-none")).toBeVisible();

    const form = page.getByTestId("cert-register-form");
    await form.getByTestId("cert-name-input").fill("reports-reader");
    await form.getByTestId("cert-clearance-input").selectOption("ValidUser");
    await form.getByTestId("cert-file").setInputFiles(path.join(certs, "reader.crt"));
    await form.getByTestId("cert-perm-db").first().fill("vault");
    await form.getByTestId("cert-perm-access").first().selectOption("Read");
    await form.getByTestId("cert-register-submit").click();
    await expect(page.getByTestId("flash")).toContainText("Certificate reports-reader registered (" + node.readerTP);
    const row = page.locator(`[data-testid=cert-row][data-thumbprint="${node.readerTP}"]`);
    await expect(row.getByTestId("cert-name")).toHaveText("reports-reader");
    await expect(row.getByTestId("cert-clearance")).toHaveText("ValidUser");
    await expect(row.getByTestId("cert-permissions")).toHaveText("vault: Read");
    await expect(row.getByTestId("cert-expires")).toHaveText(/^\d{4}-\d{2}-\d{2}\s*$/);
    await expect(row.getByTestId("cert-expiry-badge")).toHaveCount(0); // 825 days
    await shot(page, "secured-certificates");

    await page.getByTestId("nav-audit").click();
    await expect(page).toHaveURL(/\/studio\/audit$/);
    for (const tag of ["A", "B", "C"]) {
      await expect(page.locator(`[data-testid=audit-node][data-tag=${tag}]`)).toHaveAttribute("data-answered", "true");
    }
    const entry = page.locator("[data-testid=audit-row][data-action='certificate.put']");
    await expect(entry).toHaveCount(1);
    await expect(entry.getByTestId("audit-who-cell")).toContainText("admin");
    await expect(entry.getByTestId("audit-row-node")).toHaveText("A");
    await expect(entry.getByTestId("audit-target")).toContainText(node.readerTP + " reports-reader ValidUser");
    await expect(entry.getByTestId("audit-outcome")).toHaveAttribute("data-outcome", "ok");
    await page.getByTestId("audit-action").fill("database");
    await page.getByTestId("audit-filter-submit").click();
    await expect(page.locator("[data-testid=audit-row]")).toHaveCount(1);
    await expect(page.locator("[data-testid=audit-row]")).toHaveAttribute("data-action", "database.create");
    await shot(page, "secured-audit");

    // Node C, over its own TLS origin with the same certificate: three
    // voters, and the read-only registration made on A is there too.
    await page.goto(nodes[2].url + "/studio/cluster");
    await expect(page.getByTestId("reading-node-tag")).toHaveText(nodes[2].tag);
    await expect(page.locator("[data-testid=cluster-node-row]")).toHaveCount(3);
    await page.goto(nodes[2].url + "/studio/certificates");
    await expect(page.locator(`[data-testid=cert-row][data-thumbprint="${node.readerTP}"]`)).toHaveCount(1);
    await ctx.close();
  });

  test("the read-only certificate sees the documents and no action; a forged POST is refused", async ({ browser }) => {
    const ctx = await context(browser, "reader");
    const page = await ctx.newPage();
    // On node B: the document written on A has replicated there.
    await page.goto(nodes[1].url + "/studio/db/vault/documents");
    await expect(page.getByTestId("doc-link")).toHaveText(["secrets/1"]);
    await expect(page.getByTestId("reading-node-tag")).toHaveText(nodes[1].tag);
    await page.goto(node.url + "/studio/");
    await expect(page.getByTestId("whoami-name")).toHaveText("reports-reader");
    await expect(page.getByTestId("whoami-clearance")).toHaveText("ValidUser");
    await expect(page.getByTestId("nav-certificates")).toHaveCount(0);
    await expect(page.getByTestId("nav-audit")).toHaveCount(0);

    await page.goto(node.url + "/studio/databases");
    await expect(page.getByTestId("database-row")).toHaveCount(1);
    await expect(page.getByTestId("create-db-form")).toHaveCount(0);
    await expect(page.getByTestId("database-delete-open")).toHaveCount(0);

    await page.getByTestId("database-link").click();
    await expect(page.getByTestId("doc-link")).toHaveText(["secrets/1"]);
    await expect(page.getByTestId("new-doc")).toHaveCount(0);
    await expect(page.getByTestId("read-only")).toBeVisible();
    await page.getByTestId("doc-link").click();
    await expect(page.getByTestId("doc-json")).toContainText('"Note": "<b>not markup</b>"');
    await expect(page.locator("#main b")).toHaveCount(0); // document content is text, never markup
    await expect(page.getByTestId("doc-save")).toHaveCount(0);
    await expect(page.getByTestId("doc-delete")).toHaveCount(0);
    await expect(page.getByTestId("read-only-note")).toBeVisible();
    await shot(page, "secured-document-read-only");

    // A forged save, from the page's own origin: refused.
    const forged = await page.request.post(node.url + "/studio/db/vault/doc", {
      form: { id: "secrets/1", json: JSON.stringify({ Note: "forged", "@metadata": { "@collection": "Secrets" } }) },
      headers: { Origin: node.origin },
      maxRedirects: 0,
    });
    expect(forged.status()).toBe(403);
    // The same as a form the page's script submits.
    const [nav] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith("/studio/db/vault/doc/delete") && r.request().method() === "POST"),
      page.evaluate(() => {
        const f = document.createElement("form");
        f.method = "post";
        f.action = "/studio/db/vault/doc/delete";
        for (const [k, v] of [["id", "secrets/1"], ["confirm", "yes"]]) {
          const i = document.createElement("input");
          i.type = "hidden";
          i.name = k;
          i.value = v;
          f.appendChild(i);
        }
        document.body.appendChild(f);
        f.submit();
      }),
    ]);
    expect(nav.status()).toBe(403);
    await page.waitForURL(/\/studio\/db\/vault\/doc\/delete$/);
    await expect(page.locator("body")).toContainText("InvalidAuth");
    const stillThere = await adminAPI("GET", "/databases/vault/docs?id=secrets/1");
    expect(stillThere.status).toBe(200);
    expect(stillThere.text).toContain("<b>not markup</b>");

    // Server pages beyond the clearance: the refusal page.
    const refused = await page.goto(node.url + "/studio/certificates");
    expect(refused.status()).toBe(403);
    await expect(page.getByTestId("auth-refused")).toBeVisible();
    await ctx.close();
  });

  test("without a certificate: the refusal page", async ({ browser }) => {
    const ctx = await context(browser, null);
    const page = await ctx.newPage();
    const resp = await page.goto(node.url + "/studio/");
    expect(resp.status()).toBe(403);
    await expect(page.getByTestId("auth-refused")).toBeVisible();
    await expect(page.getByTestId("auth-refused-reason")).toContainText("requires client certificate");
    await shot(page, "secured-refused");
    await ctx.close();
  });

  test("the admin revokes the read-only certificate; it is refused from then on", async ({ browser }) => {
    const ctx = await context(browser, "admin");
    const page = await ctx.newPage();
    await page.goto(node.url + "/studio/certificates");
    await waitLive(page);
    const row = page.locator(`[data-testid=cert-row][data-thumbprint="${node.readerTP}"]`);
    await row.getByTestId("cert-revoke-open").click();
    await row.getByTestId("cert-revoke-confirm").fill("reports-reader");
    await row.getByTestId("cert-revoke-submit").click();
    await expect(page.getByTestId("flash")).toContainText("Certificate reports-reader (" + node.readerTP + ") revoked.");
    await expect(page.getByTestId("cert-row")).toHaveCount(0);
    await page.goto(node.url + "/studio/audit?action=certificate");
    await expect(page.locator("[data-testid=audit-row][data-action='certificate.delete']")).toHaveCount(1);
    await ctx.close();

    const rctx = await context(browser, "reader");
    const rpage = await rctx.newPage();
    const resp = await rpage.goto(node.url + "/studio/db/vault/documents");
    expect(resp.status()).toBe(403);
    await expect(rpage.getByTestId("auth-refused-reason")).toContainText("unknown to the server");
    await rctx.close();
  });
});
