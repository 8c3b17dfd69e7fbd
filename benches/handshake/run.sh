#!/usr/bin/env bash
# The edge handshake's round trip (issue 35): from the repository root,
#   bash benches/handshake/run.sh [N]
# builds memrel (release) and runs edges.py under `memrel exec` (host memory)
# and `memrel exec --tree` (the tree's PSS read at each edge); prints one
# edge call's time with the handshake and without it.
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${1:-500}
cargo build --release --locked -q
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
for mode in "" "--tree"; do
  echo "== memrel exec $mode"
  target/release/memrel exec $mode --out "$OUT" -- python3 benches/handshake/edges.py "$N" "$OUT/report" > /dev/null 2>&1
  cat "$OUT/report"; rm -f "$OUT/report"
done
