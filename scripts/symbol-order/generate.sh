#!/usr/bin/env bash
# Regenerates daemon/symbol-order.txt: the functions an idle daemon, a few drives and the common
# CLI commands execute, in the order they first run, read with valgrind's callgrind from the
# release binary. daemon/build.rs hands the list to the linker so that code sits together
# (docs/benchmarks.md, "Idle RSS and the order of the code"). Needs valgrind and python3.
# Usage (from the repository root): scripts/symbol-order/generate.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
cargo build --release --bin koru --manifest-path "$root/Cargo.toml"
koru="$target/release/koru"
work=$(mktemp -d /tmp/koru-symbol-order.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work"/{run,state,config,home,ws,out}
chmod 700 "$work/run"
export XDG_RUNTIME_DIR="$work/run" XDG_STATE_HOME="$work/state" XDG_CONFIG_HOME="$work/config" HOME="$work/home"
export KORU_SOCKET="$work/run/koru/koru.sock"
callgrind=(valgrind --tool=callgrind --demangle=no --dump-instr=no --compress-strings=no)

# 1. The daemon: start, idle with the observers on, a few drives, status and history, stop.
"${callgrind[@]}" --callgrind-out-file="$work/out/daemon.%p" "$koru" daemon --heartbeat-ms 60000 \
  >"$work/daemon.log" 2>&1 &
daemon=$!; pids+=("$daemon")
for _ in $(seq 150); do [ -S "$KORU_SOCKET" ] && break; sleep 0.2; done
[ -S "$KORU_SOCKET" ] || { cat "$work/daemon.log"; echo "the daemon did not start" >&2; exit 1; }
"$koru" dev fake-plugin --product vscode --workspace "$work/ws" >/dev/null 2>&1 &
pids+=($!)
sleep 5
for i in 1 2 3 4 5; do "$koru" send --workspace "$work/ws" --wait "symbol order $i" >/dev/null; done
"$koru" status >/dev/null
"$koru" drives >/dev/null
sleep 3

# 2. The CLI commands people and scripts run most, against that daemon.
for args in "--version" "status" "drives" "send --workspace $work/ws --wait cli"; do
  # shellcheck disable=SC2086
  "${callgrind[@]}" --callgrind-out-file="$work/out/cli.$(echo "$args" | cut -d' ' -f1 | tr -d -)" \
    "$koru" $args >/dev/null 2>&1
done
kill -TERM "$daemon"; wait "$daemon" || true

# The daemon's functions first (what stays resident), then the CLI's.
python3 "$root/scripts/symbol-order/executed_functions.py" /release/koru \
  "$work"/out/daemon.* "$work"/out/cli.* >"$root/daemon/symbol-order.txt"
echo "daemon/symbol-order.txt: $(wc -l <"$root/daemon/symbol-order.txt") functions"
