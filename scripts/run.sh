#!/usr/bin/env bash
# Runs agentauth locally with the demo OpenID provider (`make run`): creates
# the home directory and the demo client's secret on first use, starts the
# provider and waits until it listens, starts serve and waits until it
# answers /healthz — so the bundle and the configuration were accepted —
# and only then prints the banner (the runtime token, how to get an agent
# JWT); it serves until interrupted. A refused bundle ends the script with
# serve's error and status and no banner. The provider and serve are
# stopped when this script exits, whatever the reason.
#
# The Makefile passes its variables:
#   BIN            the agentauth binary (built by `make build`)
#   HOME_DIR       state: secrets/, runtime-token, provider.log, …
#   BUNDLE         the bundle directory to start from: its files are
#                  imported into the git repository HOME_DIR/bundle, which
#                  serve runs (its history records every changeset)
#   ADDR           agentauth's listen address
#   PROVIDER_DIR   the demo provider (test/e2e/provider, npm ci done)
#   PROVIDER_PORT  the demo provider's port on 127.0.0.1
#   MODEL_ADDR     where the scripted model listens (examples/bundle's Model
#                  points at 127.0.0.1:9292): a fixed script that speaks the
#                  chat-completions and Converse wire formats, NOT a language
#                  model; set MODEL_ADDR= (empty) to start none and point the
#                  bundle's Model at your own endpoint
# AGENTAUTH_JWKS_URL, AGENTAUTH_JWT_ISSUER and AGENTAUTH_JWT_AUDIENCE default
# to the demo provider, so the tool routes accept its agent JWTs. /mcp wants
# JWTs whose audience is its own URL: the script tells the provider (and
# agentauth) that resource — AGENTAUTH_MCP_RESOURCE, else
# <AGENTAUTH_PUBLIC_URL or http://ADDR>/mcp — so the provider mints them.
# AGENTAUTH_CONSOLE_ISSUER, _CLIENT_ID and _CLIENT_SECRET default to the
# demo provider's agentauth-console client, whose redirect URI the script
# gives it, so the operator console (/console/) signs in there.
set -euo pipefail

: "${BIN:?}" "${HOME_DIR:?}" "${BUNDLE:?}" "${ADDR:?}" "${PROVIDER_DIR:?}" "${PROVIDER_PORT:?}"

# The demo client's secret lives where the bundle's secretRef points; the
# home holds secrets, so only its owner may enter it.
mkdir -p "$HOME_DIR/secrets/demo-oidc"
chmod 700 "$HOME_DIR" "$HOME_DIR/secrets"
if [ ! -f "$HOME_DIR/secrets/demo-oidc/clientSecret" ]; then
  (umask 077 && printf 'demo-secret\n' >"$HOME_DIR/secrets/demo-oidc/clientSecret")
fi

public_url=${AGENTAUTH_PUBLIC_URL:-http://$ADDR}
mcp_resource=${AGENTAUTH_MCP_RESOURCE:-${public_url%/}/mcp}

# banner says what runs and how to call it: printed once serve answers.
banner() {
echo "runtime token (Authorization: Bearer …): $("$BIN" runtime-token --home "$HOME_DIR")"
echo "demo OpenID provider: http://127.0.0.1:$PROVIDER_PORT (log in as any name, e.g. alice)"
echo "agent JWT for the tool routes: curl -s -u agentauth-agent:agent-secret -d grant_type=client_credentials -d resource=urn:agentauth:tools -d scope=profile.read http://127.0.0.1:$PROVIDER_PORT/token"
echo "MCP server: $mcp_resource (Streamable HTTP, header Authorization: Bearer <access_token>; README.md \"MCP from make run\")"
echo "agent JWT for MCP (1 h): curl -s -u agentauth-agent:agent-secret -d grant_type=client_credentials -d resource=$mcp_resource -d scope=profile.read http://127.0.0.1:$PROVIDER_PORT/token"
echo "operator console: ${public_url%/}/console/ (sign in at the demo provider as admin: every tenant; as acme-admin: tenant acme)"
echo "bundle: $repo, a git repository imported from $BUNDLE (history: $BIN bundle log --bundle $repo)"
if [ -n "$model" ]; then echo "scripted model (a fixed script, not a language model): http://$MODEL_ADDR/v1"; fi
echo "ready: agentauth on http://$ADDR (open it in a browser for what runs); Ctrl-C stops it, make reset deletes its state in $HOME_DIR"
}

# answers tells whether something accepts connections on ADDR (path:
# GET path answers 200), with bash's /dev/tcp: make run needs no curl.
answers() {
  local host=${ADDR%:*} port=${ADDR##*:}
  host=${host#[}; host=${host%]}
  case $host in ''|0.0.0.0) host=127.0.0.1 ;; ::) host=::1 ;; esac
  ( exec 3<>"/dev/tcp/$host/$port" || exit 1
    [ -z "${1:-}" ] && exit 0
    printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$1" "$ADDR" >&3
    IFS= read -r -t 2 status <&3 && [[ $status == HTTP/1.?" 200"* ]] ) 2>/dev/null
}
# Another server on ADDR would answer the readiness check below for a
# serve that never started.
if answers; then
  echo "make run: something already listens on $ADDR (another make run?): stop it, or choose another address (make run ADDR=127.0.0.1:8081)" >&2
  exit 1
fi

PROVIDER_PORT=$PROVIDER_PORT PROVIDER_MCP_RESOURCE=$mcp_resource PROVIDER_CONSOLE_REDIRECTS=${public_url%/}/console/auth/callback node "$PROVIDER_DIR/provider.mjs" >"$HOME_DIR/provider.log" 2>&1 &
provider=$!
model=
if [ -n "${MODEL_ADDR:-}" ]; then
  "$BIN" scripted-model --addr "$MODEL_ADDR" >"$HOME_DIR/scripted-model.log" 2>&1 &
  model=$!
fi
# A background job of a script ignores Ctrl-C, so the provider, the
# scripted model and serve are stopped here rather than by the terminal;
# serve is waited for, so its shutdown is over when make returns.
serve=
stop() {
  trap - EXIT INT TERM
  if [ -n "$serve" ]; then kill -TERM "$serve" 2>/dev/null || true; wait "$serve" 2>/dev/null || true; fi
  kill $provider $model 2>/dev/null || true
  wait $provider $model 2>/dev/null || true
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for _ in $(seq 1 50); do
  grep -q listening "$HOME_DIR/provider.log" 2>/dev/null && break
  sleep 0.2
done
grep -q listening "$HOME_DIR/provider.log" || {
  echo "demo provider did not start:"
  cat "$HOME_DIR/provider.log"
  exit 1
}

# serve runs a git repository in the home: agents' changesets commit to
# it (docs/changesets.md). BUNDLE's files are imported at every start, so
# what changed in them since the last start is merged with what agents
# committed; the same lines changed on both sides stop the start here.
repo="$HOME_DIR/bundle"
status=0
"$BIN" bundle import --bundle "$repo" --home "$HOME_DIR" --from "$BUNDLE" || status=$?
if [ "$status" -ne 0 ]; then
  echo "make run: agentauth serve did not start: $BUNDLE was not imported (its error is above); no server is running" >&2
  exit "$status"
fi

AGENTAUTH_JWKS_URL=${AGENTAUTH_JWKS_URL:-http://127.0.0.1:$PROVIDER_PORT/jwks} \
AGENTAUTH_JWT_ISSUER=${AGENTAUTH_JWT_ISSUER:-http://127.0.0.1:$PROVIDER_PORT} \
AGENTAUTH_JWT_AUDIENCE=${AGENTAUTH_JWT_AUDIENCE:-urn:agentauth:tools} \
AGENTAUTH_MCP_RESOURCE=$mcp_resource \
AGENTAUTH_CONSOLE_ISSUER=${AGENTAUTH_CONSOLE_ISSUER:-http://127.0.0.1:$PROVIDER_PORT} \
AGENTAUTH_CONSOLE_CLIENT_ID=${AGENTAUTH_CONSOLE_CLIENT_ID:-agentauth-console} \
AGENTAUTH_CONSOLE_CLIENT_SECRET=${AGENTAUTH_CONSOLE_CLIENT_SECRET:-console-secret} \
  "$BIN" serve --bundle "$repo" --home "$HOME_DIR" --addr "$ADDR" &
serve=$!

# Ready once /healthz answers: serve listens only after the bundle and the
# configuration were accepted. Until then nothing looks like a start.
for _ in $(seq 1 600); do
  if ! kill -0 "$serve" 2>/dev/null; then
    status=0
    wait "$serve" || status=$?
    serve=
    echo "make run: agentauth serve did not start (exit status $status; its error is above): no server is running" >&2
    exit $((status == 0 ? 1 : status))
  fi
  answers /healthz && break
  sleep 0.1
done
if ! answers /healthz; then
  echo "make run: agentauth serve did not answer http://$ADDR/healthz within 60 s: stopping it" >&2
  exit 1
fi
banner
status=0
wait "$serve" || status=$?
serve=
exit "$status"
