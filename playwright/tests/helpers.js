// Shared helpers for the studio browser tests. Each spec file works in its
// own uniquely named database, created and filled through the HTTP API the
// clients use.
"use strict";
const fs = require("node:fs");
const net = require("node:net");
const { spawnSync } = require("node:child_process");
const path = require("node:path");
const { expect } = require("@playwright/test");

const base = () => process.env.ROOKERY_URL;

async function api(method, pathAndQuery, body) {
  const r = await fetch(base() + pathAndQuery, {
    method,
    headers: { "Content-Type": "application/json" },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await r.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch (e) {}
  return { status: r.status, json, text };
}

function uniqueName(prefix) {
  return prefix + "-" + Date.now().toString(36) + Math.floor(Math.random() * 1e4);
}

async function createDatabase(name, extra) {
  const r = await api("PUT", "/admin/databases?name=" + name, { DatabaseName: name, ...(extra || {}) });
  if (r.status !== 201) throw new Error("create database " + name + ": " + r.status + " " + r.text);
}

async function deleteDatabase(name) {
  await api("DELETE", "/admin/databases", { DatabaseNames: [name], HardDelete: true });
}

// putDocs stores documents through bulk_docs: docs is [{id, body}].
async function putDocs(db, docs) {
  const commands = docs.map((d) => ({ Id: d.id, Type: "PUT", Document: d.body }));
  const r = await api("POST", "/databases/" + db + "/bulk_docs", { Commands: commands });
  if (r.status !== 201) throw new Error("bulk_docs: " + r.status + " " + r.text);
  return r.json.Results;
}

// waitLive waits until the page's live websocket is open.
async function waitLive(page) {
  await expect(page.locator("body")).toHaveAttribute("data-live-state", "live");
}

async function shot(page, name) {
  await page.screenshot({ path: path.join(__dirname, "..", "artifacts", name + ".png"), fullPage: true });
}

// freePort finds a loopback port nobody listens on (for the specs that
// start their own nodes and proxies).
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

// until polls fn until it returns true, or fails after ms (30 s).
async function until(what, fn, ms) {
  const deadline = Date.now() + (ms || 30_000);
  let last;
  while (Date.now() < deadline) {
    try {
      if (await fn()) return;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("timed out waiting for " + what + (last ? ": " + last.message : ""));
}

// studioBinary is the server binary for specs that start their own nodes:
// ROOKERY_BIN (set by the global setup), or one built into dir.
function studioBinary(dir) {
  const prebuilt = process.env.ROOKERY_BIN;
  if (prebuilt && fs.existsSync(prebuilt)) return prebuilt;
  const bin = path.join(dir, "studio");
  const build = spawnSync("go", ["build", "-o", bin, "./cmd/studio"], { cwd: path.resolve(__dirname, "..", ".."), stdio: "inherit" });
  if (build.status !== 0) throw new Error("go build failed");
  return bin;
}

module.exports = { api, base, uniqueName, createDatabase, deleteDatabase, putDocs, waitLive, shot, freePort, until, studioBinary };
