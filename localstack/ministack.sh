#!/usr/bin/env bash
# Local AWS for agentauth: MiniStack (PyPI, pinned) in a project venv,
# listening on 127.0.0.1:4566 only.
#   localstack/ministack.sh up      install if needed, start, wait until healthy
#   localstack/ministack.sh down    stop it
#   localstack/ministack.sh status  exit 0 when it answers
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=1.5.33
# MiniStack answers CloudWatch's smithy-rpc-v2-cbor protocol (the one the
# current AWS SDKs speak) only when cbor2 is importable, but lists cbor2 in
# its "test" extra alone; without it a CBOR client gets JSON labelled
# application/cbor and fails to decode it.
CBOR2_VERSION=5.9.0
VENV=.tools/ministack-$VERSION
PORT=${MINISTACK_PORT:-4566}
# One state directory (pid, log) per port, so a second emulator on another
# port (MINISTACK_PORT=4567) is started and stopped on its own.
STATE=.tools/ministack-run
if [ "$PORT" != 4566 ]; then STATE=.tools/ministack-run-$PORT; fi
URL=http://127.0.0.1:$PORT
BEDROCK_PROXY=${MINISTACK_BEDROCK_PROXY_URL:-http://127.0.0.1:4592}

healthy() { curl -fsS -m 2 "$URL/_localstack/health" >/dev/null 2>&1; }

case "${1:-}" in
up)
  if [ ! -x "$VENV/bin/ministack" ]; then
    echo "installing MiniStack $VERSION into $VENV (pip)"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check "ministack==$VERSION" "cbor2==$CBOR2_VERSION"
  elif ! "$VENV/bin/python" -c 'import cbor2' 2>/dev/null; then
    # MiniStack imports cbor2 per request, so a running one picks it up too.
    echo "installing cbor2 $CBOR2_VERSION into $VENV (pip)"
    "$VENV/bin/pip" install -q --disable-pip-version-check "cbor2==$CBOR2_VERSION"
  fi
  if healthy; then
    # A MiniStack started without the proxy answers Converse with canned
    # text: say so rather than let the turn tests fail obscurely.
    pid=$(cat "$STATE/pid" 2>/dev/null || true)
    if [ -n "$pid" ] && [ -r "/proc/$pid/environ" ] && ! tr '\0' '\n' <"/proc/$pid/environ" | grep -qx "MINISTACK_BEDROCK_PROXY_URL=$BEDROCK_PROXY"; then
      echo "MiniStack is up on $URL but without MINISTACK_BEDROCK_PROXY_URL=$BEDROCK_PROXY: restart it (localstack/ministack.sh down; up)" >&2
      exit 1
    fi
    echo "MiniStack already up on $URL"; exit 0
  fi
  mkdir -p "$STATE"
  # AWS_ENDPOINT_URL: MiniStack hands it to the Lambda functions it runs
  # (provided.* runtimes run as host processes), so their SDK calls come
  # back here instead of going to AWS (MiniStack also uses it for URLs it
  # builds to itself, e.g. S3 and Glue; they point at the same place).
  # MINISTACK_BEDROCK_PROXY_URL: MiniStack's bedrock-runtime forwards each
  # Converse call to <url>/v1/chat/completions; test/e2eaws serves the
  # scripted model (not a language model) there while it runs. MiniStack
  # reads it once, at start.
  AWS_ENDPOINT_URL=$URL BIND_HOST=127.0.0.1 GATEWAY_PORT=$PORT MINISTACK_BEDROCK_PROXY_URL=$BEDROCK_PROXY \
    nohup "$VENV/bin/ministack" >"$STATE/ministack.log" 2>&1 &
  echo $! >"$STATE/pid"
  for _ in $(seq 1 100); do
    if healthy; then echo "MiniStack $VERSION up on $URL (log: $STATE/ministack.log)"; exit 0; fi
    if ! kill -0 "$(cat "$STATE/pid")" 2>/dev/null; then break; fi
    sleep 0.3
  done
  echo "MiniStack did not start; last log lines:" >&2
  tail -20 "$STATE/ministack.log" >&2 || true
  exit 1
  ;;
down)
  if [ -f "$STATE/pid" ]; then
    pid=$(cat "$STATE/pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$STATE/pid"
  fi
  echo "MiniStack stopped"
  ;;
status)
  healthy
  ;;
*)
  echo "usage: $0 up|down|status" >&2
  exit 2
  ;;
esac
