"use strict";
const { test, expect } = require("@playwright/test");
const { api, base, uniqueName, createDatabase, deleteDatabase, putDocs } = require("./helpers");

const start = Date.UTC(2026, 11, 7, 0, 0, 0);

// appendPoints appends n points (one a minute) to a series through bulk_docs.
async function appendPoints(db, id, name, n, tag) {
  const appends = [];
  for (let i = 0; i < n; i++) {
    const ts = new Date(start + i * 60_000).toISOString().replace("Z", "0000Z");
    appends.push({ Timestamp: ts, Values: [i, 100 - i], Tag: i === 0 ? tag : undefined });
  }
  const r = await api("POST", "/databases/" + db + "/bulk_docs", {
    Commands: [{ Id: id, Type: "TimeSeries", TimeSeries: { Name: name, Appends: appends, Deletes: null } }],
  });
  if (r.status !== 201) throw new Error("append: " + r.status + " " + r.text);
}

test.describe("time series page", () => {
  let db;
  test.beforeEach(async () => {
    db = uniqueName("pwts");
    await createDatabase(db);
    await putDocs(db, [{ id: "meters/1", body: { "@metadata": { "@collection": "Meters" } } }]);
  });
  test.afterEach(async () => {
    await deleteDatabase(db);
  });

  test("the document links to a chart of its series; the range picker narrows it", async ({ page }) => {
    // 3000 points over 50 hours; the tag is untrusted text, shown escaped.
    await appendPoints(db, "meters/1", "Power", 3000, "<b>probe</b>");
    await appendPoints(db, "meters/1", "Voltage", 10);

    await page.goto(base() + "/studio/db/" + db + "/doc?id=meters%2F1");
    await page.getByTestId("doc-timeseries-link").click();
    await expect(page.getByTestId("ts-series-row")).toHaveCount(2);
    await expect(page.locator('[data-testid=ts-series-row][data-name="Power"]').getByTestId("ts-series-entries")).toHaveText("3,000");

    // The first series is shown: all of it, sampled for the chart.
    const chart = page.getByTestId("ts-chart");
    await expect(chart).toHaveAttribute("data-drawn", "true");
    await expect(chart).toHaveAttribute("data-total", "3000");
    const points = Number(await chart.getAttribute("data-points"));
    expect(points).toBeGreaterThan(500);
    expect(points).toBeLessThanOrEqual(1600);
    await expect(chart).toHaveAttribute("data-series", "2");
    await expect(chart.locator("canvas")).toBeVisible();
    await expect(page.getByTestId("ts-chart-note")).toContainText("of 3000 entries");
    await expect(page.getByTestId("ts-entry").first().getByTestId("ts-entry-values")).toHaveText("0, 100");
    await expect(page.getByTestId("ts-entry").first().getByTestId("ts-entry-tag")).toHaveText("<b>probe</b>");
    await expect(page.locator("b", { hasText: "probe" })).toHaveCount(0);

    // The last hour of the series: 60 or 61 points, all drawn.
    await page.getByTestId("ts-range-hour").click();
    await expect(chart).toHaveAttribute("data-drawn", "true");
    const hour = Number(await page.getByTestId("ts-in-range").getAttribute("data-count"));
    expect(hour).toBeGreaterThanOrEqual(59);
    expect(hour).toBeLessThanOrEqual(61);
    await expect(chart).toHaveAttribute("data-points", String(hour));

    // A range typed in the form (UTC).
    await page.getByTestId("ts-from").fill("2026-12-07T01:00");
    await page.getByTestId("ts-to").fill("2026-12-07T01:09");
    await page.getByTestId("ts-apply").click();
    await expect(page.getByTestId("ts-in-range")).toHaveAttribute("data-count", "10");
    await expect(chart).toHaveAttribute("data-points", "10");
    await expect(page.getByTestId("ts-entry")).toHaveCount(10);
    await expect(page.getByTestId("ts-entry").first().getByTestId("ts-entry-values")).toHaveText("60, 40");

    // The other series, by its link.
    await page.locator('[data-testid=ts-series-row][data-name="Voltage"]').getByTestId("ts-series-link").click();
    await expect(chart).toHaveAttribute("data-points", "10");
  });

  test("a document without series says so", async ({ page }) => {
    await page.goto(base() + "/studio/db/" + db + "/timeseries?id=meters%2F1");
    await expect(page.getByTestId("ts-none")).toBeVisible();
  });
});
