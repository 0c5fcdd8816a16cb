"use strict";
const { test, expect } = require("@playwright/test");
const { api, base, uniqueName, createDatabase, deleteDatabase, waitLive, shot } = require("./helpers");

test.describe("Identities page", () => {
  let db;
  test.beforeEach(async () => {
    db = uniqueName("pwids");
    await createDatabase(db);
    // orders/1..3 through the identity, and a second identity.
    for (let i = 0; i < 3; i++) {
      const r = await api("PUT", "/databases/" + db + "/docs?id=" + encodeURIComponent("orders|"), { "@metadata": { "@collection": "Orders" } });
      expect(r.status).toBe(201);
    }
    expect((await api("POST", "/databases/" + db + "/identity/seed?name=companies&value=20")).status).toBe(200);
  });
  test.afterEach(async () => {
    await deleteDatabase(db);
  });

  test("seed from the page: raise, refused lowering, confirmed lowering, audit alert, dismiss", async ({ page }) => {
    await page.goto(base() + "/studio/db/" + db + "/identities");
    await waitLive(page);
    const row = (p) => page.locator(`[data-testid=identity-row][data-prefix="${p}"]`);
    await expect(row("orders|").getByTestId("identity-value")).toHaveText("3");
    await expect(row("orders|").getByTestId("identity-audit")).toHaveAttribute("data-audit", "ok");
    await expect(row("companies|").getByTestId("identity-value")).toHaveText("20");

    // Sorted by value, descending, on the server.
    await page.getByTestId("sort-value").click();
    await page.getByTestId("sort-value").click();
    await expect(page).toHaveURL(/sort=value/);
    await expect(page).toHaveURL(/dir=desc/);
    await expect(page.getByTestId("identity-prefix")).toHaveText(["companies|", "orders|"]);
    // Filtered.
    await page.getByLabel("Filter by prefix").fill("ord");
    await page.getByTestId("identity-filter-submit").click();
    await expect(page.getByTestId("identity-prefix")).toHaveText(["orders|"]);
    await page.getByTestId("identity-filter-clear").click();
    await expect(page.getByTestId("identity-row")).toHaveCount(2);

    // Raise: the preview shows the next id while typing.
    await page.getByLabel("Identity prefix").fill("orders");
    await page.getByLabel("New value").fill("50");
    await expect(page.getByTestId("seed-preview")).toHaveText("next document: orders/51");
    await expect(page.getByTestId("seed-warning")).toBeHidden();
    await page.getByTestId("seed-submit").click();
    await expect(page.getByTestId("flash")).toContainText("orders| set to 50 (was 3)");
    await expect(row("orders|").getByTestId("identity-value")).toHaveText("50");

    // Lowering warns, and without the confirmation it is refused and nothing changes.
    await page.getByLabel("Identity prefix").fill("orders|");
    await page.getByLabel("New value").fill("1");
    await expect(page.getByTestId("seed-warning")).toBeVisible();
    await expect(page.getByTestId("seed-warning")).toContainText("Lower than the current value 50");
    await page.getByTestId("seed-submit").click();
    await expect(page.getByTestId("flash-error")).toContainText("orders| is at 50; 1 would lower it");
    await expect(row("orders|").getByTestId("identity-value")).toHaveText("50");
    // The form came back filled in, with the server's preview and warning.
    await expect(page.getByTestId("seed-value")).toHaveValue("1");
    await expect(page.getByTestId("seed-preview")).toContainText("next document: orders/4");
    await expect(page.getByTestId("seed-warning")).toBeVisible();

    // With the confirmation it goes through; orders/2 and orders/3 exist above it now.
    await page.getByLabel(/allow lowering the counter/).check();
    await page.getByTestId("seed-submit").click();
    await expect(page.getByTestId("flash")).toContainText("orders| set to 1 (was 50); next document: orders/4");
    await expect(row("orders|").getByTestId("identity-value")).toHaveText("1");
    const audit = row("orders|").getByTestId("identity-audit");
    await expect(audit).toHaveAttribute("data-audit", "collides");
    await expect(audit).toContainText("orders/3 exists above the counter (1)");
    await expect(audit.getByTestId("identity-next-free")).toHaveText("4");

    // The node's audit raises an alert within a second or two; the header's badge counts it and
    // links to the Alerts page, where it links back.
    await shot(page, "identities");
    await page.getByTestId("alerts-link").click();
    await expect(page).toHaveURL(/\/studio\/alerts$/);
    const mine = page.getByTestId("alert-row").filter({ hasText: db });
    await expect(async () => {
      await page.reload();
      await expect(mine).toHaveCount(1, { timeout: 1000 });
    }).toPass({ timeout: 15_000 });
    await expect(mine).toContainText("Identity orders| would collide");
    await expect(mine.getByTestId("alert-link")).toHaveAttribute("href", "/studio/db/" + db + "/identities");
    const count = Number(await page.getByTestId("alerts-count").textContent());
    expect(count).toBeGreaterThanOrEqual(1);
    // Dismiss it: gone, and the count drops.
    await mine.getByTestId("alert-dismiss").click();
    await expect(page).toHaveURL(/\/studio\/alerts/);
    await expect(page.getByTestId("alert-row").filter({ hasText: db })).toHaveCount(0);
    await expect(page.getByTestId("alerts-count")).toHaveText(String(count - 1));
  });

  test("a cross-origin seed is refused", async ({ request }) => {
    const r = await request.post(base() + "/studio/db/" + db + "/identities/seed", {
      form: { prefix: "orders", value: "1000", confirmLower: "yes" },
      headers: { Origin: "http://evil.example" },
      maxRedirects: 0,
    });
    expect(r.status()).toBe(403);
    const ids = await api("GET", "/databases/" + db + "/debug/identities");
    expect(ids.json["orders|"]).toBe(3);
  });
});
