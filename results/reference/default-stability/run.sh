#!/usr/bin/env bash
# The default `memrel run`, 10 times in a row: each run's console output goes
# to run-N.txt, and each strategy's classification ("retains in k of n runs"
# or "gives back in all n runs") to classification.log, one line per run and
# strategy. Usage (from the repository root, after `cargo build --release`):
#   bash results/reference/default-stability/run.sh [OUT]
# OUT (default /tmp/memrel-default-stability) holds the results directories.
set -euo pipefail
cd "$(dirname "$0")/../../.."
here=results/reference/default-stability
out=${1:-/tmp/memrel-default-stability}
log=$here/classification.log
: >"$log"
for n in $(seq 1 10); do
    start=$(date +%s.%N)
    ./target/release/memrel run --out "$out" >"$here/run-$n.txt" 2>/dev/null
    wall_s=$(echo "$(date +%s.%N) - $start" | bc)
    # The verdict lines follow the "host RSS per run" heading.
    awk -v n="$n" -v wall="$wall_s" '
        /^host RSS per run/ { on = 1; next }
        on && /^  [^ ]/ { name = $1; sub(/^  [^ ]+ +/, ""); sub(/  +retained .*/, "");
                          printf "run %d  wall %.0f s  %-12s %s\n", n, wall, name, $0; next }
        on { on = 0 }
    ' "$here/run-$n.txt" | tee -a "$log"
done
echo
echo "classifications per strategy over the 10 runs:"
awk '{ word = ($7 == "retains") ? "retains" : "gives back"; print $6, word }' "$log" | sort | uniq -c
