// The Query, Indexes and index pages, over documents written through the
// API: a dynamic query run on the Query page creates an auto index (the
// page says so), the Indexes page lists it with its progress, a JavaScript
// index with load() created through the API shows its reference figures,
// renaming the referenced document moves the re-mapped count without a
// reload, and the index is disabled, enabled and deleted from its page.
"use strict";
const { test, expect } = require("@playwright/test");
const { api, base, uniqueName, createDatabase, deleteDatabase, putDocs, waitLive, shot } = require("./helpers");

const db = uniqueName("idx");
const jsIndex = "Pets/ByOwnerName";

test.beforeAll(async () => {
  await createDatabase(db);
  const docs = [{ id: "people/1", body: { Name: "Ann", "@metadata": { "@collection": "People" } } }];
  for (let i = 1; i <= 20; i++) {
    docs.push({ id: "pets/" + i, body: { Name: i === 3 ? "Rex" : "Pet " + i, Owner: "people/1", "@metadata": { "@collection": "Pets" } } });
  }
  await putDocs(db, docs);
});

test.afterAll(async () => {
  await deleteDatabase(db);
});

test("a dynamic query on the Query page creates an auto index; the Indexes page shows it", async ({ page }) => {
  await page.goto(base() + "/studio/db/" + db + "/documents");
  await page.getByTestId("nav-query").click();
  await expect(page).toHaveURL(new RegExp("/studio/db/" + db + "/query$"));
  await expect(page.getByTestId("query-node")).toHaveText("A");

  await page.getByTestId("query-text").fill("from Pets where Name = $name");
  await page.getByTestId("query-params").fill('{"name": "Rex"}');
  await page.getByTestId("query-run").click();
  await expect(page.getByTestId("query-plan")).toHaveAttribute("data-kind", "created");
  await expect(page.getByTestId("query-index")).toHaveText("Auto/Pets/ByName");
  await expect(page.getByTestId("query-total")).toHaveAttribute("data-value", "1");
  await expect(page.getByTestId("query-row")).toHaveCount(1);
  await expect(page.getByTestId("query-row").first()).toHaveAttribute("data-id", "pets/3");
  // What was typed stays in the editor.
  await expect(page.getByTestId("query-text")).toHaveValue("from Pets where Name = $name");
  await shot(page, "query-created");

  // Run again: the index is reused.
  await page.getByTestId("query-run").click();
  await expect(page.getByTestId("query-plan")).toHaveAttribute("data-kind", "reused");

  // A syntax error says where, and creates nothing.
  await page.getByTestId("query-text").fill("from Pets where Age >");
  await page.getByTestId("query-params").fill("");
  await page.getByTestId("query-run").click();
  await expect(page.getByTestId("query-error")).toContainText("position");
  const list = await api("GET", "/databases/" + db + "/indexes");
  expect(list.status).toBe(200);
  expect(list.json.Results.map((d) => d.Name)).toEqual(["Auto/Pets/ByName"]);

  await page.getByTestId("nav-indexes").click();
  await waitLive(page);
  const row = page.getByTestId("index-row-Auto/Pets/ByName");
  await expect(row).toHaveAttribute("data-state", "Normal");
  await expect(row).toHaveAttribute("data-type", "AutoMap");
  const progress = page.getByTestId("index-progress-Auto/Pets/ByName-Pets");
  await expect(progress).toHaveAttribute("data-lag", "0");
  const processed = await progress.getAttribute("data-processed");
  expect(Number(processed)).toBeGreaterThan(0);
  await expect(progress).toHaveAttribute("data-last", processed);
  await expect(page.getByTestId("index-entries-Auto/Pets/ByName")).toHaveAttribute("data-value", "20");
  await expect(page.getByTestId("index-cleanup-Auto/Pets/ByName")).toHaveAttribute("data-action", "idle");
  await expect(page.getByTestId("index-last-query-Auto/Pets/ByName")).not.toHaveText("never");
  await expect(page.getByTestId("indexes-node")).toHaveText("A");

  // New documents move the progress bar without a reload.
  const lastBefore = Number(await progress.getAttribute("data-last"));
  await putDocs(db, [{ id: "pets/21", body: { Name: "Late", Owner: "people/1", "@metadata": { "@collection": "Pets" } } }]);
  await expect(page.getByTestId("index-entries-Auto/Pets/ByName")).toHaveAttribute("data-value", "21");
  expect(Number(await progress.getAttribute("data-last"))).toBeGreaterThan(lastBefore);
  await shot(page, "indexes-auto");
});

test("a load() index shows its reference cost, re-maps on a rename, and is disabled, enabled and deleted from its page", async ({ page }) => {
  const put = await api("PUT", "/databases/" + db + "/indexes", {
    Indexes: [{ Name: jsIndex, Maps: ["map('Pets', p => ({ Name: p.Name, OwnerName: load(p.Owner, 'People').Name }))"] }],
  });
  expect(put.status, put.text).toBe(201);

  await page.goto(base() + "/studio/db/" + db + "/indexes");
  await waitLive(page);
  const row = page.getByTestId("index-row-" + jsIndex);
  await expect(row).toHaveAttribute("data-type", "JavaScriptMap");
  await expect(page.getByTestId("index-cleanup-" + jsIndex)).toHaveAttribute("data-action", "never");
  await expect(page.getByTestId("index-ref-" + jsIndex + "-People")).toHaveAttribute("data-referenced", "People");

  await page.getByTestId("index-link-" + jsIndex).click();
  await expect(page.getByTestId("index-name")).toHaveText(jsIndex);
  await waitLive(page);
  await expect(page.getByTestId("index-type")).toHaveText("JavaScriptMap");
  await expect(page.getByTestId("index-map")).toContainText("load(p.Owner, 'People')");
  await expect(page.getByTestId("index-references-held")).toHaveAttribute("data-value", "21");
  await expect(page.getByTestId("index-ref-remapped-People")).toHaveAttribute("data-value", "0");
  const etagBefore = Number(await page.getByTestId("index-ref-etag-People").textContent());

  // Rename the owner: the index re-maps its 21 pets, and the page shows it live.
  await putDocs(db, [{ id: "people/1", body: { Name: "Anna", "@metadata": { "@collection": "People" } } }]);
  await expect(page.getByTestId("index-ref-remapped-People")).toHaveAttribute("data-value", "21");
  expect(Number(await page.getByTestId("index-ref-etag-People").textContent())).toBeGreaterThan(etagBefore);
  const q = await api("POST", "/databases/" + db + "/queries", { Query: "from index '" + jsIndex + "' where OwnerName = 'Anna'", WaitForNonStaleResults: true });
  expect(q.status, q.text).toBe(200);
  expect(q.json.TotalResults).toBe(21);
  await shot(page, "index-references");

  // Typing a confirmation is not disturbed by the live updates.
  await page.getByTestId("index-delete-open").click();
  await page.getByTestId("index-delete-confirm").fill("Pets/");
  const updates = Number((await page.locator("body").getAttribute("data-live-updates")) || "0");
  await expect.poll(async () => Number((await page.locator("body").getAttribute("data-live-updates")) || "0")).toBeGreaterThan(updates + 1);
  await expect(page.getByTestId("index-delete-confirm")).toHaveValue("Pets/");
  await expect(page.getByTestId("index-delete-confirm")).toBeFocused();

  await page.getByTestId("index-disable").click();
  await expect(page.getByTestId("flash")).toContainText("disabled on every node");
  await expect(page.getByTestId("index-state")).toHaveAttribute("data-state", "Disabled");
  let stats = await api("GET", "/databases/" + db + "/indexes/stats?name=" + encodeURIComponent(jsIndex));
  expect(stats.json.Results[0].State).toBe("Disabled");

  await page.getByTestId("index-enable").click();
  await expect(page.getByTestId("flash")).toContainText("enabled on every node");
  await expect(page.getByTestId("index-state")).toHaveAttribute("data-state", "Normal");

  // A wrong confirmation deletes nothing; the right one deletes everywhere.
  await page.getByTestId("index-delete-open").click();
  await page.getByTestId("index-delete-confirm").fill("pets/byownername");
  await page.getByTestId("index-delete").click();
  await expect(page.getByTestId("flash-error")).toContainText("Type the index name exactly");
  await page.getByTestId("index-delete-open").click();
  await page.getByTestId("index-delete-confirm").fill(jsIndex);
  await page.getByTestId("index-delete").click();
  await expect(page.getByTestId("flash")).toContainText("deleted on every node");
  await expect(page).toHaveURL(new RegExp("/studio/db/" + db + "/indexes"));
  await expect(page.getByTestId("index-row-" + jsIndex)).toHaveCount(0);
  const names = await api("GET", "/databases/" + db + "/indexes");
  expect(names.json.Results.map((d) => d.Name)).toEqual(["Auto/Pets/ByName"]);

  // The index log shows the studio's decisions.
  await expect(page.getByTestId("index-log-entry").filter({ hasText: jsIndex }).first()).toBeVisible();
  await shot(page, "indexes-after-delete");
});
