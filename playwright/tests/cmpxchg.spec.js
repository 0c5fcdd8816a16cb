"use strict";
const { test, expect } = require("@playwright/test");
const { api, base, uniqueName, createDatabase, deleteDatabase } = require("./helpers");

test.describe("Compare Exchange page", () => {
  let db;
  test.beforeEach(async () => {
    db = uniqueName("pwcx");
    await createDatabase(db);
    for (const [k, v] of [["emails/a", { User: "users/1" }], ["emails/b", { User: "<b>users/2</b>" }], ["seats/12A", "alice"]]) {
      const r = await api("PUT", "/databases/" + db + "/cmpxchg?key=" + encodeURIComponent(k) + "&index=0", { Object: v });
      expect(r.status).toBe(200);
    }
  });
  test.afterEach(async () => {
    await deleteDatabase(db);
  });

  test("list, filter, add, edit with the index, a stale edit refused, delete", async ({ page }) => {
    await page.goto(base() + "/studio/db/" + db + "/documents");
    await page.getByTestId("nav-cmpxchg").click();
    await expect(page).toHaveURL(/\/cmpxchg$/);
    const row = (k) => page.locator(`[data-testid=cmpxchg-row][data-key="${k}"]`);
    await expect(page.getByTestId("cmpxchg-row")).toHaveCount(3);
    // Untrusted content is shown as text.
    await expect(row("emails/b").getByTestId("cmpxchg-value")).toContainText("<b>users/2</b>");

    // Filter by prefix.
    await page.getByLabel("Key starts with").fill("emails/");
    await page.getByTestId("cmpxchg-filter-submit").click();
    await expect(page.getByTestId("cmpxchg-key")).toHaveText(["emails/a", "emails/b"]);
    await page.getByTestId("cmpxchg-filter-clear").click();
    await expect(page.getByTestId("cmpxchg-row")).toHaveCount(3);

    // Add a key (index 0).
    await page.getByTestId("cmpxchg-form-key").fill("locks/x");
    await page.getByTestId("cmpxchg-form-value").fill('{"Owner":"B"}');
    await page.getByTestId("cmpxchg-form-submit").click();
    await expect(page.getByTestId("flash")).toContainText("locks/x saved at index");
    await expect(row("locks/x").getByTestId("cmpxchg-value")).toContainText('"Owner":"B"');

    // Edit with the current index.
    await row("seats/12A").getByTestId("cmpxchg-edit").click();
    await expect(page.getByTestId("cmpxchg-form-key")).toHaveValue("seats/12A");
    const index = await page.getByTestId("cmpxchg-form-index").inputValue();
    expect(Number(index)).toBeGreaterThan(0);
    await page.getByTestId("cmpxchg-form-value").fill('"bob"');
    // Meanwhile someone else moves the key on: the edit is refused and nothing changes.
    const cur = await api("GET", "/databases/" + db + "/cmpxchg?key=seats%2F12A");
    const moved = await api("PUT", "/databases/" + db + "/cmpxchg?key=seats%2F12A&index=" + cur.json.Results[0].Index, { Object: "carol" });
    expect(moved.json.Successful).toBe(true);
    await page.getByTestId("cmpxchg-form-submit").click();
    await expect(page.getByTestId("flash-error")).toContainText("someone changed it meanwhile");
    await expect(row("seats/12A").getByTestId("cmpxchg-value")).toContainText("carol");
    // Edit again from the fresh index.
    await row("seats/12A").getByTestId("cmpxchg-edit").click();
    await page.getByTestId("cmpxchg-form-value").fill('"bob"');
    await page.getByTestId("cmpxchg-form-submit").click();
    await expect(page.getByTestId("flash")).toContainText("seats/12A saved");
    await expect(row("seats/12A").getByTestId("cmpxchg-value")).toContainText("bob");

    // Delete.
    await row("emails/a").getByTestId("cmpxchg-delete").click();
    await expect(page.getByTestId("flash")).toContainText("emails/a deleted");
    await expect(row("emails/a")).toHaveCount(0);
    const gone = await api("GET", "/databases/" + db + "/cmpxchg?key=emails%2Fa");
    expect(gone.json.Results).toEqual([]);
  });
});
