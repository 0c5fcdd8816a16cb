// The document editor (issue 12, point 9, and the document page's side of
// point 4) on a real three-node cluster: CodeMirror with errors at line and
// column, ids inside documents as links, a concurrent change announced on
// the open page without touching the typed text, and a conflicted id's page
// leading to its resolution.
"use strict";
const { test, expect } = require("@playwright/test");
const { Cluster } = require("./cluster3");
const { waitLive, shot, until } = require("./helpers");

const cluster = new Cluster("editor");
const DB = "pweditor";

function docURL(tag, id) {
  return cluster.nodes[tag].url + "/studio/db/" + DB + "/doc?id=" + encodeURIComponent(id);
}

async function put(tag, id, body) {
  const r = await cluster.api(tag, "PUT", "/databases/" + DB + "/docs?id=" + encodeURIComponent(id), body);
  if (r.status !== 201) throw new Error("put " + id + " on " + tag + ": " + r.status + " " + JSON.stringify(r.body));
  return r.body;
}

async function stored(tag, id) {
  const r = await cluster.api(tag, "GET", "/databases/" + DB + "/docs?id=" + encodeURIComponent(id));
  return r.status === 200 ? r.body.Results[0] : null;
}

// editorText is what the editor holds (the hidden textarea is kept equal).
async function editorText(page) {
  return page.locator(".cm-content").evaluate((el) => window.RookeryCM.EditorView.findFromDOM(el).state.doc.toString());
}

// setEditor replaces the editor's text as typing would.
async function setEditor(page, text) {
  const content = page.getByTestId("json-editor-content");
  await content.click();
  await page.keyboard.press("ControlOrMeta+a");
  await page.keyboard.insertText(text);
}

async function shots(page, name) {
  await page.setViewportSize({ width: 1440, height: 900 });
  await shot(page, name + "-1440");
  await page.setViewportSize({ width: 390, height: 844 });
  // The page's own content never makes main scroll sideways (the frame
  // around it, sidebar included, is the layout's).
  await expect.poll(() => page.evaluate(() => {
    const m = document.querySelector("main");
    return m.scrollWidth <= m.clientWidth + 1;
  })).toBe(true);
  await shot(page, name + "-390");
  await page.setViewportSize({ width: 1280, height: 800 });
}

test.describe.serial("the document editor on a three-node cluster", () => {
  test.beforeAll(async () => {
    test.setTimeout(180_000);
    await cluster.start();
    await cluster.createDatabase(DB);
    await put("A", "companies/1-A", { Name: "Acme", "@metadata": { "@collection": "Companies" } });
    await put("A", "orders/1-A", {
      Company: "companies/1-A",
      Employee: "employees/404-A",
      Note: "ships to companies/1-A soon",
      Lines: [{ Product: "products/9-A", Qty: 2 }],
      "@metadata": { "@collection": "Orders" },
    });
    for (const tag of ["B", "C"]) {
      await until("orders on " + tag, async () => (await stored(tag, "orders/1-A")) !== null);
    }
  });
  test.afterAll(async () => {
    await cluster.stop();
  });

  test("the editor is CodeMirror; a syntax error shows its line and column, in the editor and from the server", async ({ page }) => {
    const errors = [];
    page.on("console", (m) => {
      // A refused save answers 400 on purpose (and the favicon is the layout's).
      if (m.type() === "error" && !/Failed to load resource/.test(m.text())) errors.push(m.text());
    });
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(docURL("B", "orders/1-A"));
    await expect(page.getByTestId("json-editor")).toBeVisible();
    await expect(page.locator(".cm-lineNumbers")).toBeVisible();
    await expect(page.getByTestId("doc-editor")).toBeHidden();
    // The editor is named by the form's label and is monospace.
    await expect(page.getByLabel("Document JSON")).toHaveAttribute("data-testid", "json-editor-content");
    const font = await page.locator(".cm-scroller").evaluate((el) => getComputedStyle(el).fontFamily);
    expect(font).toMatch(/mono/i);
    expect(await editorText(page)).toContain('"Company": "companies/1-A"');

    // Line 3 misses its comma.
    const bad = '{\n  "Company": "companies/1-A",\n  "Qty": 2\n  "Note": "x",\n  "@metadata": {"@collection": "Orders"}\n}';
    await setEditor(page, bad);
    await expect(page.getByTestId("editor-status")).toHaveText("Line 4, column 3: Expected ',' or '}' after the member's value");
    await expect(page.locator(".cm-lint-marker-error")).toBeVisible();
    await expect(page.getByTestId("doc-editor")).toHaveValue(bad); // the form posts the editor's text
    await shots(page, "editor-error");

    // Saved anyway (the page works without the client-side check): the
    // server refuses it with line and column, keeps the text, and puts the
    // cursor there.
    await page.getByTestId("doc-save").click();
    await expect(page.getByTestId("doc-error")).toContainText("This is not a valid document: line 4, column 3:");
    await expect(page.getByTestId("doc-error")).toHaveAttribute("data-line", "4");
    expect(await editorText(page)).toBe(bad);
    const cursorLine = await page.locator(".cm-content").evaluate((el) => {
      const v = window.RookeryCM.EditorView.findFromDOM(el);
      return v.state.doc.lineAt(v.state.selection.main.head).number;
    });
    expect(cursorLine).toBe(4);
    expect((await stored("A", "orders/1-A")).Employee).toBe("employees/404-A");

    // Fixing it clears the error, and the save goes through.
    await setEditor(page, bad.replace('"Qty": 2\n', '"Qty": 2,\n'));
    await expect(page.getByTestId("editor-status")).toHaveText("");
    await page.getByTestId("doc-save").click();
    await expect(page.getByTestId("flash")).toHaveText("Saved.");
    await until("saved on A", async () => ((await stored("A", "orders/1-A")) || {}).Qty === 2);
    expect(errors).toEqual([]); // no CSP refusal, no script error
  });

  test("ids inside a document are links to the documents they name", async ({ page }) => {
    await put("A", "orders/1-A", {
      Company: "companies/1-A",
      Employee: "employees/404-A",
      Lines: [{ Product: "COMPANIES/1-A", Qty: 1 }],
      "@metadata": { "@collection": "Orders" },
    });
    await until("on C", async () => ((await stored("C", "orders/1-A")) || {}).Lines !== undefined);
    await page.goto(docURL("C", "orders/1-A"));
    const refs = page.getByTestId("doc-ref");
    // Only strings that name stored documents; each id once, at its first place.
    await expect(refs).toHaveCount(1);
    await expect(refs.first()).toHaveText("companies/1-A");
    await expect(page.getByTestId("doc-ref-path")).toHaveText("/Company");
    // In the editor: both spellings are marked, each with a link.
    await expect(page.getByTestId("editor-ref-link")).toHaveCount(2);
    await shots(page, "editor-references");
    await page.getByTestId("editor-ref-link").first().click();
    await expect(page.getByTestId("doc-id")).toHaveText("companies/1-A");
    await page.goBack();
    await page.getByTestId("doc-ref").click();
    await expect(page.getByTestId("doc-id")).toHaveText("companies/1-A");
    await expect(page.getByTestId("doc-collection")).toHaveText("Companies");
  });

  test("a change on the server is announced on the open page; the typed text stays and a stale save is refused", async ({ page }) => {
    await page.goto(docURL("B", "companies/1-A"));
    await waitLive(page);
    await expect(page.getByTestId("doc-changed")).toBeHidden();
    const typed = '{\n  "Name": "Acme (typed on B)",\n  "@metadata": {\n    "@collection": "Companies"\n  }\n}';
    await setEditor(page, typed);
    await page.keyboard.press("ArrowUp"); // the cursor somewhere in the text

    // Someone writes the document on another node.
    await put("C", "companies/1-A", { Name: "Acme Ltd", City: "Oslo", "@metadata": { "@collection": "Companies" } });
    const notice = page.getByTestId("doc-changed");
    await expect(notice).toContainText("This document was changed on the server");
    await expect(notice).toHaveAttribute("role", "status");
    expect(await editorText(page)).toBe(typed);
    await expect(page.getByTestId("json-editor-content")).toBeFocused(); // focus stayed in the editor
    await shots(page, "editor-changed");

    // Compare: the server's version next to the typed text.
    await notice.getByTestId("doc-changed-compare").click();
    await expect(page.getByTestId("doc-merge")).toBeVisible();
    await expect(page.getByTestId("doc-merge")).toContainText("Acme Ltd");
    await expect(page.getByTestId("doc-merge")).toContainText("typed on B");
    await page.getByTestId("doc-compare-close").click();

    // Saving the stale version is refused and loses nothing.
    await page.getByTestId("doc-save").click();
    await expect(page.getByTestId("doc-error")).toContainText("changed by someone else since you opened it");
    expect(await editorText(page)).toBe(typed);
    expect((await stored("C", "companies/1-A")).Name).toBe("Acme Ltd");

    // Compare again and keep the typed text on purpose: now it saves.
    await waitLive(page);
    await page.getByTestId("doc-changed-compare").click();
    await page.getByTestId("doc-compare-keep").click();
    await expect(page.getByTestId("doc-changed")).toBeHidden();
    await page.getByTestId("doc-save").click();
    await expect(page.getByTestId("flash")).toHaveText("Saved.");
    await until("typed text on C", async () => ((await stored("C", "companies/1-A")) || {}).Name === "Acme (typed on B)");
  });

  test("a conflicted id's page shows a banner that leads to its resolution", async ({ page }) => {
    test.setTimeout(180_000); // a real conflict: nodes stopped and started again
    const id = "orders/77-A";
    // Keep conflicts for a person (the default resolves them on arrival).
    const s = await cluster.api("A", "POST", "/admin/replication/conflicts/solver?name=" + DB, { ResolveToLatest: false });
    expect(s.status).toBeLessThan(300);
    for (const tag of ["B", "C"]) {
      await until("manual solver on " + tag, async () => {
        const r = await cluster.api(tag, "GET", "/databases/" + DB + "/replication/conflicts/solver");
        return r.status === 200 && r.body && r.body.ResolveToLatest === false;
      });
    }
    // The same id written on A while B is down, and on B while A and C
    // are down: when all run again the two versions meet.
    await cluster.kill9("B");
    await put("A", id, { By: "A", Total: 10, "@metadata": { "@collection": "Orders" } });
    await until(id + " on C", async () => (await stored("C", id)) !== null);
    await cluster.kill9("A");
    await cluster.kill9("C");
    cluster.startNode("B");
    await until("B serves " + DB, async () => (await cluster.api("B", "GET", "/databases/" + DB + "/stats")).status === 200, 60_000);
    await put("B", id, { By: "B", Total: 20, "@metadata": { "@collection": "Orders" } });
    cluster.startNode("A");
    cluster.startNode("C");
    for (const tag of ["A", "B", "C"]) await cluster.ready(tag);
    // Loading a conflicted id answers 409.
    await until(id + " in conflict on A", async () => (await cluster.api("A", "GET", "/databases/" + DB + "/docs?id=" + encodeURIComponent(id))).status === 409, 60_000);

    await page.goto(docURL("A", id));
    const banner = page.getByTestId("doc-conflict-banner");
    await expect(banner).toContainText("This document is in conflict.");
    await expect(banner).toContainText("2 versions");
    await expect(page.locator("main")).not.toContainText("may have been deleted");
    await expect(page.getByTestId("doc-gone")).toHaveCount(0);
    await waitLive(page);
    await expect(page.getByTestId("doc-changed")).toBeHidden(); // nothing changed since the page loaded
    await shots(page, "editor-conflicted");
    await page.getByTestId("doc-conflict-link").click();
    await expect(page).toHaveURL(/\/conflicts\/doc\?id=orders%2F77-A/);
    await expect(page.getByTestId("conflict-id")).toHaveText(id);
  });
});
