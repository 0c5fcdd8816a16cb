#!/usr/bin/env node
// Runs the Node compatibility suite against a freshly built Rookery server.
//
//   1. npm ci (only when node_modules is missing)
//   2. go build -o <tmp>/studio ./cmd/studio        (from the repository root)
//   3. <tmp>/studio serve --http 127.0.0.1:<free port> --data-dir <tmp>/data --node-tag A
//   4. wait for GET /readyz == 200 (30 s)
//   5. node --test test/*.test.js   with ROOKERY_URL set
//   6. stop the server, exit with the test runner's status
//
// Environment knobs (all optional):
//   ROOKERY_URL       use an already running server; skips build and start
//   ROOKERY_BIN       use this server binary instead of building one
//   ROOKERY_KEEP_TMP  keep the temporary directory (binary, data, server log)
//   ROOKERY_SERVER_LOG=1  print the whole server log at the end, not only on failure
//   Extra arguments are passed to `node --test` (e.g. --test-name-pattern=identity).
"use strict";

const { spawn, spawnSync } = require("node:child_process");
const fs = require("node:fs");
const http = require("node:http");
const net = require("node:net");
const os = require("node:os");
const path = require("node:path");

const compatDir = __dirname;
const repoRoot = path.resolve(compatDir, "..");
const READY_TIMEOUT_MS = 30_000;

function log(msg) {
    process.stderr.write(`[compat] ${msg}\n`);
}

function run(cmd, args, opts) {
    log(`$ ${cmd} ${args.join(" ")}`);
    const r = spawnSync(cmd, args, { stdio: "inherit", ...opts });
    if (r.error) {
        throw r.error;
    }
    if (r.status !== 0) {
        throw new Error(`${cmd} ${args.join(" ")} exited with ${r.status ?? r.signal}`);
    }
}

function freePort() {
    return new Promise((resolve, reject) => {
        const srv = net.createServer();
        srv.unref();
        srv.on("error", reject);
        srv.listen(0, "127.0.0.1", () => {
            const { port } = srv.address();
            srv.close(() => resolve(port));
        });
    });
}

function getStatus(url) {
    return new Promise(resolve => {
        const req = http.get(url, { timeout: 2000 }, res => {
            res.resume();
            resolve(res.statusCode);
        });
        req.on("timeout", () => req.destroy(new Error("timeout")));
        req.on("error", () => resolve(0));
    });
}

const sleep = ms => new Promise(r => setTimeout(r, ms));

async function waitReady(baseUrl, server) {
    const deadline = Date.now() + READY_TIMEOUT_MS;
    while (Date.now() < deadline) {
        if (server && server.exitCode !== null) {
            throw new Error(`server exited early with code ${server.exitCode}`);
        }
        if (await getStatus(`${baseUrl}/readyz`) === 200) {
            return;
        }
        await sleep(200);
    }
    throw new Error(`server at ${baseUrl} not ready (GET /readyz != 200) after ${READY_TIMEOUT_MS / 1000} s`);
}

function stopServer(server) {
    return new Promise(resolve => {
        if (!server || server.exitCode !== null || server.signalCode !== null) {
            return resolve();
        }
        const killTimer = setTimeout(() => server.kill("SIGKILL"), 5000);
        server.once("exit", () => {
            clearTimeout(killTimer);
            resolve();
        });
        server.kill("SIGTERM");
    });
}

function testFiles() {
    const dir = path.join(compatDir, "test");
    return fs.readdirSync(dir)
        .filter(f => f.endsWith(".test.js"))
        .sort()
        .map(f => path.join("test", f));
}

function nodeTestArgs(extra) {
    const args = ["--test", "--test-timeout=120000"];
    // Not listed in allowedNodeEnvironmentFlags, so probe: exists from Node 20.14 / 22.0 on.
    if (spawnSync(process.execPath, ["--test-force-exit", "-e", ""]).status === 0) {
        // A test file whose client left a handle open must not hang CI.
        args.push("--test-force-exit");
    }
    // Test files named on the command line run alone; otherwise all of them.
    const named = extra.filter(a => a.endsWith(".test.js"));
    const flags = extra.filter(a => !a.endsWith(".test.js"));
    return [...args, ...flags, ...(named.length > 0 ? named : testFiles())];
}

let testChild = null;

function runTests(url, extra) {
    return new Promise(resolve => {
        const child = testChild = spawn(process.execPath, nodeTestArgs(extra), {
            cwd: compatDir,
            stdio: "inherit",
            detached: true, // own process group, so an interrupt can stop the test files too
            env: { ...process.env, ROOKERY_URL: url },
        });
        child.on("exit", (code, signal) => resolve(code ?? (signal ? 1 : 0)));
    });
}

async function main() {
    const extra = process.argv.slice(2);

    if (!fs.existsSync(path.join(compatDir, "node_modules", "ravendb", "package.json"))) {
        run("npm", ["ci", "--no-audit", "--no-fund"], { cwd: compatDir });
    }

    if (process.env.ROOKERY_URL) {
        log(`using running server ${process.env.ROOKERY_URL}`);
        await waitReady(process.env.ROOKERY_URL.replace(/\/+$/, ""), null);
        return runTests(process.env.ROOKERY_URL.replace(/\/+$/, ""), extra);
    }

    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "rookery-compat-"));
    let server = null;
    let logFd = null;
    const logPath = path.join(tmp, "server.log");
    let status = 1;
    const onSignal = sig => {
        log(`got ${sig}, stopping tests and server`);
        if (testChild && testChild.exitCode === null) {
            try {
                process.kill(-testChild.pid, "SIGKILL");
            } catch {
                // already gone
            }
        }
        stopServer(server).finally(() => {
            if (!process.env.ROOKERY_KEEP_TMP) {
                fs.rmSync(tmp, { recursive: true, force: true });
            }
            process.exit(130);
        });
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
    try {
        let bin = process.env.ROOKERY_BIN;
        if (!bin) {
            bin = path.join(tmp, "studio");
            run("go", ["build", "-o", bin, "./cmd/studio"], { cwd: repoRoot });
        }
        const port = await freePort();
        const baseUrl = `http://127.0.0.1:${port}`;
        const raftPort = await freePort();
        const args = ["serve", "--http", `127.0.0.1:${port}`, "--data-dir", path.join(tmp, "data"), "--node-tag", "A", "--raft-addr", `127.0.0.1:${raftPort}`];
        log(`$ ${bin} ${args.join(" ")}   (log: ${logPath})`);
        logFd = fs.openSync(logPath, "a");
        server = spawn(bin, args, { stdio: ["ignore", logFd, logFd] });
        server.on("error", err => log(`server failed to start: ${err.message}`));
        await waitReady(baseUrl, server);
        log(`server ready at ${baseUrl}`);
        process.env.ROOKERY_BIN = bin; // cluster tests start their own nodes from it
        status = await runTests(baseUrl, extra);
    } catch (err) {
        log(`error: ${err.message}`);
        status = 1;
    } finally {
        await stopServer(server);
        if (logFd !== null) {
            fs.closeSync(logFd);
        }
        if ((status !== 0 || process.env.ROOKERY_SERVER_LOG) && fs.existsSync(logPath)) {
            const text = fs.readFileSync(logPath, "utf8");
            const tail = process.env.ROOKERY_SERVER_LOG ? text : text.split("\n").slice(-60).join("\n");
            log(`server log${process.env.ROOKERY_SERVER_LOG ? "" : " (last 60 lines)"}:\n${tail}`);
        }
        if (process.env.ROOKERY_KEEP_TMP) {
            log(`kept ${tmp}`);
        } else {
            fs.rmSync(tmp, { recursive: true, force: true });
        }
    }
    return status;
}

main().then(
    code => process.exit(code),
    err => {
        log(`fatal: ${err.stack || err}`);
        process.exit(1);
    },
);
