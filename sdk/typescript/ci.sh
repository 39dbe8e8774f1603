#!/usr/bin/env bash
# The TypeScript SDK's checks (make sdk-check): install the pinned
# dependencies (npm ci, skipped while node_modules matches
# package-lock.json), build, lint, type-check and run the unit tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

say() { printf 'sdk/typescript: %s\n' "$*"; }

command -v node >/dev/null || { echo "sdk/typescript: node is not installed (Node >= 20 is needed)" >&2; exit 1; }
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
  echo "sdk/typescript: Node $(node --version) is too old: Node >= 20 is needed" >&2
  exit 1
fi

# The stamp holds the lock file's hash and the Node version npm ci ran
# with: a changed lock (or Node) installs again.
stamp=node_modules/.agentauth-ci-stamp
want="$(sha256sum package-lock.json | cut -d' ' -f1) node-$(node --version)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  say "node_modules matches package-lock.json: npm ci skipped"
else
  say "npm ci (the pinned dependencies of package-lock.json)"
  npm ci --no-audit --no-fund --loglevel=error
  printf '%s\n' "$want" >"$stamp"
fi

say "build and type-check (tsc --strict, noUncheckedIndexedAccess): tsc -p tsconfig.json"
rm -rf dist
npx --no-install tsc -p tsconfig.json

say "lint and format check: biome check"
npx --no-install biome check .

say "unit tests: node --test dist/test/unit/"
node --test --test-reporter=spec dist/test/unit/
