#!/usr/bin/env bash
# Fetches idiomorph at the pinned version from the npm registry and keeps its
# browser build (dist/idiomorph.min.js: defines the Idiomorph global) and its
# license. Run from anywhere; see static/vendor/README.md.
set -euo pipefail
VERSION=0.8.0
here="$(cd "$(dirname "$0")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "idiomorph@$VERSION" >/dev/null && tar xzf "idiomorph-$VERSION.tgz")
cp "$tmp/package/dist/idiomorph.min.js" "$here/idiomorph.min.js"
cp "$tmp/package/LICENSE" "$here/LICENSE"
printf 'idiomorph %s (npm), dist/idiomorph.min.js\n' "$VERSION" >"$here/VERSION"
