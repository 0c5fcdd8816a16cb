#!/usr/bin/env bash
# Runs the pinned templ code generator: ./scripts/templ.sh generate
# (kept out of go.mod's tool directives: templ's own dependency graph is
# large and does not belong in the server's).
set -euo pipefail
cd "$(dirname "$0")/.."
exec go run github.com/a-h/templ/cmd/templ@v0.3.977 "$@"
