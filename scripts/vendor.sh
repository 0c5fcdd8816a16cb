#!/usr/bin/env bash
# Refreshes the vendored browser libraries under static/vendor/ from the npm
# registry at their pinned versions (see static/vendor/README.md).
#   ./scripts/vendor.sh           # every library
#   ./scripts/vendor.sh uplot     # one
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -gt 0 ]; then
	libs=("$@")
else
	libs=()
	for f in static/vendor/*/refresh.sh; do
		[ -e "$f" ] || continue
		libs+=("$(basename "$(dirname "$f")")")
	done
fi
for lib in "${libs[@]}"; do
	echo "== $lib"
	bash "static/vendor/$lib/refresh.sh"
done
