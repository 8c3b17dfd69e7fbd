#!/usr/bin/env bash
# One device call (issue 11): the VRAM references and the GPU gate, on a fresh
# GPU machine, in this order:
#  1. `compare --scenario article-gpu --repeat 2` first, so its first worker
#     pays candle's PTX JIT in its warm-up (the chart must still line up);
#  2. `compare --scenario cuda-flush --repeat 2 --save-baseline gpu`;
#  3. the gate: an unchanged cuda-flush (repeat 2) checked against `gpu`
#     (exit 0), cuda-flush without its `release` step (exit 1), and cuda-flush
#     with a VRAM budget its `drop` exceeds (exit 1).
# Needs .gpu/memrel.xz (scripts/build-cuda.sh); writes $OUT/results.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/../../.."
: "${OUT:?}"
R=/tmp/results; mkdir -p "$R"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" .gpu/memrel.xz /tmp/memrel && chmod +x /tmp/memrel || exit 1
export MEMREL_CACHE_DIR=/tmp/memrel-cache
M=/tmp/memrel
{ nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv; uname -a; nproc; } > "$R/device.txt" 2>&1
ls ~/.nv/ComputeCache > "$R/jit-cache-before.txt" 2>&1
. results/reference/device-lib.sh  # unxz, step
step article-gpu $M compare --scenario article-gpu --repeat 2 --out "$R/ref"
step cuda-flush $M compare --scenario cuda-flush --repeat 2 --save-baseline gpu --out "$R"
step same-run $M run --scenario cuda-flush --repeat 2 --out "$R/same"
step same-check $M check --baseline gpu --out "$R" --verdict-dir "$R/verdict-same" "$(ls -d "$R"/same/cuda-flush/* | tail -1)"
mkdir -p /tmp/worse /tmp/budget
sed 's/"idle 300", "release", "settle"/"idle 300", "settle"/' scenarios/cuda-flush.toml > /tmp/worse/cuda-flush.toml
grep -q '"release"' /tmp/worse/cuda-flush.toml && echo "sed did not remove the release step" >> "$R/steps.log"
cp /tmp/worse/cuda-flush.toml "$R/worse-cuda-flush.toml"
step worse-run $M run --scenario /tmp/worse/cuda-flush.toml --repeat 2 --out "$R/worse"
step worse-check $M check --baseline gpu --out "$R" --verdict-dir "$R/verdict-worse" "$(ls -d "$R"/worse/cuda-flush/* | tail -1)"
{ cat scenarios/cuda-flush.toml; printf '\n[thresholds]\nmax_retained_vram_mib = 100\n'; } > /tmp/budget/cuda-flush.toml
cp /tmp/budget/cuda-flush.toml "$R/budget-cuda-flush.toml"
step budget-run $M run --scenario /tmp/budget/cuda-flush.toml --repeat 2 --out "$R/budget"
step budget-check $M check --baseline gpu --out "$R" --verdict-dir "$R/verdict-budget" "$(ls -d "$R"/budget/cuda-flush/* | tail -1)"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv > "$R/apps-after.txt" 2>&1
echo "== done ($(date -u +%H:%M:%S))" >> "$R/steps.log"
tar -C /tmp -czf "$OUT/results.tar.gz" results
ls -la "$OUT"
