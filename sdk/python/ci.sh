#!/usr/bin/env bash
# ci.sh <venv-dir>: install the Python SDK and its pinned dev tools into an
# isolated venv (once per change of the pins), then lint, type-check and run
# the unit tests. Called by `make test`; safe to run again and again.
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 <venv-dir>" >&2
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$1"
mkdir -p "$(dirname "$venv")"
venv="$(cd "$(dirname "$venv")" && pwd)/$(basename "$venv")"
python="${PYTHON:-python3}"

# The package runs on Python 3.10+; its dev tools need 3.11+ (the pinned
# langchain-core of the adapter tests does).
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "sdk/python: $python is $("$python" -V 2>&1); the dev environment needs Python 3.11 or later (set PYTHON=…)" >&2
  exit 1
fi
if [[ ! -x "$venv/bin/python" ]]; then
  echo "sdk/python: creating venv $venv with $("$python" -V 2>&1)"
  "$python" -m venv "$venv"
fi

# Reinstall only when the pins, the package metadata or the venv's Python changed.
stamp="$venv/.agentauth-sdk-stamp"
want="$(cat "$here/requirements-dev.txt" "$here/constraints-dev.txt" "$here/pyproject.toml" | sha256sum | cut -d' ' -f1)-$("$venv/bin/python" -c 'import sys; print(sys.version)' | sha256sum | cut -c1-12)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  echo "sdk/python: installing the pinned dev requirements and the package (-e .[aws,openai-agents,langchain])"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    -c "$here/constraints-dev.txt" -r "$here/requirements-dev.txt"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    -c "$here/constraints-dev.txt" -e "$here[aws,openai-agents,langchain]"
  echo "$want" >"$stamp"
else
  echo "sdk/python: venv $venv is up to date"
fi

if [[ "${SDK_INSTALL_ONLY:-}" == 1 ]]; then
  exit 0
fi

cd "$here"
echo "sdk/python: ruff check"
"$venv/bin/ruff" check .
echo "sdk/python: ruff format --check"
"$venv/bin/ruff" format --check .
echo "sdk/python: mypy --strict"
"$venv/bin/mypy" --strict
echo "sdk/python: pytest tests/unit"
"$venv/bin/python" -m pytest -q tests/unit
