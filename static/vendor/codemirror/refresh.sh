#!/usr/bin/env bash
# Rebuilds static/vendor/codemirror/ from the npm registry: installs the
# pinned CodeMirror 6 packages and esbuild into a temporary folder (npm ci
# against _build/package-lock.json, so every transitive package is pinned
# too), bundles _build/entry.js into codemirror.js (one minified IIFE that
# defines the global RookeryCM), and writes LICENSE (the license of every
# package that ended up in the bundle) and VERSION.
#
# To move to new versions: change them in PACKAGES below, delete
# _build/package-lock.json, run this script, check the editor's browser
# test (playwright/tests/editor.spec.js), commit.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
PACKAGES=(
	"codemirror@6.0.2"
	"@codemirror/state@6.7.6"
	"@codemirror/view@6.43.15"
	"@codemirror/language@6.13.1"
	"@codemirror/lang-json@6.0.2"
	"@codemirror/lint@6.9.8"
	"@codemirror/merge@6.12.3"
	"esbuild@0.28.2"
)
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
if [ -f "$here/_build/package-lock.json" ]; then
	cp "$here/_build/package.json" "$here/_build/package-lock.json" .
	npm ci --no-audit --no-fund >/dev/null
else
	printf '{"name":"rookery-codemirror-bundle","private":true}\n' >package.json
	npm install --save-exact --no-audit --no-fund "${PACKAGES[@]}" >/dev/null
	cp package.json package-lock.json "$here/_build/"
fi
cp "$here/_build/entry.js" .
./node_modules/.bin/esbuild entry.js --bundle --format=iife --global-name=RookeryCM \
	--minify --target=es2020 --legal-comments=none --metafile=meta.json \
	--outfile="$here/codemirror.js" --log-level=warning
node - "$here" <<'JS'
const fs = require("fs"), path = require("path");
const here = process.argv[2];
const meta = JSON.parse(fs.readFileSync("meta.json", "utf8"));
const pkgs = new Set();
for (const input of Object.keys(meta.inputs)) {
  const m = input.match(/node_modules\/((?:@[^/]+\/)?[^/]+)\//);
  if (m) pkgs.add(m[1]);
}
const names = [...pkgs].sort();
let license = "The studio's CodeMirror bundle (codemirror.js) contains these npm packages, each under its own license:\n";
let version = "";
for (const name of names) {
  const dir = path.join("node_modules", name);
  const pj = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
  version += `${name}@${pj.version}\n`;
  const file = fs.readdirSync(dir).find((f) => /^(licen[cs]e|copying)(\.(md|txt))?$/i.test(f));
  if (!file) throw new Error(`${name} has no license file`);
  license += `\n==== ${name}@${pj.version} (${pj.license}) ====\n\n` + fs.readFileSync(path.join(dir, file), "utf8").trim() + "\n";
}
const esb = JSON.parse(fs.readFileSync("node_modules/esbuild/package.json", "utf8")).version;
version += `(bundled with esbuild@${esb})\n`;
fs.writeFileSync(path.join(here, "LICENSE"), license);
fs.writeFileSync(path.join(here, "VERSION"), version);
JS
echo "codemirror.js: $(wc -c <"$here/codemirror.js") bytes"
