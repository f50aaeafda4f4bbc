#!/usr/bin/env bash
# Runs the MCP tests with the official Python SDK: a virtualenv (cached by the requirements' hash) with the pinned `mcp`, then test_mcp_sdk.py against the koru binary ($KORU_BIN, else target/debug/koru).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
KORU_BIN="${KORU_BIN:-$ROOT/target/debug/koru}"
[ -x "$KORU_BIN" ] || { echo "mcp-sdk: no koru binary at $KORU_BIN; run cargo build --bin koru" >&2; exit 1; }
command -v python3 >/dev/null || { echo "mcp-sdk: python3 is missing" >&2; exit 1; }
python3 -c 'import venv, ensurepip' 2>/dev/null || {
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
  else
    echo "mcp-sdk: python3's venv module is missing (apt-get install python3-venv)" >&2; exit 1
  fi
}
HASH=$(sha256sum "$HERE/requirements.txt" | cut -c1-12)
VENV="${KORU_MCP_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/koru-mcp-sdk-$HASH}"
if [ ! -x "$VENV/bin/python" ] || [ ! -f "$VENV/.complete" ]; then
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$HERE/requirements.txt"
  touch "$VENV/.complete"
fi
exec "$VENV/bin/python" "$HERE/test_mcp_sdk.py" "$KORU_BIN"
