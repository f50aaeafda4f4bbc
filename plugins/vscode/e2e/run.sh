#!/usr/bin/env bash
# Runs the extension's end-to-end suite: set-up (system packages, Node 24, code-server, Chromium), the .vsix, then e2e.test.mjs against the koru binary ($KORU_BIN, else target/debug/koru).
set -euo pipefail
E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$E2E_DIR/../../.." && pwd)"
"$E2E_DIR/setup.sh"
# The extension's package is built with the plugin's own pinned tools (npm ci in plugins/vscode).
(cd "$E2E_DIR/.." && { [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error; } && npm run --silent package >/dev/null)
[ -x "${KORU_BIN:-$ROOT/target/debug/koru}" ] || (cd "$ROOT" && cargo build --bin koru)
# shellcheck disable=SC1091
. "${KORU_E2E_CACHE:-$HOME/.cache/koru-e2e}/env.sh"
cd "$ROOT"
exec node --test --test-reporter=spec plugins/vscode/e2e/e2e.test.mjs
