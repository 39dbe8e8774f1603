#!/usr/bin/env bash
# integration.sh <venv-dir>: run the SDK's integration tests against the
# agentauth a Go test started (sdk/TESTING.md: the environment comes from
# the caller). A missing harness fails them (AGENTAUTH_SDK_REQUIRE=1).
# Installs the venv first when ci.sh has not (the same stamp).
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 <venv-dir>" >&2
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$1"
if [[ ! -x "$venv/bin/pytest" ]]; then
  echo "sdk/python: no venv at $venv: installing it (ci.sh's install step)"
  SDK_INSTALL_ONLY=1 "$here/ci.sh" "$venv"
fi
cd "$here"
echo "sdk/python: pytest tests/integration against ${AGENTAUTH_URL:-<AGENTAUTH_URL unset>} (auth ${AGENTAUTH_AUTH:-token})"
AGENTAUTH_SDK_REQUIRE=1 exec "$venv/bin/python" -m pytest -v -rs tests/integration
