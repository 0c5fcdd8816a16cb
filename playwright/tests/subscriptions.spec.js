// The Subscriptions pages, watched while a worker written here against the
// raw TCP protocol (protocol reference §7.3–7.5) consumes a subscription:
// the progress bar advances with each acknowledgement without a reload,
// the status turns STALLED when the worker stops acknowledging, and a burst
// of subscriptions is flagged as runaway and disabled after a confirmation.
"use strict";
const { test, expect } = require("@playwright/test");
const net = require("node:net");
const { api, base, uniqueName, createDatabase, deleteDatabase, putDocs, waitLive, shot } = require("./helpers");

// Worker speaks the subscription protocol: concatenated JSON objects with
// no separator, and "\r\n" heartbeats between them.
class Worker {
  constructor() {
    this.buf = "";
    this.messages = [];
    this.waiting = [];
    this.closed = false;
  }

  async connect(db, name, maxDocs) {
    const info = await api("GET", "/info/remote-task/tcp?database=" + encodeURIComponent(db) + "&remote-task=" + encodeURIComponent(name) + "&tag=Subscription%2F" + encodeURIComponent(db) + "&verify-database=true");
    if (info.status !== 200) throw new Error("remote-task/tcp: " + info.status + " " + info.text);
    const u = new URL(info.json.Url);
    this.sock = net.connect(Number(u.port), u.hostname);
    this.sock.setEncoding("utf8");
    this.sock.on("data", (chunk) => {
      this.buf += chunk;
      this.parse();
    });
    this.sock.on("error", () => {});
    this.sock.on("close", () => {
      this.closed = true;
      for (const w of this.waiting.splice(0)) w.reject(new Error("worker connection closed"));
    });
    await new Promise((resolve, reject) => {
      this.sock.once("connect", resolve);
      this.sock.once("error", reject);
    });
    this.send({ DatabaseName: db, Operation: "Subscription", OperationVersion: 53000, AuthorizeInfo: null, LicensedFeatures: { dataCompression: false } });
    const hdr = await this.next();
    if (hdr.Status !== "Ok") throw new Error("header refused: " + JSON.stringify(hdr));
    this.send({ SubscriptionName: name, Strategy: "OpenIfFree", MaxDocsPerBatch: maxDocs });
    const st = await this.next();
    if (st.Type !== "ConnectionStatus" || st.Status !== "Accepted") throw new Error("not accepted: " + JSON.stringify(st));
  }

  send(obj) {
    this.sock.write(JSON.stringify(obj));
  }

  // parse takes every complete JSON object off the front of the buffer.
  parse() {
    for (;;) {
      const start = this.buf.search(/\S/);
      if (start < 0) {
        this.buf = "";
        return;
      }
      this.buf = this.buf.slice(start);
      let depth = 0;
      let inString = false;
      let end = -1;
      for (let i = 0; i < this.buf.length && end < 0; i++) {
        const ch = this.buf[i];
        if (inString) {
          if (ch === "\\") i++;
          else if (ch === '"') inString = false;
        } else if (ch === '"') inString = true;
        else if (ch === "{") depth++;
        else if (ch === "}" && --depth === 0) end = i + 1;
      }
      if (end < 0) return;
      const msg = JSON.parse(this.buf.slice(0, end));
      this.buf = this.buf.slice(end);
      const w = this.waiting.shift();
      if (w) w.resolve(msg);
      else this.messages.push(msg);
    }
  }

  next() {
    if (this.messages.length) return Promise.resolve(this.messages.shift());
    if (this.closed) return Promise.reject(new Error("worker connection closed"));
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  // batch reads one batch (a Confirm before it is skipped) and returns
  // its document ids.
  async batch() {
    const ids = [];
    for (;;) {
      const m = await this.next();
      if (m.Type === "Data") ids.push(m.Data["@metadata"]["@id"]);
      else if (m.Type === "EndOfBatch") return ids;
      else if (m.Type !== "Confirm") throw new Error("unexpected " + JSON.stringify(m));
    }
  }

  ack() {
    this.send({ Type: "Acknowledge" });
  }

  close() {
    if (this.sock) this.sock.destroy();
  }
}

function orders(n) {
  const docs = [];
  for (let i = 1; i <= n; i++) docs.push({ id: "orders/" + i, body: { Total: i, "@metadata": { "@collection": "Orders" } } });
  return docs;
}

async function createSubscription(db, name, query) {
  const r = await api("PUT", "/databases/" + db + "/subscriptions", { Query: query, Name: name });
  if (r.status !== 201) throw new Error("create subscription " + name + ": " + r.status + " " + r.text);
}

const position = async (page, name) => Number(await page.getByTestId("sub-progress-" + name).getAttribute("data-position"));

test.describe("Subscriptions page", () => {
  let db;
  let worker;
  test.beforeEach(async () => {
    db = uniqueName("pwsubs");
    await createDatabase(db);
  });
  test.afterEach(async () => {
    if (worker) worker.close();
    worker = null;
    await deleteDatabase(db);
  });

  test("a worker's progress bar advances live, then STALLED when it stops acknowledging", async ({ page }) => {
    await putDocs(db, orders(30));
    await createSubscription(db, "feed", "from Orders");
    const th = await api("PUT", "/databases/" + db + "/subscriptions/monitor/thresholds", { StallSeconds: 2 });
    expect(th.status).toBe(200);

    await page.goto(base() + "/studio/db/" + db + "/subscriptions");
    await expect(page.getByTestId("nav-subscriptions")).toHaveAttribute("aria-current", "page");
    const row = page.getByTestId("sub-row-feed");
    await expect(row).toBeVisible();
    await expect(page.getByTestId("sub-status-feed")).toHaveText("STOPPED");
    await expect(page.getByTestId("sub-backlog-feed")).toHaveText("30");
    await expect(page.getByTestId("sub-progress-feed")).toHaveAttribute("data-position", "0");
    await waitLive(page);
    // Everything below must arrive over the websocket: a reload would lose this.
    await page.evaluate(() => (window.__sameDocument = true));

    worker = new Worker();
    await worker.connect(db, "feed", 5);
    expect(await worker.batch()).toEqual(["orders/1", "orders/2", "orders/3", "orders/4", "orders/5"]);
    await expect(page.getByTestId("sub-workers-feed")).toHaveAttribute("data-count", "1");
    await expect(page.getByTestId("sub-workers-feed")).toContainText("OpenIfFree");
    await expect(page.getByTestId("sub-inflight-feed")).toHaveAttribute("data-value", "5");

    // Each acknowledgement moves the bar.
    let last = 0;
    for (let i = 0; i < 3; i++) {
      worker.ack();
      await expect.poll(() => position(page, "feed")).toBeGreaterThan(last);
      last = await position(page, "feed");
      const ids = await worker.batch();
      expect(ids.length).toBe(5);
    }
    expect(Number(await page.getByTestId("sub-progress-feed").getAttribute("value"))).toBeGreaterThan(0);
    await expect(page.getByTestId("sub-backlog-feed")).toHaveText("15");
    await shot(page, "subscriptions-progress");

    // The worker holds its fourth batch without acknowledging it.
    await expect(page.getByTestId("sub-status-feed")).toHaveText("STALLED", { timeout: 15_000 });
    await expect(row).toHaveAttribute("data-status", "STALLED");
    await expect(page.getByTestId("sub-inflight-feed")).toHaveAttribute("data-value", "5");
    expect(await position(page, "feed")).toBe(last);
    // The backlog is charted on one scale for every subscription (uPlot).
    await expect(page.getByTestId("chart-subs-backlog").locator(".u-axis")).toHaveCount(2);
    await shot(page, "subscriptions-stalled");
    expect(await page.evaluate(() => window.__sameDocument)).toBe(true);

    // Drop connections: the worker is told to go, and nobody is connected.
    await page.getByTestId("sub-drop-feed").click();
    await expect(page.getByTestId("flash")).toContainText("Dropped the worker of feed");
    let told;
    while (!told) {
      const m = await worker.next();
      if (m.Type === "ConnectionStatus") told = m;
    }
    expect(told.Status).toBe("Closed");
    expect(told.Message).toContain("dropped by an operator");
    await expect(page.getByTestId("sub-workers-feed")).toHaveAttribute("data-count", "0");
    await expect(page.getByTestId("sub-status-feed")).toHaveText("STOPPED");
    expect(await position(page, "feed")).toBe(last);
  });

  test("the subscription's page follows its batches live", async ({ page }) => {
    await putDocs(db, orders(6));
    await createSubscription(db, "team/feed", "from Orders where Total > 1");
    await page.goto(base() + "/studio/db/" + db + "/subscriptions");
    await page.getByTestId("sub-link-team/feed").click();
    await expect(page.getByTestId("sub-detail-name")).toHaveText("team/feed");
    await expect(page.getByTestId("sub-query")).toHaveText("from Orders where Total > 1");
    await expect(page.getByTestId("sub-no-batches")).toBeVisible();
    await waitLive(page);
    await page.evaluate(() => (window.__sameDocument = true));

    worker = new Worker();
    await worker.connect(db, "team/feed", 2);
    expect(await worker.batch()).toEqual(["orders/2", "orders/3"]);
    await expect(page.getByTestId("sub-worker")).toHaveCount(1);
    await expect(page.getByTestId("sub-batch")).toHaveCount(1);
    await expect(page.getByTestId("sub-batch")).toHaveAttribute("data-acked", "false");
    worker.ack();
    await worker.batch();
    await expect(page.getByTestId("sub-batch")).toHaveCount(2);
    await expect(page.getByTestId("sub-batch").first()).toHaveAttribute("data-acked", "true");
    await expect(page.getByTestId("sub-connection")).toHaveAttribute("data-open", "true");
    await shot(page, "subscription-detail");
    expect(await page.evaluate(() => window.__sameDocument)).toBe(true);

    // Disable from its page: the worker is closed and the page says so.
    await page.getByTestId("sub-disable-team/feed").click();
    await expect(page.getByTestId("flash")).toContainText("Subscription team/feed disabled.");
    await expect(page.getByTestId("sub-state-team/feed")).toHaveAttribute("data-state", "DISABLED");
    await expect(page.getByTestId("sub-no-workers")).toBeVisible();
    await expect(page.getByTestId("sub-connection")).toHaveAttribute("data-open", "false");
    await page.getByTestId("sub-enable-team/feed").click();
    await expect(page.getByTestId("sub-state-team/feed")).toHaveAttribute("data-state", "NO WORKER");
  });

  test("test query shows matches and syntax errors, creating nothing", async ({ page }) => {
    await putDocs(db, orders(8));
    await page.goto(base() + "/studio/db/" + db + "/subscriptions");
    await expect(page.getByTestId("subscriptions-none")).toBeVisible();
    await page.getByTestId("try-query").fill("from Orders where Total >= 7");
    await page.getByTestId("try-submit").click();
    await expect(page.getByTestId("try-result")).toHaveCount(2);
    await expect(page.getByTestId("try-result").first()).toContainText('"Total": 7');
    await expect(page.getByTestId("try-query")).toHaveValue("from Orders where Total >= 7");
    await page.getByTestId("try-query").fill("from Orders where Total >");
    await page.getByTestId("try-submit").click();
    await expect(page.getByTestId("try-error")).toContainText("expected a value");
    await expect(page.getByTestId("try-result")).toHaveCount(0);
    const list = await api("GET", "/databases/" + db + "/subscriptions");
    expect(list.json.Results).toEqual([]);
    await expect(page.getByTestId("subscriptions-none")).toBeVisible();
  });

  test("a burst of subscriptions is flagged as runaway and disabled after a confirmation", async ({ page }) => {
    await putDocs(db, orders(3));
    await createSubscription(db, "steady", "from Orders where Total > 2");
    await page.goto(base() + "/studio/db/" + db + "/subscriptions");
    await expect(page.getByTestId("sub-row-steady")).toBeVisible();
    await expect(page.getByTestId("disable-flagged")).toHaveCount(0);
    await waitLive(page);
    await page.evaluate(() => (window.__sameDocument = true));

    // 25 more within a minute: the burst rule (20 in 60 s by default).
    for (let i = 0; i < 25; i++) await createSubscription(db, "burst-" + i, "from Orders where Total > " + (i % 3));
    await expect(page.getByTestId("sub-row-burst-24")).toBeVisible();
    const flag = page.getByTestId("sub-flag-burst-24");
    await expect(flag.locator('[data-rule="burst"]')).toContainText("26 subscriptions were created in the last 60s (threshold 20)");
    await expect(page.getByTestId("sub-flag-steady").locator('[data-rule="burst"]')).toHaveCount(1);
    await expect(page.getByTestId("subs-flagged")).toHaveText("26");
    await expect(page.getByTestId("chart-subs-backlog")).toBeVisible();
    expect(await page.evaluate(() => window.__sameDocument)).toBe(true);
    await shot(page, "subscriptions-runaway");

    await page.getByTestId("disable-flagged").click();
    await expect(page.getByTestId("sub-confirm")).toHaveAttribute("data-count", "26");
    await expect(page.locator('[data-testid^="sub-row-"][data-disabled="true"]')).toHaveCount(0);
    await page.getByTestId("sub-confirm-submit").click();
    await expect(page.getByTestId("flash")).toContainText("Disabled 26 subscriptions");
    await expect(page.locator('[data-testid^="sub-row-"][data-disabled="true"]')).toHaveCount(26);
    await expect(page.getByTestId("disable-flagged")).toHaveCount(0);
    const state = await api("GET", "/databases/" + db + "/subscriptions/state?name=burst-11");
    expect(state.json.Disabled).toBe(true);
  });
});
