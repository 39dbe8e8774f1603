#!/usr/bin/env bash
# The real agentauth stack on the local emulator, with the real CDK CLI.
#   localstack/deploy-local.sh deploy    bootstrap, deploy, re-apply what the emulator drops, seed demo secrets
#     [cdk args]                         more arguments for `cdk deploy`, e.g. -c jwksUrl=… (the Makefile's tools context)
#   localstack/deploy-local.sh destroy   delete the stack and what it retains
# The Makefile runs `make emulator-up` and `make build-lambdas` (host
# architecture) first: `make deploy-local`, `make destroy-local`.
#
# Settings (environment): AGENTAUTH_LOCAL_STACK (stack name, default
# agentauth-local), AGENTAUTH_LOCAL_PREFIX (physical-name prefix, default the
# stack name), MINISTACK_PORT (4566). Results: .tools/deploy-local/
# (outputs.json, cdk.out/, deploy.log; .tools/deploy-local-<port>/ for an
# emulator on another port).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

STACK=${AGENTAUTH_LOCAL_STACK:-agentauth-local}
PREFIX=${AGENTAUTH_LOCAL_PREFIX:-$STACK}
PORT=${MINISTACK_PORT:-4566}
export AWS_ENDPOINT_URL=http://127.0.0.1:$PORT AWS_REGION=us-east-1
OUT=$ROOT/.tools/deploy-local
if [ "$PORT" != 4566 ]; then OUT=$ROOT/.tools/deploy-local-$PORT; fi
TOOL=$ROOT/.tools/bin/localdeploy
ACCOUNT=000000000000

case "$(go env GOARCH)" in
amd64) ARCH=x86_64 ;;
arm64) ARCH=arm64 ;;
*) echo "deploy-local: host architecture $(go env GOARCH) has no Lambda architecture" >&2; exit 1 ;;
esac
CTX=(-c "arch=$ARCH" -c "prefix=$PREFIX" -c "stackName=$STACK" -c "assetDir=$ROOT/build/lambda")

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }
step() { echo; echo "== $*"; }

localdeploy() {
  (cd localstack && go build -o "$TOOL" ./localdeploy)
  "$TOOL" "$@"
}

output() { # output KEY: a stack output from outputs.json
  node -e 'const o = require(process.argv[1])[process.argv[2]] || {}; if (!o[process.argv[3]]) process.exit(1); console.log(o[process.argv[3]])' \
    "$OUT/outputs.json" "$STACK" "$1"
}

deploy() {
  mkdir -p "$OUT"
  local t0 t
  t0=$(now)
  for fn in gettoken callback turn; do
    [ -x "build/lambda/$fn/bootstrap" ] || { echo "build/lambda/$fn/bootstrap is missing: make build-lambdas LAMBDA_ARCH=$(go env GOARCH)" >&2; exit 1; }
  done

  step "cdk bootstrap aws://$ACCOUNT/us-east-1"
  t=$(now)
  localstack/cdk-local.sh bootstrap "aws://$ACCOUNT/us-east-1" "${CTX[@]}" --output "$OUT/cdk.out"
  echo "bootstrap: $(since "$t")"

  step "cdk deploy $STACK (arch $ARCH, prefix $PREFIX)"
  t=$(now)
  rm -f "$OUT/outputs.json"
  localstack/cdk-local.sh deploy "$STACK" --require-approval never "${CTX[@]}" "$@" \
    --output "$OUT/cdk.out" --outputs-file "$OUT/outputs.json" --progress events
  echo "deploy: $(since "$t")"

  step "re-apply what the emulator's CloudFormation dropped (localstack/README.md)"
  t=$(now)
  localdeploy reapply -stack "$STACK" -template "$OUT/cdk.out/$STACK.template.json"
  echo "re-apply: $(since "$t")"

  step "secrets the bundle and the functions name"
  localdeploy seed-secrets -prefix "$(output SecretPrefix)" -bundle build/lambda/gettoken/bundle \
    -template "$OUT/cdk.out/$STACK.template.json"

  step "function packages (the zips the CDK CLI uploaded)"
  localdeploy packages -stack "$STACK" -template "$OUT/cdk.out/$STACK.template.json"

  api=$(output ApiUrl)
  host=${api#http://}
  echo
  echo "deployed $STACK to MiniStack in $(since "$t0") (outputs: ${OUT#$ROOT/}/outputs.json)"
  echo "API: $api"
  echo "  curl -H 'Host: $host' http://127.0.0.1:$PORT/healthz"
  echo "  (or http://127.0.0.1:$PORT/_aws/execute-api/${host%%.*}/\$default/healthz)"
}

destroy() {
  step "delete what $STACK retains (table, key, session-keys secret) and the demo secrets"
  local prefix=$PREFIX/
  if [ -f "$OUT/outputs.json" ]; then prefix=$(output SecretPrefix || echo "$PREFIX/"); fi
  if [ -f "$OUT/cdk.out/$STACK.template.json" ]; then
    localdeploy purge-retained -stack "$STACK" -template "$OUT/cdk.out/$STACK.template.json" -prefix "$prefix"
  else
    echo "no synthesized template in ${OUT#$ROOT/}/cdk.out: nothing retained to purge"
  fi
  step "cdk destroy $STACK"
  if [ -f "$OUT/cdk.out/manifest.json" ]; then
    # The cloud assembly of the last deploy: no synth, so no build needed.
    localstack/cdk-local.sh destroy "$STACK" --force --app "$OUT/cdk.out"
  else
    localstack/cdk-local.sh destroy "$STACK" --force "${CTX[@]}" --output "$OUT/cdk.out"
  fi
  rm -f "$OUT/outputs.json"
}

case "${1:-}" in
deploy) shift; mkdir -p "$OUT" && deploy "$@" 2>&1 | tee "$OUT/deploy.log" ;;
destroy) destroy ;;
*) echo "usage: $0 deploy [cdk args]|destroy" >&2; exit 2 ;;
esac
