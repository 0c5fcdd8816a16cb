// The Import/Export pages on the global setup's node: an export downloaded
// by the browser (gzip, and it imports back), the curl command copied to the
// clipboard, an import whose progress bar goes to its end while the header
// shows it running, with the result summary, and the server page exporting
// two databases to a directory of dumps and importing them back.
"use strict";
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const zlib = require("node:zlib");
const { test, expect } = require("@playwright/test");
const { api, base, uniqueName, createDatabase, deleteDatabase, putDocs, waitLive, shot, until } = require("./helpers");

// noHorizontalScroll fails when the page is wider than the viewport.
async function noHorizontalScroll(page) {
  const { sw, cw } = await page.evaluate(() => ({ sw: document.documentElement.scrollWidth, cw: document.documentElement.clientWidth }));
  expect(sw, "page scrolls sideways").toBeLessThanOrEqual(cw);
}

async function shots(page, name) {
  await page.setViewportSize({ width: 1440, height: 900 });
  await noHorizontalScroll(page);
  await shot(page, name + "-1440");
  await page.setViewportSize({ width: 390, height: 844 });
  await noHorizontalScroll(page);
  await shot(page, name + "-390");
  await page.setViewportSize({ width: 1440, height: 900 });
}

async function docCount(db) {
  const r = await api("GET", "/databases/" + db + "/stats");
  expect(r.status).toBe(200);
  return r.json.CountOfDocuments;
}

// importThroughAPI posts a dump as the npm client does (importOptions, then
// the file).
async function importThroughAPI(db, bytes) {
  const fd = new FormData();
  fd.append("importOptions", "{}");
  fd.append("file", new Blob([bytes]), "dump.ravendbdump");
  const r = await fetch(base() + "/databases/" + db + "/smuggler/import", { method: "POST", body: fd });
  return { status: r.status, text: await r.text() };
}

// bigDump writes a gzip dump of n patients (RavenDB 5.4's layout), a
// JavaScript and a C# index, an identity and counters.
function bigDump(n) {
  const parts = ['{"BuildVersion":54107,"Docs":['];
  for (let i = 1; i <= n; i++) {
    const doc = {
      Name: "patient " + i,
      Notes: "visit " + ((i * 7919) % 104729) + " " + Math.random().toString(36).repeat(6),
      "@metadata": { "@collection": "Patients", "@id": "patients/" + i + "-A", "@change-vector": "A:" + i + "-un3WmsZxZEKsRe/VW4qLMw", "@last-modified": "2019-07-24T10:01:25.0000000Z" },
    };
    parts.push((i > 1 ? "," : "") + JSON.stringify(doc));
  }
  parts.push('],"Indexes":[');
  parts.push('{"Type":"JavaScriptMap","IndexDefinition":{"Name":"Patients/ByName","Maps":["map(\'Patients\', p => ({ Name: p.Name }))"],"Reduce":null,"Fields":{},"Configuration":{},"LockMode":"Unlock","Priority":"Normal","Type":"JavaScriptMap","SourceType":"Documents"}},');
  parts.push('{"Type":"Map","IndexDefinition":{"Name":"Patients/ByVisits","Maps":["from p in docs.Patients select new { p.Name }"],"Reduce":null,"Fields":{},"Configuration":{}}}],');
  parts.push('"Identities":[{"Key":"patients|","Value":"42"}],');
  parts.push('"CounterGroups":[{"DocId":"patients/1-A","ChangeVector":"A:9-x","Values":{"Counters":{"likes":{"A":3}}}}],"Subscriptions":[]}');
  return zlib.gzipSync(Buffer.from(parts.join("")), { level: 1 });
}

test.describe("Import/Export page", () => {
  let db;
  const extra = [];
  test.beforeEach(async () => {
    db = uniqueName("pwsmug");
    await createDatabase(db);
    const docs = [];
    for (let i = 1; i <= 40; i++) docs.push({ id: "orders/" + i, body: { Total: i, "@metadata": { "@collection": "Orders" } } });
    for (let i = 1; i <= 5; i++) docs.push({ id: "users/" + i, body: { Name: "u" + i, "@metadata": { "@collection": "Users" } } });
    await putDocs(db, docs);
  });
  test.afterEach(async () => {
    await deleteDatabase(db);
    while (extra.length) await deleteDatabase(extra.pop());
  });

  test("export downloads a gzip dump that imports back, and the export shows done", async ({ page }) => {
    await page.goto(base() + "/studio/db/" + db + "/smuggler");
    await waitLive(page);
    await expect(page.getByTestId("export-file-name")).toHaveValue(new RegExp("^Dump of " + db + " \\d{4}-\\d{2}-\\d{2} \\d{2}-\\d{2}$"));
    const [download] = await Promise.all([page.waitForEvent("download"), page.getByTestId("export-submit").click()]);
    expect(download.suggestedFilename()).toMatch(new RegExp("^Dump of " + db + " .*\\.ravendbdump$"));
    const bytes = fs.readFileSync(await download.path());
    expect(bytes[0]).toBe(0x1f);
    expect(bytes[1]).toBe(0x8b);
    // The operation the page asked for shows done, with its counters.
    const op = await page.getByTestId("export-form").getAttribute("data-op");
    const view = page.locator(`[data-testid=smuggler-op][data-op="${op}"]`);
    await expect(view).toHaveAttribute("data-state", "completed");
    await expect(view.getByTestId("op-docs")).toHaveText("45");
    await expect(view.getByTestId("op-progress")).toHaveAttribute("value", "100");

    const back = uniqueName("pwsmugback");
    extra.push(back);
    await createDatabase(back);
    const r = await importThroughAPI(back, bytes);
    expect(r.status, r.text).toBe(200);
    expect(await docCount(back)).toBe(45);
  });

  test("copy the curl command: the clipboard holds the command shown, for the options chosen", async ({ page, context }) => {
    await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: base() });
    await page.goto(base() + "/studio/db/" + db + "/smuggler");
    await waitLive(page);
    const shown = await page.getByTestId("cmd-bash").textContent();
    expect(shown).toContain("/databases/" + db + "/smuggler/export");
    await page.getByTestId("copy-bash").click();
    await expect(page.getByTestId("copy-bash")).toHaveText("Copied");
    let copied = await page.evaluate(() => navigator.clipboard.readText());
    expect(copied).toBe(shown);
    expect(copied).toContain("/smuggler/export");
    expect(copied).toMatch(/^curl -sS --fail -o 'Dump of /);

    // Options change the command (rendered by the server): zstd, Orders only.
    await page.getByTestId("export-zstd").check();
    await page.locator('[data-testid=export-collection][value="Orders"]').check();
    await expect(page.getByTestId("cmd-bash")).toContainText('"CompressionAlgorithm":"Zstd"');
    await expect(page.getByTestId("cmd-bash")).toContainText('"Collections":["Orders"]');
    await expect(page.getByTestId("cmd-cron")).toContainText("0 2 * * * curl");
    const zstd = await page.getByTestId("cmd-bash").textContent();
    await page.getByTestId("copy-bash").click();
    await expect.poll(() => page.evaluate(() => navigator.clipboard.readText())).toBe(zstd);
    // The PowerShell line too.
    await page.getByTestId("copy-powershell").click();
    copied = await page.evaluate(() => navigator.clipboard.readText());
    expect(copied).toBe(await page.getByTestId("cmd-powershell").textContent());
    expect(copied).toMatch(/^curl\.exe /);
    // And the download follows the same options: a zstd dump of the orders.
    const [download] = await Promise.all([page.waitForEvent("download"), page.getByTestId("export-submit").click()]);
    const bytes = fs.readFileSync(await download.path());
    expect([...bytes.subarray(0, 4)]).toEqual([0x28, 0xb5, 0x2f, 0xfd]);
  });

  test("import: the progress bar goes to its end, the header shows it running, and the result is summarised", async ({ page }) => {
    test.setTimeout(120_000);
    const n = 60000;
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "pwsmug-")), "patients.ravendbdump");
    fs.writeFileSync(file, bigDump(n));
    await page.goto(base() + "/studio/db/" + db + "/smuggler");
    await waitLive(page);
    // Record what the live regions show as they are replaced.
    await page.evaluate(() => {
      window.__progress = [];
      window.__running = 0;
      const look = () => {
        document.querySelectorAll("[data-testid=smuggler-op][data-kind=Import] [data-testid=op-progress]").forEach((p) => {
          const v = p.getAttribute("value");
          if (v !== null && window.__progress[window.__progress.length - 1] !== v) window.__progress.push(v);
        });
        const area = document.querySelector("[data-testid=ops-area]");
        if (area) window.__running = Math.max(window.__running, Number(area.getAttribute("data-running")));
      };
      // Regions are morphed in place: attribute changes count too.
      new MutationObserver(look).observe(document.body, { childList: true, subtree: true, attributes: true, attributeFilter: ["value", "data-running", "data-state"] });
    });
    await page.getByTestId("import-file").setInputFiles(file);
    await page.getByTestId("import-submit").click();
    await expect(page.getByTestId("import-status")).toContainText("running");
    const op = await page.getByTestId("import-form").getAttribute("data-op");
    // The header's running operations link to it while it runs.
    await expect(page.locator(`[data-testid=running-op][data-op="${op}"] [data-testid=running-op-link]`)).toHaveAttribute("href", "/studio/db/" + db + "/smuggler#op-" + op);
    const view = page.locator(`[data-testid=smuggler-op][data-op="${op}"]`);
    await expect(view).toHaveAttribute("data-state", "completed", { timeout: 90_000 });
    await expect(page.getByTestId("import-status")).toContainText("finished");
    await expect(view.getByTestId("op-progress")).toHaveAttribute("value", "100");
    const seen = await page.evaluate(() => window.__progress.map(Number));
    expect(seen.length, "progress values seen: " + seen.join(",")).toBeGreaterThan(2);
    expect(seen.some((v) => v > 0 && v < 100), "a value between 0 and 100 in " + seen.join(",")).toBe(true);
    for (let i = 1; i < seen.length; i++) expect(seen[i], "progress never goes back: " + seen.join(",")).toBeGreaterThanOrEqual(seen[i - 1]);
    expect(seen[seen.length - 1]).toBe(100);
    expect(await page.evaluate(() => window.__running), "the header showed the import running").toBeGreaterThanOrEqual(1);
    await expect(page.getByTestId("ops-area")).toHaveAttribute("data-running", "0");

    // The result: counts per type, the C# index skipped by name, the
    // counters stored.
    const row = (t) => view.locator(`[data-testid=op-count][data-type=${t}]`);
    await expect(row("Documents").getByTestId("count-read")).toHaveText(n.toLocaleString("en-US"));
    await expect(row("Indexes").getByTestId("count-read")).toHaveText("1");
    await expect(row("Indexes").getByTestId("count-errors")).toHaveText("1");
    await expect(row("Identities").getByTestId("count-read")).toHaveText("1");
    await expect(row("Counters").getByTestId("count-read")).toHaveText("1");
    await expect(row("Counters")).not.toContainText("not stored yet");
    await expect(view.getByTestId("op-messages")).toHaveAttribute("open", "");
    await expect(view.locator("[data-testid=op-message][data-level=WARN]").filter({ hasText: "Patients/ByVisits" })).toHaveCount(1);
    await expect(view.locator("[data-testid=op-message][data-level=WARN]").filter({ hasText: "does not store them yet" })).toHaveCount(0);
    expect(await docCount(db)).toBe(45 + n);
    await shots(page, "smuggler");
  });
});

test.describe("server Import/Export page", () => {
  const dbs = [];
  test.afterEach(async () => {
    while (dbs.length) await deleteDatabase(dbs.pop());
  });

  test("exports two databases to a directory of dumps, lists them, imports them back", async ({ page }) => {
    for (const [prefix, n] of [["pwsrva", 12], ["pwsrvb", 7]]) {
      const name = uniqueName(prefix);
      dbs.push(name);
      await createDatabase(name);
      const docs = [];
      for (let i = 1; i <= n; i++) docs.push({ id: "items/" + i, body: { n: i, "@metadata": { "@collection": "Items" } } });
      await putDocs(name, docs);
    }
    const [a, b] = dbs;
    const dir = uniqueName("pwdumps");
    await page.goto(base() + "/studio/smuggler");
    await waitLive(page);
    // Only the two databases of this test (other specs' may be there).
    for (const box of await page.getByTestId("server-export-db").all()) {
      const v = await box.getAttribute("value");
      if (v !== a && v !== b) await box.uncheck();
    }
    await page.getByTestId("server-export-dir").fill(dir);
    await page.getByTestId("server-export-submit").click();
    await expect(page.getByTestId("flash")).toContainText("2 databases to " + dir);
    const op = page.locator("[data-testid=smuggler-op][data-kind='Server export']").first();
    await expect(op).toHaveAttribute("data-state", "completed", { timeout: 30_000 });
    await expect(op.locator(`[data-testid=op-part][data-db="${a}"]`)).toHaveAttribute("data-state", "completed");
    await expect(op.locator(`[data-testid=op-part][data-db="${a}"]`).getByTestId("part-docs")).toHaveText("12");
    await expect(op.locator(`[data-testid=op-part][data-db="${b}"]`).getByTestId("part-docs")).toHaveText("7");
    // The dumps, listed live.
    await expect(page.getByTestId("dump-name")).toHaveText([a, b].sort());
    await shots(page, "smuggler-server");

    // Back: both databases deleted, then imported from the directory.
    for (const d of [a, b]) await deleteDatabase(d);
    await until("the databases are gone", async () => (await api("GET", "/databases/" + a + "/stats")).status !== 200);
    await page.getByTestId("server-import-submit").click();
    await expect(page.getByTestId("flash")).toContainText("2 dumps from " + dir);
    const imp = page.locator("[data-testid=smuggler-op][data-kind='Server import']").first();
    await expect(imp).toHaveAttribute("data-state", "completed", { timeout: 30_000 });
    expect(await docCount(a)).toBe(12);
    expect(await docCount(b)).toBe(7);
  });
});
