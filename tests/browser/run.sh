#!/usr/bin/env bash
# Runs the browser tests (the dashboard, the journal export page, the audit ledger page): installs system Chromium if missing, the pinned playwright-core (npm ci), builds koru, then node --test; fails (never skips) when any of it cannot run.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"

fail() { echo "tests/browser: $*" >&2; exit 1; }

CHROMIUM="${KORU_CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$CHROMIUM" ]; then
  [ "$(id -u)" = 0 ] || fail "no Chromium at $CHROMIUM; install it (apt-get install chromium) or run this as root"
  echo "installing chromium"
  apt-get update -qq || fail "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null || fail "cannot install chromium"
  [ -x "$CHROMIUM" ] || fail "chromium installed but $CHROMIUM is missing"
fi
command -v node >/dev/null || fail "node is required"
command -v npm >/dev/null || fail "npm is required"

# The pinned playwright-core only: it drives the system Chromium (never `playwright install`).
(cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error) || fail "npm ci failed"

if [ -z "${KORU_BIN:-}" ]; then
  (cd "$ROOT" && cargo build --bin koru) || fail "cargo build --bin koru failed"
  TARGET_DIR="$(cd "$ROOT" && cargo metadata --format-version 1 --no-deps | node -e 'let s="";process.stdin.on("data",c=>s+=c).on("end",()=>console.log(JSON.parse(s).target_directory))')"
  export KORU_BIN="$TARGET_DIR/debug/koru"
fi
[ -x "$KORU_BIN" ] || fail "no koru binary at $KORU_BIN"
export KORU_CHROMIUM="$CHROMIUM"

mkdir -p "$HERE/artifacts"
cd "$HERE"
exec node --test --test-concurrency=1 --test-reporter=spec "$@" dashboard.test.mjs journal-export.test.mjs audit-export.test.mjs
