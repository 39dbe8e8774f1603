#!/usr/bin/env bash
# The TypeScript SDK's integration suite against a real agentauth
# (sdk/TESTING.md): run by TestSDKs (test/e2e) and TestDeployedSDKs
# (test/e2eaws), which start agentauth and the harness and pass the
# contract's environment. AGENTAUTH_SDK_REQUIRE=1: a missing harness is
# a failure, not a skip. Needs `ci.sh` (make sdk-check) to have installed
# node_modules.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

say() { printf 'sdk/typescript: %s\n' "$*"; }

if [ ! -d node_modules ]; then
  echo "sdk/typescript: node_modules is missing: run sdk/typescript/ci.sh (make sdk-check) first" >&2
  exit 1
fi
export AGENTAUTH_SDK_REQUIRE=1

say "build: tsc -p tsconfig.json"
npx --no-install tsc -p tsconfig.json

say "integration tests against ${AGENTAUTH_URL:-<AGENTAUTH_URL unset>} (auth ${AGENTAUTH_AUTH:-token}), harness ${AGENTAUTH_TEST_HARNESS:-<unset>}"
node --test --test-reporter=spec --test-concurrency=1 dist/test/integration/
