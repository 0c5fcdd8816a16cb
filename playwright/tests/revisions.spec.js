"use strict";
const { test, expect } = require("@playwright/test");
const { base, api, uniqueName, createDatabase, deleteDatabase } = require("./helpers");

// A document's revisions page: the list (time and change vector, newest
// first), a line comparison of two revisions, and a revert (POST form).
test.describe("revisions page", () => {
  let db;
  test.beforeEach(async () => {
    db = uniqueName("pwrev");
    await createDatabase(db);
    const r = await api("POST", "/databases/" + db + "/admin/revisions/config", { Default: { MinimumRevisionsToKeep: 10 } });
    expect(r.status).toBe(200);
    for (let v = 1; v <= 3; v++) {
      const p = await api("PUT", "/databases/" + db + "/docs?id=users/1", { Name: "v" + v, Keep: "same", "@metadata": { "@collection": "Users" } });
      expect(p.status).toBe(201);
    }
  });
  test.afterEach(async () => {
    await deleteDatabase(db);
  });

  test("lists, compares and reverts", async ({ page }) => {
    await page.goto(base() + "/studio/db/" + db + "/doc?id=users/1");
    await page.getByTestId("doc-revisions-link").click();
    await expect(page.getByTestId("rev-doc-id")).toHaveText("users/1");
    const rows = page.getByTestId("rev-row");
    await expect(rows).toHaveCount(3);
    await expect(page.getByTestId("rev-count")).toContainText("of 3");
    // Newest first; the newest is the current document.
    await expect(rows.nth(0)).toHaveAttribute("data-current", "true");
    const cvs = await rows.evaluateAll((rs) => rs.map((r) => r.getAttribute("data-cv")));
    for (const cv of cvs) {
      expect(cv).toMatch(/^A:\d+-/);
    }
    await expect(rows.nth(0).getByTestId("rev-cv")).toHaveText(cvs[0]);
    await expect(rows.nth(0).getByTestId("rev-time")).not.toBeEmpty();

    // Compare the oldest (A) with the newest (B): one line removed, one added.
    await rows.nth(2).getByTestId("rev-pick-a").check();
    await rows.nth(0).getByTestId("rev-pick-b").check();
    await page.getByTestId("rev-compare").click();
    await expect(page.getByTestId("rev-diff")).toBeVisible();
    await expect(page.locator('[data-testid=rev-diff-line][data-op="-"]')).toHaveText([/"Name": "v1"/]);
    await expect(page.locator('[data-testid=rev-diff-line][data-op="+"]')).toHaveText([/"Name": "v3"/]);
    await expect(page.locator('[data-testid=rev-diff-line][data-op="="]').filter({ hasText: '"Keep": "same"' })).toHaveCount(1);

    // Revert to the oldest: the document is v1 again, and a new revision is listed.
    await page.getByTestId("rev-revert-open").click();
    await page.locator(`[data-testid=rev-revert][data-cv="${cvs[2]}"]`).click();
    await expect(page.getByTestId("doc-id")).toHaveText("users/1");
    await expect(page.getByTestId("doc-json")).toContainText('"v1"');
    const doc = await api("GET", "/databases/" + db + "/docs?id=users/1");
    expect(doc.json.Results[0].Name).toBe("v1");
    await page.getByTestId("doc-revisions-link").click();
    await expect(page.getByTestId("rev-row")).toHaveCount(4);
    await expect(page.getByTestId("rev-row").nth(0)).toHaveAttribute("data-current", "true");
  });

  test("document content is shown escaped", async ({ page }) => {
    await api("PUT", "/databases/" + db + "/docs?id=users/1", { Name: "<img src=x onerror=alert(1)>", "@metadata": { "@collection": "Users" } });
    await page.goto(base() + "/studio/db/" + db + "/revisions?id=users/1");
    const rows = page.getByTestId("rev-row");
    await expect(rows).toHaveCount(4);
    await rows.nth(1).getByTestId("rev-pick-a").check();
    await rows.nth(0).getByTestId("rev-pick-b").check();
    await page.getByTestId("rev-compare").click();
    await expect(page.locator('[data-testid=rev-diff-line][data-op="+"]')).toContainText(["<img src=x onerror=alert(1)>"]);
    await expect(page.locator("#rev-diff img, [data-testid=rev-diff] img")).toHaveCount(0);
  });
});
