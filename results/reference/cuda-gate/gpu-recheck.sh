#!/usr/bin/env bash
# One device call after issue 12's gate and worker changes: re-makes the three
# GPU gate verdicts of this directory with the current memrel from the
# committed records (same/, worse/, budget/ against results/baselines/gpu), and
# runs one cuda-flush cycle as a smoke test of the worker's private event pipe
# on the GPU. Needs .gpu/memrel.xz; writes $OUT/results.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/../../.."
: "${OUT:?}"
R=/tmp/results; mkdir -p "$R"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" .gpu/memrel.xz /tmp/memrel && chmod +x /tmp/memrel || exit 1
export MEMREL_CACHE_DIR=/tmp/memrel-cache
M=/tmp/memrel
G=results/reference/cuda-gate
{ nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv; uname -a; nproc; } > "$R/device.txt" 2>&1
. results/reference/device-lib.sh  # unxz, step
for d in same worse budget; do
  step "$d-check" $M check --baseline gpu --out results --verdict-dir "$R/verdict-$d" "$G/$d"
done
step smoke $M run --scenario cuda-flush --cycles 1 --out "$R/smoke"
echo "== done ($(date -u +%H:%M:%S))" >> "$R/steps.log"
tar -C /tmp -czf "$OUT/results.tar.gz" results
