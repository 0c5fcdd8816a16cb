"use strict";
const { test, expect } = require("@playwright/test");
const { base, uniqueName, putDocs, waitLive, shot } = require("./helpers");

test.describe("databases and dashboard", () => {
  test("create a database from the studio, see it live elsewhere, delete it by typing its name", async ({ page, browser }) => {
    const name = uniqueName("pwdb");
    // A second browser watches the dashboard while the first one acts.
    const other = await browser.newContext();
    const watcher = await other.newPage();
    await watcher.goto(base() + "/studio/");
    await waitLive(watcher);
    const before = Number(await watcher.getByTestId("dash-databases").textContent());

    await page.goto(base() + "/");
    await expect(page).toHaveURL(/\/studio\/$/);
    await page.getByTestId("nav-databases").click();
    await page.getByLabel("Name").fill(name);
    await page.getByTestId("create-db-submit").click();
    await expect(page.getByTestId("flash")).toContainText("created");
    const row = page.locator(`[data-testid=database-row][data-db="${name}"]`);
    await expect(row).toBeVisible();
    await expect(row.getByTestId("database-docs")).toHaveText("0");

    // The other browser's dashboard counts it within a second or two, without a reload.
    await expect(watcher.getByTestId("dash-databases")).toHaveText(String(before + 1));

    // Documents written through the API show up live in the count.
    await waitLive(page);
    await putDocs(name, [
      { id: "a/1", body: { n: 1, "@metadata": { "@collection": "As" } } },
      { id: "a/2", body: { n: 2, "@metadata": { "@collection": "As" } } },
    ]);
    await expect(row.getByTestId("database-docs")).toHaveText("2");
    await shot(page, "databases");
    await shot(watcher, "dashboard");

    // A wrong confirmation deletes nothing. The confirmation stays open
    // while live updates re-render the table around it.
    await row.getByTestId("database-delete-open").click();
    const updates = Number(await page.locator("body").getAttribute("data-live-updates"));
    await expect.poll(async () => Number(await page.locator("body").getAttribute("data-live-updates")), { timeout: 10000 }).toBeGreaterThan(updates + 1);
    await expect(row.getByTestId("database-delete-confirm")).toBeVisible();
    await row.getByTestId("database-delete-confirm").fill(name + "x");
    await row.getByTestId("database-delete-submit").click();
    await expect(page.getByTestId("flash-error")).toContainText("nothing was deleted");
    await expect(page.locator(`[data-testid=database-row][data-db="${name}"]`)).toBeVisible();

    const row2 = page.locator(`[data-testid=database-row][data-db="${name}"]`);
    await row2.getByTestId("database-delete-open").click();
    await row2.getByTestId("database-delete-confirm").fill(name);
    await row2.getByTestId("database-delete-submit").click();
    await expect(page.getByTestId("flash")).toContainText("deleted");
    await expect(page.locator(`[data-testid=database-row][data-db="${name}"]`)).toHaveCount(0);
    await expect(watcher.getByTestId("dash-databases")).toHaveText(String(before));
    await other.close();
  });

  test("a cross-site POST is refused", async ({ request }) => {
    const r = await request.post(base() + "/studio/databases", {
      form: { name: "evil" },
      headers: { Origin: "http://evil.example" },
    });
    expect(r.status()).toBe(403);
    const list = await request.get(base() + "/databases?namesOnly=true");
    expect((await list.json()).Databases).not.toContain("evil");
  });
});
