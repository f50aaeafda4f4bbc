#!/usr/bin/env bash
# Interleaved A/B of two `koru` binaries on scripts/bench/drive_loop.py: each binary's daemon in a
# fresh private sandbox, one after the other, ROUNDS times (machines drift; interleaving keeps the
# comparison fair). Extra arguments go to `koru daemon` (--no-journal, --journal-prompts digest).
#   scripts/bench/drive_loop_ab.sh OLD_BIN NEW_BIN [daemon args…]
#   PIN=0 …   runs every process on vCPU 0 (taskset), which takes cross-CPU wake-ups out
# Env: ROUNDS (2), DRIVES (10000).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
old=$1 new=$2; shift 2
pin=()
[ -n "${PIN:-}" ] && pin=(taskset -c "$PIN")
run() {
  local bin=$1 label=$2; shift 2
  local box; box=$(mktemp -d); mkdir -p "$box/run" "$box/ws"; chmod 700 "$box/run"
  export XDG_RUNTIME_DIR=$box/run XDG_STATE_HOME=$box/state XDG_CACHE_HOME=$box/cache XDG_CONFIG_HOME=$box/config HOME=$box KORU_SOCKET=$box/run/koru.sock
  "${pin[@]}" "$bin" daemon --heartbeat-ms 60000 "$@" >"$box/daemon.log" 2>&1 &
  local pid=$!
  for _ in $(seq 100); do [ -S "$box/run/koru.sock" ] && break; sleep 0.1; done
  echo "== $label $*"
  "${pin[@]}" python3 "$here/drive_loop.py" "$box/run/koru.sock" "$pid" "$box/ws" "${DRIVES:-10000}"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -rf "$box"
}
for _ in $(seq "${ROUNDS:-2}"); do
  run "$old" A "$@"
  run "$new" B "$@"
done
