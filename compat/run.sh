#!/usr/bin/env bash
# Entry point for CI and humans: builds the server, starts it, runs the suite.
set -euo pipefail
cd "$(dirname "$0")"
exec node run.js "$@"
