#!/usr/bin/env bash
# Says how much of daemon/symbol-order.txt a built koru binary still has (names change when a
# dependency or a crate's build settings change; hashes in mangled names follow them). Below
# ~90 %, regenerate with scripts/symbol-order/generate.sh.
# Usage: scripts/symbol-order/check.sh [path/to/koru]   (default target/release/koru)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
binary=${1:-${CARGO_TARGET_DIR:-$root/target}/release/koru}
order="$root/daemon/symbol-order.txt"
listed=$(grep -c . "$order")
present=$(nm --defined-only "$binary" | awk '{print $3}' | sort -u | comm -12 - <(sort -u "$order") | wc -l)
echo "symbol order: $present of $listed listed functions are in $binary ($((100 * present / listed)) %)"
