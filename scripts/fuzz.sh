#!/usr/bin/env bash
# Runs every fuzz target of the root module for FUZZTIME each, one after the
# other (Go fuzzes one target per process), and fails if any target fails.
# Targets are discovered, not listed, so a new Fuzz function is fuzzed
# without editing this file or the Makefile.
#
#   FUZZTIME  how long each target runs (default 30s; go test -fuzztime syntax)
#   FUZZPKG   which packages to search (default ./...; e.g. ./shared/edge/...)
#   GO        the go command (default go)
#
# infra/ and localstack/ are modules of their own and hold no fuzz targets.
set -euo pipefail

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-30s}
FUZZPKG=${FUZZPKG:-./...}

cd "$(dirname "$0")/.."

# Only packages whose test files declare a Fuzz function are asked for their
# list: `go test -list` builds a test binary, and building one for every
# package would cost minutes for nothing. The list itself comes from
# `go test -list`, so build constraints and renamed files are respected.
candidates=()
while read -r pkg dir files; do
  [ -n "$files" ] || continue
  # shellcheck disable=SC2086 # files is a space-separated list of names
  if (cd "$dir" && grep -qE '^func Fuzz[A-Z0-9_]' $files); then
    candidates+=("$pkg")
  fi
done < <($GO list -f '{{.ImportPath}} {{.Dir}} {{join .TestGoFiles " "}} {{join .XTestGoFiles " "}}' $FUZZPKG)

module=$($GO list -m)
targets=() # "package target" pairs
for pkg in "${candidates[@]}"; do
  rel=./${pkg#"$module"/}
  # A package whose tests do not build stops the run here (set -e), rather
  # than being skipped without a word.
  listed=$($GO test -list '^Fuzz' "$rel")
  for name in $(grep -E '^Fuzz' <<<"$listed"); do
    targets+=("$rel $name")
  done
done

total=${#targets[@]}
if [ "$total" -eq 0 ]; then
  echo "fuzz: no fuzz targets in $FUZZPKG" >&2
  exit 1
fi

failed=()
start=$SECONDS
i=0
for t in "${targets[@]}"; do
  i=$((i + 1))
  pkg=${t% *}
  name=${t#* }
  echo "fuzz $i/$total $name $pkg ($FUZZTIME)"
  # Anchored: -fuzz must match exactly one target, and FuzzParse would also
  # match FuzzParseEnvKeys.
  if ! $GO test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg"; then
    failed+=("$name $pkg")
  fi
done

echo "fuzz: $((total - ${#failed[@]}))/$total targets passed in $((SECONDS - start))s ($FUZZTIME each)"
if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz: failed (an input that fails is saved under <package>/testdata/fuzz/<target>/):"
  printf '  %s\n' "${failed[@]}"
  exit 1
fi
