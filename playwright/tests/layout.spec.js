// The studio's frame (issue 12, points 6 and 11): every studio page, taken
// from the routes in web/access.go, at 1440, 1280 and 390 px wide, never
// scrolls sideways and answers no request with a 4xx (the favicon); the
// sidebar collapses behind a Menu button at 390 px and opens and closes by
// keyboard; the dark theme follows prefers-color-scheme; the header says
// which node a page reads and its role. Screenshots of every page at 1440
// and 390 px go to playwright/artifacts/<page>-1440.png and -390.png.
//
// The pages are not empty: the database holds documents with long ids and
// values, a conflict (two nodes wrote the same id while they did not
// replicate), a resolved conflict in the resolution log, subscriptions and an
// auto index. A conflict needs two nodes, so this spec starts its own pair
// (cluster3.js with tags A and B) instead of using the global setup's node.
"use strict";
const { test, expect } = require("@playwright/test");
const fs = require("node:fs");
const path = require("node:path");
const { Cluster } = require("./cluster3");
const { shot, until } = require("./helpers");

const DB = "layout";
const WIDTHS = [1440, 1280, 390];
let cluster; // made in beforeAll: a Cluster makes its temporary directory when constructed

// studioGetRoutes lists every GET route of the studio's pages from the
// access rules (each route has one, TestEveryRouteHasAnAccessRule makes
// sure): a page added later is visited here, or this spec says it lacks a
// URL.
function studioGetRoutes() {
  const src = fs.readFileSync(path.join(__dirname, "..", "..", "web", "access.go"), "utf8");
  const routes = [];
  for (const m of src.matchAll(/"GET (\/studio[^"]*)"\s*:/g)) {
    const r = m[1];
    if (r === "/studio" || r === "/studio/live") continue; // a redirect; the websocket
    if (r === "/studio/history") continue; // the charts' JSON, not a page
    if (r === "/studio/db/:db/doc/attachment") continue; // an attachment's content, a download (attachments.spec.js)
    if (r === "/studio/db/:db/timeseries/points") continue; // the time-series chart's JSON (timeseries.spec.js)
    // A preview's page needs a preview operation; conflicts-bulk.spec.js
    // visits it (and checks it at 1440 and 390 px).
    if (r === "/studio/db/:db/conflicts/preview") continue;
    routes.push(r);
  }
  return routes;
}

// Ids and names the pages are filled with (long ones on purpose: they must
// truncate or wrap, never widen the page).
const LONG = "a-rather-long-identifier-that-does-not-break-anywhere-" + "x".repeat(60);
const fix = {
  doc: "orders/1-A",
  longDoc: "orders/" + LONG,
  conflict: "orders/conflicted-1",
  resolved: "orders/conflicted-2",
  sub: "layout-orders",
  index: "", // the auto index's name, read after the query made it
  series: "HeartRates-" + LONG.slice(0, 40),
};

// The URL of each studio GET route: ":db" is the database, a route that
// needs a parameter or a catch-all gets one here. name is the screenshot's.
function pageFor(route) {
  const special = {
    "/studio/": { name: "dashboard", url: "/studio/" },
    "/studio/smuggler": { name: "smuggler-server", url: "/studio/smuggler" },
    "/studio/db/:db/doc": { name: "doc", url: "/studio/db/:db/doc?id=" + encodeURIComponent(fix.longDoc) },
    "/studio/db/:db/doc/new": { name: "doc-new", url: "/studio/db/:db/doc/new" },
    "/studio/db/:db/conflicts/doc": { name: "conflict-doc", url: "/studio/db/:db/conflicts/doc?id=" + encodeURIComponent(fix.conflict) },
    "/studio/db/:db/conflicts/*": { name: "conflict-path", url: "/studio/db/:db/conflicts/" + fix.conflict },
    "/studio/db/:db/subscriptions/*": { name: "subscription", url: "/studio/db/:db/subscriptions/" + fix.sub },
    "/studio/db/:db/revisions": { name: "revisions", url: "/studio/db/:db/revisions?id=" + encodeURIComponent(fix.resolved) },
    "/studio/db/:db/timeseries": { name: "timeseries", url: "/studio/db/:db/timeseries?id=" + encodeURIComponent(fix.longDoc) + "&name=" + encodeURIComponent(fix.series) },
    "/studio/db/:db/index": { name: "index", url: () => "/studio/db/:db/index?name=" + encodeURIComponent(fix.index) },
  };
  let p = special[route];
  if (!p) {
    if (route.includes("*") || route.split("/").some((s) => s.startsWith(":") && s !== ":db")) return null;
    const name = route.replace(/^\/studio\/(db\/:db\/)?/, "").replace(/\/$/, "").replace(/\//g, "-");
    p = { name, url: route };
  }
  return { name: p.name, url: () => (typeof p.url === "function" ? p.url() : p.url).replace(":db", DB) };
}

const routes = studioGetRoutes();

// sideScroll tells how far the page scrolls sideways, and which elements
// stick out of the viewport without a scrolling box to hold them (to name
// the culprit when it does).
async function sideScroll(page) {
  return page.evaluate(() => {
    const w = window.innerWidth;
    const held = (e) => {
      if (["absolute", "fixed"].includes(getComputedStyle(e).position)) return false;
      for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
        if (getComputedStyle(a).overflowX !== "visible") return true;
      }
      return false;
    };
    const name = (e) => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (typeof e.className === "string" && e.className.trim() ? "." + e.className.trim().replace(/\s+/g, ".") : "");
    const out = [];
    for (const e of document.querySelectorAll("body *")) {
      const r = e.getBoundingClientRect();
      if (r.width === 0 || r.right <= w + 0.5 || held(e)) continue;
      out.push(name(e) + " in " + name(e.parentElement) + " right=" + Math.round(r.right));
      if (out.length >= 6) break;
    }
    return { scrollWidth: document.documentElement.scrollWidth, innerWidth: w, out };
  });
}

async function settle(page) {
  await page.waitForLoadState("load");
  const live = await page.locator("body").getAttribute("data-live");
  if (live) await expect(page.locator("body")).toHaveAttribute("data-live-state", "live");
  await page.waitForTimeout(300); // a live update or two has landed
}

// watch4xx records every response of the page with a status of 400 or more.
function watch4xx(page) {
  const bad = [];
  page.on("response", (r) => {
    if (r.status() >= 400) bad.push(r.status() + " " + r.request().method() + " " + r.url());
  });
  page.on("requestfailed", (r) => bad.push("failed " + r.url() + " " + (r.failure() || {}).errorText));
  return bad;
}

async function api(tag, method, p, body, want) {
  const r = await cluster.api(tag, method, p, body);
  if (want && r.status !== want) throw new Error(method + " " + p + " on " + tag + ": " + r.status + " " + JSON.stringify(r.body));
  return r;
}

test.describe.serial("the studio's layout on every page", () => {
  test.setTimeout(180_000);

  test.beforeAll(async () => {
    test.setTimeout(240_000);
    // The two nodes first run without replication, so the same id written
    // on each becomes a conflict when they replicate after a restart.
    cluster = new Cluster("layout", ["A", "B"]);
    await cluster.start(["--replication=false"]);
    await cluster.createDatabase(DB);
    await api("A", "POST", "/admin/replication/conflicts/solver?name=" + DB, { ResolveToLatest: false }, 200);
    await until("the solver setting on B", async () => {
      const r = await cluster.api("B", "GET", "/databases/" + DB + "/replication/conflicts/solver");
      return r.status === 200 && r.body && r.body.ResolveToLatest === false;
    });

    const commands = [];
    for (let i = 1; i <= 60; i++) {
      commands.push({ Id: "orders/" + i + "-A", Type: "PUT", Document: {
        Customer: "customers/" + (i % 7) + "-A", Total: i * 3.5, Paid: i % 2 === 0, Note: i === 3 ? LONG + " " + LONG : "order " + i,
        Lines: [{ Product: "products/" + i, Qty: i % 5 }], Address: { City: "Lisbon", Street: "Rua " + i },
        "@metadata": { "@collection": "Orders" } } });
    }
    commands.push({ Id: fix.longDoc, Type: "PUT", Document: { Name: LONG, Nested: { Deep: { Deeper: LONG } }, "@metadata": { "@collection": "Orders" } } });
    for (let i = 1; i <= 5; i++) {
      commands.push({ Id: "customers/" + i + "-A", Type: "PUT", Document: { Name: "Customer " + i, "@metadata": { "@collection": "Customers" } } });
    }
    await api("A", "POST", "/databases/" + DB + "/bulk_docs", { Commands: commands }, 201);
    // A time series with a long name and a long tag on the long document.
    const appends = [];
    for (let i = 0; i < 200; i++) {
      appends.push({ Timestamp: new Date(Date.UTC(2026, 11, 7) + i * 60_000).toISOString().replace("Z", "0000Z"), Values: [i, 1000 - i, i / 3], Tag: i === 0 ? LONG : undefined });
    }
    await api("A", "POST", "/databases/" + DB + "/bulk_docs", {
      Commands: [{ Id: fix.longDoc, Type: "TimeSeries", TimeSeries: { Name: fix.series, Appends: appends, Deletes: null } }],
    }, 201);
    for (const id of [fix.conflict, fix.resolved]) {
      for (const tag of ["A", "B"]) {
        await api(tag, "PUT", "/databases/" + DB + "/docs?id=" + encodeURIComponent(id), { Total: tag === "A" ? 10 : 20, By: tag, "@metadata": { "@collection": "Orders" } }, 201);
      }
    }

    // Restart both with replication on (one at a time: the Raft pair keeps
    // its quorum whenever one of them is up).
    cluster.extraArgs = [];
    for (const tag of ["B", "A"]) {
      await cluster.kill9(tag);
      cluster.startNode(tag);
      await cluster.ready(tag);
    }
    await until("both conflicts on A", async () => {
      const r = await cluster.api("A", "GET", "/databases/" + DB + "/replication/conflicts");
      return r.status === 200 && r.body.TotalResults === 2;
    }, 60_000);
    // Writing an id resolves its conflict: the resolution log has an entry.
    await api("A", "PUT", "/databases/" + DB + "/docs?id=" + encodeURIComponent(fix.resolved), { Total: 30, By: "person", "@metadata": { "@collection": "Orders" } }, 201);

    await api("A", "PUT", "/databases/" + DB + "/subscriptions", { Name: fix.sub, Query: "from Orders where Total > 10" }, 201);
    await api("A", "PUT", "/databases/" + DB + "/subscriptions", { Name: "layout-" + LONG, Query: "from Customers" }, 201);
    const q = await api("A", "POST", "/databases/" + DB + "/queries", { Query: "from Orders where Total > $min", QueryParameters: { min: 50 } }, 200);
    fix.index = q.body.IndexName;
    expect(fix.index).toMatch(/^Auto\/Orders/);
  });

  test.afterAll(async () => {
    if (cluster) await cluster.stop();
  });

  test("every studio GET route has a page here", async () => {
    expect(routes.length).toBeGreaterThanOrEqual(20);
    const missing = routes.filter((r) => !pageFor(r));
    expect(missing, "routes without a URL in layout.spec.js's pageFor").toEqual([]);
  });

  for (const route of routes) {
    const p = pageFor(route);
    if (!p) continue;
    test(`${p.name} (${route}): no sideways scroll at ${WIDTHS.join(", ")} px, no 4xx`, async ({ page }) => {
      const bad = watch4xx(page);
      for (const w of WIDTHS) {
        await page.setViewportSize({ width: w, height: 900 });
        const resp = await page.goto(cluster.nodes.A.url + p.url());
        expect(resp.status(), p.url()).toBeLessThan(400);
        await settle(page);
        await expect(page.getByTestId("reading-node")).toBeVisible();
        if (p.name === "query") {
          // the results table is the page's widest state
          await page.getByTestId("query-text").fill("from Orders where Total > 5");
          await page.getByTestId("query-run").click();
          await settle(page);
        }
        if (p.name === "subscriptions" && w >= 1280) {
          // the action column is on screen, not cut off inside the table's scroller
          const cut = await page.locator(".table-wrap:has(.sub-grid)").evaluate((e) => e.scrollWidth - e.clientWidth);
          expect(cut, `the subscriptions table needs ${cut} px more at ${w} px`).toBeLessThanOrEqual(0);
        }
        const s = await sideScroll(page);
        expect(s.scrollWidth, `${p.name} at ${w} px scrolls sideways; sticking out: ${s.out.join(", ")}`).toBeLessThanOrEqual(s.innerWidth);
        if (w !== 1280) await shot(page, `${p.name}-${w}`);
      }
      // Headless Chromium fetches no icon on its own: ask for the page's
      // icon, and for /favicon.ico, as a browser with a tab strip does.
      const icon = await page.evaluate(() => (document.querySelector("link[rel~=icon]") || {}).href || "");
      for (const u of [icon, cluster.nodes.A.url + "/favicon.ico"]) {
        const r = await page.request.get(u || cluster.nodes.A.url + "/favicon.ico");
        if (r.status() >= 400) bad.push(r.status() + " GET " + u + " (the icon)");
      }
      expect(bad, "requests answered 4xx or failed").toEqual([]);
    });
  }

  test("at 390 px the sidebar is behind a Menu button that opens and closes by keyboard", async ({ page }) => {
    await page.setViewportSize({ width: 390, height: 800 });
    await page.goto(cluster.nodes.A.url + "/studio/db/" + DB + "/documents");
    await settle(page);
    const menu = page.getByTestId("menu-toggle");
    const nav = page.getByTestId("nav");
    await expect(menu).toBeVisible();
    await expect(menu).toHaveAttribute("aria-expanded", "false");
    await expect(menu).toHaveAttribute("aria-controls", "sidenav");
    await expect(nav).toBeHidden();

    // Tab from the top of the page: skip link, then the Menu button.
    await page.locator("body").focus();
    await page.keyboard.press("Tab");
    await expect(page.locator(".skip")).toBeFocused();
    await page.keyboard.press("Tab");
    await expect(menu).toBeFocused();
    await page.keyboard.press("Enter");
    await expect(menu).toHaveAttribute("aria-expanded", "true");
    await expect(nav).toBeVisible();
    await expect(page.getByTestId("nav-dashboard")).toBeFocused();
    await page.screenshot({ path: path.join(__dirname, "..", "artifacts", "layout-menu-open-390.png") });
    // Tab walks the links; Enter follows one.
    await page.keyboard.press("Tab");
    await expect(page.getByTestId("nav-databases")).toBeFocused();
    // Escape closes it and gives the focus back to the button.
    await page.keyboard.press("Escape");
    await expect(menu).toHaveAttribute("aria-expanded", "false");
    await expect(nav).toBeHidden();
    await expect(menu).toBeFocused();
    // Space opens it again; a link is followed by Enter.
    await page.keyboard.press(" ");
    await expect(nav).toBeVisible();
    await page.getByTestId("nav-stats").focus();
    await page.keyboard.press("Enter");
    await expect(page).toHaveURL(/\/studio\/db\/layout\/stats$/);
    await expect(page.getByTestId("menu-toggle")).toHaveAttribute("aria-expanded", "false");
    await expect(page.getByTestId("nav")).toBeHidden();

    // Wide, the sidebar is always there and the button is not.
    await page.setViewportSize({ width: 1280, height: 800 });
    await expect(page.getByTestId("nav")).toBeVisible();
    await expect(page.getByTestId("menu-toggle")).toBeHidden();
  });

  test("without JavaScript the sidebar stays reachable at 390 px", async ({ browser }) => {
    const ctx = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 390, height: 800 } });
    const page = await ctx.newPage();
    await page.goto(cluster.nodes.A.url + "/studio/db/" + DB + "/stats");
    await expect(page.getByTestId("nav")).toBeVisible();
    await expect(page.getByTestId("menu-toggle")).toBeHidden();
    const s = await sideScroll(page);
    expect(s.scrollWidth, s.out.join(", ")).toBeLessThanOrEqual(s.innerWidth);
    await ctx.close();
  });

  test("the dark theme follows prefers-color-scheme", async ({ browser }) => {
    const colors = async (scheme) => {
      const ctx = await browser.newContext({ colorScheme: scheme, viewport: { width: 1280, height: 900 } });
      const page = await ctx.newPage();
      await page.goto(cluster.nodes.A.url + "/studio/db/" + DB + "/documents");
      await settle(page);
      const c = await page.evaluate(() => {
        const css = (el, p) => getComputedStyle(el)[p];
        const lum = (rgb) => {
          const [r, g, b] = rgb.match(/\d+(\.\d+)?/g).slice(0, 3).map(Number).map((v) => {
            v /= 255;
            return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
          });
          return 0.2126 * r + 0.7152 * g + 0.0722 * b;
        };
        const main = document.querySelector("main");
        const panel = document.querySelector(".grid") || document.querySelector(".card");
        return {
          bg: lum(css(document.documentElement, "backgroundColor")),
          fg: lum(css(main, "color")),
          panel: lum(css(panel, "backgroundColor")),
          accentVar: getComputedStyle(document.documentElement).getPropertyValue("--accent").trim(),
          scheme: css(document.documentElement, "colorScheme"),
        };
      });
      if (scheme === "dark") await shot(page, "documents-dark-1280");
      await ctx.close();
      return c;
    };
    const light = await colors("light");
    const dark = await colors("dark");
    expect(light.bg).toBeGreaterThan(0.8);
    expect(light.fg).toBeLessThan(0.05);
    expect(light.panel).toBeGreaterThan(0.8);
    expect(dark.bg).toBeLessThan(0.05);
    expect(dark.fg).toBeGreaterThan(0.7);
    expect(dark.panel).toBeLessThan(0.05);
    // text against background keeps at least 4.5:1 in the dark
    expect((dark.fg + 0.05) / (dark.bg + 0.05)).toBeGreaterThan(4.5);
    expect(dark.accentVar).not.toBe(light.accentVar);
  });

  test("the header says which node a page reads and its role; /favicon.ico is the icon", async ({ page }) => {
    const s = await cluster.status("A");
    expect(["A", "B"]).toContain(s.Leader);
    for (const tag of ["A", "B"]) {
      await page.goto(cluster.nodes[tag].url + "/studio/db/" + DB + "/documents");
      const role = tag === s.Leader ? "leader" : "follower";
      await expect(page.getByTestId("reading-node")).toHaveText(`Node ${tag} · ${role}`);
      await expect(page.getByTestId("reading-node")).toHaveAttribute("title", new RegExp("reads node " + tag + " at " + cluster.nodes[tag].url.replace(/[.]/g, "\\.")));
    }
    const icon = await fetch(cluster.nodes.A.url + "/favicon.ico");
    expect(icon.status).toBe(200);
    expect(icon.headers.get("content-type")).toBe("image/svg+xml");
    expect(await icon.text()).toContain("<svg");
    await expect(page.locator('link[rel="icon"]')).toHaveAttribute("href", "/static/favicon.svg");
  });
});
