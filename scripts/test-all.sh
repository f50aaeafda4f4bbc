#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: installs what the tests need, then the Rust workspace tests.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v setpriv >/dev/null 2>&1 || need_apt+=(util-linux)
if [ "${#need_apt[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq "${need_apt[@]}"
  else
    echo "missing system packages: ${need_apt[*]} (install them with apt-get)" >&2
    exit 1
  fi
fi

cargo test --workspace --locked
