"use strict";
const { test, expect } = require("@playwright/test");
const { api, base, uniqueName, createDatabase, deleteDatabase, putDocs, waitLive, shot } = require("./helpers");

// fillEditor replaces the document editor's text as typing would, once
// CodeMirror has replaced the textarea (a fill that raced the editor's
// start could leave text behind), and checks that the form holds it.
async function fillEditor(page, text) {
  const content = page.getByTestId("json-editor-content");
  await expect(content).toBeVisible();
  await content.click();
  await page.keyboard.press("ControlOrMeta+a");
  await page.keyboard.insertText(text);
  await expect(page.getByTestId("doc-editor")).toHaveValue(text);
}

// Every test here works in its own database.
let db;
test.beforeEach(async () => {
  db = uniqueName("pwdocs");
  await createDatabase(db);
});
test.afterEach(async () => {
  await deleteDatabase(db);
});

const docsURL = (q) => base() + "/studio/db/" + db + "/documents" + (q ? "?" + new URLSearchParams(q) : "");
const docURL = (id) => base() + "/studio/db/" + db + "/doc?id=" + encodeURIComponent(id);
const row = (page, id) => page.locator(`[data-testid=doc-row][data-id="${id.replace(/["\\]/g, "\\$&")}"]`);
const countOf = (page, collection) =>
  page.locator(`[data-testid=collection-link][data-collection="${collection}"] [data-testid=collection-count]`);

async function stored(id) {
  const r = await api("GET", "/databases/" + db + "/docs?id=" + encodeURIComponent(id));
  return r.status === 200 ? r.json.Results[0] : null;
}

async function rowIDs(page) {
  return page.getByTestId("doc-row").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-id")));
}

test.describe("documents", () => {
  test("documents written through the API appear live in the grid and the counts", async ({ page }) => {
    await putDocs(db, [{ id: "users/1", body: { name: "Ann", "@metadata": { "@collection": "Users" } } }]);
    await page.goto(docsURL());
    await expect(page.getByTestId("docs-title")).toHaveText("All documents");
    await expect(countOf(page, "")).toHaveText("1");
    await expect(page.locator('[data-testid=collection-link][data-collection=""]')).toHaveAttribute("aria-current", "page");
    await waitLive(page);

    await putDocs(db, [
      { id: "users/2", body: { name: "Bob", age: 40, "@metadata": { "@collection": "Users" } } },
      { id: "orders/1", body: { total: 10, lines: [{ p: 1 }], "@metadata": { "@collection": "Orders" } } },
    ]);
    // No reload: the grid and the counts follow.
    await expect(row(page, "orders/1")).toBeVisible();
    await expect(row(page, "users/2")).toBeVisible();
    await expect(countOf(page, "")).toHaveText("3");
    await expect(countOf(page, "Users")).toHaveText("2");
    await expect(countOf(page, "Orders")).toHaveText("1");
    // Newest first.
    expect((await rowIDs(page)).slice(0, 3)).toEqual(["orders/1", "users/2", "users/1"]);
    await shot(page, "documents");

    // Switch collection: only its rows, the link is highlighted, still live.
    await page.locator('[data-testid=collection-link][data-collection="Users"]').click();
    await expect(page).toHaveURL(/collection=Users/);
    await expect(page.locator('[data-testid=collection-link][data-collection="Users"]')).toHaveAttribute("aria-current", "page");
    await expect(page.getByTestId("doc-row")).toHaveCount(2);
    await waitLive(page);
    await putDocs(db, [{ id: "users/3", body: { name: "Cy", "@metadata": { "@collection": "Users" } } }]);
    await expect(row(page, "users/3")).toBeVisible();
    await expect(countOf(page, "Users")).toHaveText("3");
    await expect(page.getByTestId("documents-count")).toHaveText("3 documents");
    await expect(row(page, "orders/1")).toHaveCount(0);

    // The HiLo collection is listed like any other.
    await api("GET", "/databases/" + db + "/hilo/next?tag=users");
    await expect(countOf(page, "@hilo")).toHaveText("1");

    // An unknown collection is an empty grid with a note.
    await page.goto(docsURL({ collection: "Nope" }));
    await expect(page.getByTestId("unknown-collection")).toBeVisible();
  });

  test("a large collection pages newest first, by keyset, disjoint pages", async ({ page }) => {
    const docs = [];
    for (let i = 1; i <= 260; i++) {
      const id = "items/" + String(i).padStart(3, "0");
      docs.push({ id, body: { n: i, label: "item " + i, "@metadata": { "@collection": "Items" } } });
    }
    await putDocs(db, docs);
    await page.goto(docsURL({ collection: "Items" }));
    await expect(countOf(page, "Items")).toHaveText("260");

    const seen = [];
    for (let p = 0; p < 6; p++) {
      const ids = await rowIDs(page);
      expect(ids.length).toBe(p < 5 ? 50 : 10);
      seen.push(...ids);
      if (p === 1) await shot(page, "documents-page2");
      if (p < 5) {
        await expect(page.getByTestId("next-page")).toHaveAttribute("href", /before=\d+/);
        await page.getByTestId("next-page").click();
        await expect(page.getByTestId("first-page")).toBeVisible();
      }
    }
    await expect(page.getByTestId("next-page")).toHaveCount(0);
    expect(new Set(seen).size).toBe(260);
    const expected = docs.map((d) => d.id).reverse();
    expect(seen).toEqual(expected);

    // "Newest" goes back to the first page.
    await page.getByTestId("first-page").click();
    expect((await rowIDs(page))[0]).toBe("items/260");

    // The id-prefix filter pages in id order.
    await page.getByLabel("Id starts with").fill("items/1");
    await page.getByTestId("prefix-submit").click();
    await expect(page).toHaveURL(/prefix=items%2F1/);
    const first = await rowIDs(page);
    expect(first[0]).toBe("items/100");
    expect(first.length).toBe(50);
    await page.getByTestId("next-page").click();
    await expect(page).toHaveURL(/after=items%2F149/);
    const second = await rowIDs(page);
    expect(second[0]).toBe("items/150");
    expect(second[second.length - 1]).toBe("items/199");
  });

  test("edit and save a document; a conflicting edit is refused and keeps the text", async ({ page, context }) => {
    await putDocs(db, [{ id: "users/1", body: { name: "Ann", city: "Oslo", "@metadata": { "@collection": "Users" } } }]);
    await page.goto(docsURL({ collection: "Users" }));
    await page.getByTestId("doc-link").first().click();
    await expect(page.getByTestId("doc-id")).toHaveText("users/1");
    await expect(page.getByTestId("doc-json")).toContainText('"name": "Ann"');
    await expect(page.getByTestId("doc-collection")).toHaveText("Users");
    await expect(page.getByTestId("doc-cv")).toHaveText(/^A:\d+-/);
    await shot(page, "document");

    // The editor is CodeMirror (static/editor.js), named by the label; its
    // textarea stays in the form, hidden, and holds the text it posts.
    const text = await page.getByTestId("doc-editor").inputValue();
    expect(text).toContain('"@collection": "Users"');
    await fillEditor(page, text.replace('"Ann"', '"Annie"'));
    await page.getByTestId("doc-save").click();
    await expect(page.getByTestId("flash")).toHaveText("Saved.");
    await expect(page.getByTestId("doc-json")).toContainText('"name": "Annie"');
    expect((await stored("users/1")).name).toBe("Annie");
    expect((await stored("users/1"))["@metadata"]["@collection"]).toBe("Users");

    // Bad JSON: a readable error, the text kept, nothing saved.
    await fillEditor(page, '{"name": "broken",');
    await page.getByTestId("doc-save").click();
    await expect(page.getByTestId("doc-error")).toContainText("not a valid document");
    await expect(page.getByTestId("doc-editor")).toHaveValue('{"name": "broken",');
    expect((await stored("users/1")).name).toBe("Annie");

    // Two editors open the same version; the second save is refused.
    const a = await context.newPage();
    const b = await context.newPage();
    await a.goto(docURL("users/1"));
    await b.goto(docURL("users/1"));
    const textA = (await a.getByTestId("doc-editor").inputValue()).replace('"Annie"', '"First"');
    const textB = (await b.getByTestId("doc-editor").inputValue()).replace('"Annie"', '"Second"');
    await fillEditor(a, textA);
    await a.getByTestId("doc-save").click();
    await expect(a.getByTestId("flash")).toHaveText("Saved.");
    await fillEditor(b, textB);
    await b.getByTestId("doc-save").click();
    await expect(b.getByTestId("doc-error")).toContainText("changed by someone else since you opened it; reload to see their version");
    await expect(b.getByTestId("doc-editor")).toHaveValue(textB);
    await expect(b.getByTestId("doc-json")).toContainText('"name": "First"');
    await shot(b, "document-conflict");
    expect((await stored("users/1")).name).toBe("First");

    // Reloading shows their version and saving then works.
    await b.getByTestId("doc-reload").click();
    await expect(b.getByTestId("doc-editor")).toHaveValue(/"First"/);
    await fillEditor(b, (await b.getByTestId("doc-editor").inputValue()).replace('"First"', '"Second"'));
    await b.getByTestId("doc-save").click();
    await expect(b.getByTestId("flash")).toHaveText("Saved.");
    expect((await stored("users/1")).name).toBe("Second");
  });

  test("hostile ids, field names and values render inert", async ({ page }) => {
    const dialogs = [];
    page.on("dialog", async (d) => {
      dialogs.push(d.message());
      await d.dismiss();
    });
    const script = "<script>alert(1)</script>";
    const img = '"><img src=x onerror=alert(1)>';
    await putDocs(db, [
      { id: script, body: { [img]: script, nested: { [script]: img }, "@metadata": { "@collection": img } } },
    ]);
    await page.goto(docsURL());
    await waitLive(page);
    // One more arrives through the live fragment.
    await putDocs(db, [{ id: "x" + img, body: { v: img, "@metadata": { "@collection": script } } }]);
    await expect(row(page, "x" + img)).toBeVisible();

    const grid = page.getByTestId("documents-grid");
    await expect(grid.getByTestId("doc-link").filter({ hasText: script })).toBeVisible();
    await expect(grid.getByText(script, { exact: true }).first()).toBeVisible();
    await expect(page.getByTestId("collections-list").getByText(img, { exact: true })).toBeVisible();
    await expect(page.locator("img")).toHaveCount(0);
    await expect(page.locator("[onerror]")).toHaveCount(0);
    await expect(page.locator("main script")).toHaveCount(0);
    await shot(page, "documents-xss");

    await page.locator(`[data-testid=collection-link][data-collection="${img.replace(/"/g, '\\"')}"]`).click();
    await expect(page.getByTestId("docs-title")).toHaveText(img);
    await grid.getByTestId("doc-link").first().click();
    await expect(page.getByTestId("doc-id")).toHaveText(script);
    await expect(page.getByTestId("doc-json")).toContainText(img);
    await expect(page.getByTestId("doc-collection")).toHaveText(img);
    await expect(page.locator("img")).toHaveCount(0);
    await expect(page.locator("[onerror]")).toHaveCount(0);
    await shot(page, "document-xss");

    // Saving it back through the editor keeps it byte for byte.
    await page.getByTestId("doc-save").click();
    await expect(page.getByTestId("flash")).toHaveText("Saved.");
    const doc = await stored(script);
    expect(doc[img]).toBe(script);
    expect(doc["@metadata"]["@collection"]).toBe(img);
    expect(dialogs).toEqual([]);
  });

  test("delete a document and create new ones from the studio", async ({ page }) => {
    await putDocs(db, [
      { id: "notes/1", body: { text: "old", "@metadata": { "@collection": "Notes" } } },
      { id: "notes/keep", body: { text: "keep", "@metadata": { "@collection": "Notes" } } },
    ]);
    await page.goto(docURL("notes/1"));
    // Without the confirmation nothing happens (the browser asks for it).
    await page.getByTestId("doc-delete-open").click();
    await page.getByTestId("doc-delete").click();
    await expect(page).toHaveURL(/\/doc\?id=notes%2F1$/);
    await page.getByLabel("Yes, delete notes/1").check();
    await page.getByTestId("doc-delete").click();
    await expect(page).toHaveURL(/\/documents\?collection=Notes/);
    await expect(page.getByTestId("flash")).toHaveText("Deleted notes/1.");
    await expect(row(page, "notes/1")).toHaveCount(0);
    await expect(row(page, "notes/keep")).toBeVisible();
    await expect(countOf(page, "Notes")).toHaveText("1");
    expect(await stored("notes/1")).toBeNull();

    // New document, from the collection's page: id and collection prefilled.
    await page.getByTestId("new-doc").click();
    await expect(page.getByLabel("Document id")).toHaveValue("notes/");
    await expect(page.getByTestId("doc-editor")).toHaveValue(/"@collection": "Notes"/);
    await page.getByLabel("Document id").fill("notes/2");
    await fillEditor(page, '{"text": "fresh", "@metadata": {"@collection": "Notes"}}');
    await shot(page, "document-new");
    await page.getByTestId("doc-create").click();
    await expect(page.getByTestId("flash")).toHaveText("Created notes/2.");
    await expect(page.getByTestId("doc-id")).toHaveText("notes/2");
    expect((await stored("notes/2")).text).toBe("fresh");

    // An existing id is refused, the text kept.
    await page.goto(base() + "/studio/db/" + db + "/doc/new");
    await page.getByLabel("Document id").fill("NOTES/2");
    await fillEditor(page, '{"text": "clobber", "@metadata": {"@collection": "Notes"}}');
    await page.getByTestId("doc-create").click();
    await expect(page.getByTestId("doc-error")).toContainText("already exists");
    await expect(page.getByTestId("doc-editor")).toHaveValue(/clobber/);
    expect((await stored("notes/2")).text).toBe("fresh");

    // An identity id takes the next free number; it never overwrites notes/2.
    await page.getByLabel("Document id").fill("notes|");
    await page.getByTestId("doc-create").click();
    await expect(page.getByTestId("flash")).toHaveText(/^Created notes\/\d+\.$/);
    const id = await page.getByTestId("doc-id").textContent();
    expect(id).not.toBe("notes/2");
    expect((await stored(id)).text).toBe("clobber");
    expect((await stored("notes/2")).text).toBe("fresh");
  });
});
