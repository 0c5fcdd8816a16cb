// Builds the studio binary, starts it on a free loopback port with a fresh
// data directory, and waits for /readyz. The URL goes to the tests through
// process.env.ROOKERY_URL (workers inherit the environment set here).
"use strict";
const { spawn, spawnSync } = require("node:child_process");
const fs = require("node:fs");
const net = require("node:net");
const os = require("node:os");
const path = require("node:path");

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

async function waitReady(url, ms) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    try {
      const r = await fetch(url + "/readyz");
      if (r.status === 200) return;
    } catch (e) {}
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("server did not become ready at " + url);
}

module.exports = async () => {
  if (process.env.ROOKERY_URL) return;
  const repo = path.resolve(__dirname, "..");
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "rookery-pw-"));
  const bin = path.join(tmp, "studio");
  const build = spawnSync("go", ["build", "-o", bin, "./cmd/studio"], { cwd: repo, stdio: "inherit" });
  if (build.status !== 0) throw new Error("go build failed");
  const port = await freePort();
  const url = "http://127.0.0.1:" + port;
  const log = fs.openSync(path.join(tmp, "server.log"), "w");
  const raftPort = await freePort();
  process.env.ROOKERY_BIN = bin; // specs that need more nodes start them from it
  const child = spawn(bin, ["serve", "--http", "127.0.0.1:" + port, "--data-dir", path.join(tmp, "data"), "--node-tag", "A", "--raft-addr", "127.0.0.1:" + raftPort], {
    stdio: ["ignore", log, log],
    detached: false,
  });
  await waitReady(url, 30_000);
  process.env.ROOKERY_URL = url;
  process.env.ROOKERY_PW_TMP = tmp;
  process.env.ROOKERY_PW_PID = String(child.pid);
  fs.mkdirSync(path.join(__dirname, "artifacts"), { recursive: true });
};
