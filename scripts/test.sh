#!/usr/bin/env bash
# Runs every test of the project: formatting and vet checks, the Go tests
# (unit, integration, durability, handler and benchmark-smoke tests, with the
# race detector), a short run of each fuzz target, and the Node compatibility
# suite that drives the official ravendb npm client against a fresh binary.
#
#   ./scripts/test.sh            # everything
#   FUZZTIME=30s ./scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZTIME="${FUZZTIME:-10s}"
step() { printf '\n== %s\n' "$*"; }

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './compat/node_modules/*'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
echo "ok"

step "go vet"
go vet ./...

step "go test (race detector)"
go test -race -count=1 ./...

step "fuzz targets (${FUZZTIME} each)"
for target in ./backend/batch ./backend/document ./backend/changevector; do
	go test -run '^$' -fuzz '^FuzzParse$' -fuzztime "$FUZZTIME" "$target"
done

step "npm client compatibility suite (ravendb 7.2.2)"
bash compat/run.sh

step "all tests passed"
