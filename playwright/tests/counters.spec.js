// Counters on the document page (issue 15): the list with each node's part,
// incrementing and deleting through the page's POST forms, and a counter
// written through the API showing up after a reload.
"use strict";
const { test, expect } = require("@playwright/test");
const { api, base, uniqueName, createDatabase, deleteDatabase, putDocs } = require("./helpers");

let db;
test.beforeEach(async () => {
  db = uniqueName("pwcounters");
  await createDatabase(db);
});
test.afterEach(async () => {
  await deleteDatabase(db);
});

const docURL = (id) => base() + "/studio/db/" + db + "/doc?id=" + encodeURIComponent(id);
const row = (page, name) => page.locator(`[data-testid=doc-counter-row][data-counter="${name}"]`);

async function increment(id, name, delta) {
  const r = await api("POST", "/databases/" + db + "/bulk_docs", {
    Commands: [{ Type: "Counters", Id: id, Counters: { DocumentId: id, Operations: [{ Type: "Increment", CounterName: name, Delta: delta }] } }],
  });
  if (r.status !== 201) throw new Error("increment: " + r.status + " " + r.text);
}

async function counters(id) {
  const r = await api("GET", "/databases/" + db + "/counters?docId=" + encodeURIComponent(id));
  return Object.fromEntries(r.json.Counters.map((c) => [c.CounterName, c.TotalValue]));
}

test.describe("counters", () => {
  test("the document page lists, increments and deletes counters", async ({ page }) => {
    await putDocs(db, [{ id: "posts/1", body: { title: "<b>hi</b>", "@metadata": { "@collection": "Posts" } } }]);
    await page.goto(docURL("posts/1"));
    await expect(page.getByTestId("doc-counters-none")).toBeVisible();

    await increment("posts/1", "Likes", 5);
    await page.reload();
    await expect(row(page, "Likes").getByTestId("doc-counter-value")).toHaveText("5");
    await expect(row(page, "Likes").getByTestId("doc-counter-part")).toHaveText("A: 5");
    await expect(row(page, "Likes").getByTestId("doc-counter-part")).toHaveAttribute("data-node", "A");

    // Increment through the form: an existing counter (any case) and a new one.
    await page.getByTestId("doc-counter-name-input").fill("likes");
    await page.getByTestId("doc-counter-delta-input").fill("-2");
    await page.getByTestId("doc-counter-increment").click();
    await expect(page.getByTestId("flash")).toHaveText("Counter likes is now 3.");
    await expect(row(page, "Likes").getByTestId("doc-counter-value")).toHaveText("3");

    await page.getByTestId("doc-counter-name-input").fill("<script>x</script>");
    await page.getByTestId("doc-counter-increment").click();
    await expect(row(page, "<script>x</script>").getByTestId("doc-counter-name")).toHaveText("<script>x</script>");
    expect(await counters("posts/1")).toEqual({ Likes: 3, "<script>x</script>": 1 });

    // A bad amount changes nothing.
    await page.getByTestId("doc-counter-name-input").fill("Likes");
    await page.getByTestId("doc-counter-delta-input").evaluate((el) => { el.type = "text"; el.value = "1.5"; });
    await page.getByTestId("doc-counter-increment").click();
    await expect(page.getByTestId("flash-error")).toContainText("whole number");
    expect((await counters("posts/1")).Likes).toBe(3);

    // Delete.
    await row(page, "Likes").getByTestId("doc-counter-delete").click();
    await expect(page.getByTestId("flash")).toHaveText("Deleted counter Likes.");
    await expect(row(page, "Likes")).toHaveCount(0);
    expect(await counters("posts/1")).toEqual({ "<script>x</script>": 1 });

    // The document's metadata lists the counters left.
    const r = await api("GET", "/databases/" + db + "/docs?id=posts/1");
    expect(r.json.Results[0]["@metadata"]["@counters"]).toEqual(["<script>x</script>"]);
  });
});
