#!/usr/bin/env bash
# Refreshes static/vendor/uplot from the npm registry at the pinned version:
# the browser build (uPlot.iife.min.js, which defines window.uPlot), its
# stylesheet and the license, as published. Run it from anywhere.
set -euo pipefail
VERSION=1.6.32
here="$(cd "$(dirname "$0")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
npm pack --silent "uplot@$VERSION" >/dev/null
tar -xzf "uplot-$VERSION.tgz"
cp package/dist/uPlot.iife.min.js package/dist/uPlot.min.css package/LICENSE "$here/"
echo "uplot $VERSION (npm: uplot@$VERSION, dist/uPlot.iife.min.js and dist/uPlot.min.css)" >"$here/VERSION"
