#!/usr/bin/env bash
# Issue 25 on the GPU machine: sleep and wake in candle (cuda-sleep) and in
# PyTorch (torch-gpu-sleep), each under offload, offload-pinned and reload,
# two processes per strategy, with the pinned copy ceiling measured in every
# run's warm-up. One device call, from the repository root:
#   bash results/reference/sleep/gpu.sh
# Needs .gpu/memrel.xz (scripts/build-cuda.sh); writes $OUT/results.tar.gz
# (all of /tmp/results: the results directories, stdout/stderr per step).
set -uo pipefail
cd "$(dirname "$0")/../../.."
: "${OUT:?}"
R=/tmp/results; mkdir -p "$R"
. results/reference/device-lib.sh  # unxz, step
unxz .gpu/memrel.xz /tmp/memrel || exit 1
export MEMREL_CACHE_DIR=/tmp/memrel-cache
M=/tmp/memrel
{ nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv; uname -a; nproc; python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"; } > "$R/device.txt" 2>&1
step cuda-sleep $M run --scenario cuda-sleep --repeat 2 --out "$R"
step torch-gpu-sleep $M run --scenario torch-gpu-sleep --repeat 2 --out "$R"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv > "$R/apps-after.txt" 2>&1
echo "== done ($(date -u +%H:%M:%S))" >> "$R/steps.log"
tar -C /tmp -czf "$OUT/results.tar.gz" results
ls -la "$OUT"
