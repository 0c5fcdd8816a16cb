"use strict";
const fs = require("node:fs");
const path = require("node:path");

module.exports = async () => {
  const pid = Number(process.env.ROOKERY_PW_PID || 0);
  if (pid) {
    try {
      process.kill(pid, "SIGTERM");
    } catch (e) {}
  }
  const tmp = process.env.ROOKERY_PW_TMP;
  if (tmp) {
    const log = path.join(tmp, "server.log");
    if (process.env.ROOKERY_SERVER_LOG && fs.existsSync(log)) process.stderr.write(fs.readFileSync(log, "utf8"));
    setTimeout(() => fs.rmSync(tmp, { recursive: true, force: true }), 500);
  }
};
