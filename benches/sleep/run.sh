#!/usr/bin/env bash
# Sleep and wake copy rates against the bus's pinned ceiling (issue 25's
# benchmark: offload-pinned at >= 80 % of the ceiling measured in the same
# run). Needs a GPU and a memrel built with the cuda feature
# (scripts/build-cuda.sh); MEMREL=path/to/memrel to pick one.
#   bash benches/sleep/run.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/../.."
M=${MEMREL:-target/release/memrel}
OUT=${1:-/tmp/memrel-sleep-bench}
"$M" run --scenario cuda-sleep --repeat 2 --out "$OUT"
"$M" run --scenario torch-gpu-sleep --repeat 2 --out "$OUT" || true   # needs torch
python3 benches/sleep/ceiling_report.py "$OUT"/*/*/sleep.csv
