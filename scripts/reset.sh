#!/usr/bin/env bash
# Deletes the demo home `make run` keeps (`make reset`): its runtime token,
# OAuth keys, grants and sessions, agent instances, queued events and logs.
# It first says what it deletes, and refuses a directory that is not a
# demo home — one without the demo client's secret scripts/run.sh writes
# (secrets/demo-oidc/clientSecret), a link, /, your home, the repository —
# and a home a running agentauth holds (its agentauth.lock).
#
# The Makefile passes HOME_DIR (default .agentauth, or AGENTAUTH_HOME).
set -euo pipefail

: "${HOME_DIR:?}"
home=$HOME_DIR

refuse() {
  echo "make reset: not deleting $home: $1" >&2
  exit 1
}

if [ ! -e "$home" ] && [ ! -L "$home" ]; then
  echo "make reset: $home does not exist: nothing to delete"
  exit 0
fi
[ -L "$home" ] && refuse "it is a symbolic link"
[ -d "$home" ] || refuse "it is not a directory"
real=$(cd "$home" && pwd -P)
repo=$(cd "$(dirname "$0")/.." && pwd -P)
case $real in
  / | "$(cd ~ 2>/dev/null && pwd -P)" | "$repo" | "$(pwd -P)")
    refuse "it is $real, not a demo home" ;;
esac
[ -f "$home/secrets/demo-oidc/clientSecret" ] ||
  refuse "it has no secrets/demo-oidc/clientSecret, so make run did not make it (delete it yourself if it is yours to delete)"
# serve holds the home's lock while it runs (shared; key commands take it
# alone): a home in use stays.
if [ -f "$home/agentauth.lock" ] && command -v flock >/dev/null; then
  flock -xn "$home/agentauth.lock" true || refuse "an agentauth serve is running on it (stop make run first)"
fi

echo "make reset deletes the demo home $real:"
for entry in "$home"/* "$home"/.[!.]*; do
  [ -e "$entry" ] || [ -L "$entry" ] || continue
  name=${entry##*/}
  case $name in
    runtime-token) what="the runtime token" ;;
    secrets) what="the demo client's secret" ;;
    oauth) what="OAuth keys, grants and sessions" ;;
    turns) what="agent instances and their turns" ;;
    queue | worker) what="queued events" ;;
    ratelimit) what="the tool rate limits' state" ;;
    *.log) what="a log" ;;
    *) what="" ;;
  esac
  echo "  $name${what:+ — $what}"
done
rm -rf -- "$real"
echo "deleted; the next make run starts afresh (a new runtime token, no grants, no instances)"
