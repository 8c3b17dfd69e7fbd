#!/usr/bin/env bash
# Issue 29 on a machine with two GPUs (the device tool's nvidia-h100-x2 /
# nvidia-h200-x2), one device call from the repository root:
#   bash results/reference/multi-gpu/gpu.sh
# 1. candle, runs spread over GPUs: cuda-drop (2 strategies x 3 processes)
#    on cuda:0 alone, then with --devices 0,1, twice each after a warm-up;
#    the wall time of each (steps.log).
# 2. PyTorch tensor parallel (torch-gpu-tp: torchrun, NCCL, transformers
#    tp_plan) under memrel compare --tree: VRAM per process and per GPU.
# 3. The same program under memrel exec (--tree, one strategy) and, started
#    bare, under memrel attach (unmarked).
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
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap --format=csv; nvidia-smi topo -m; uname -a; nproc; python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"; } > "$R/device.txt" 2>&1
# The first CUDA process of a machine JIT-compiles candle's kernels (cached
# for the next ones): a warm-up run on both GPUs first, kept apart.
step warm-up $M compare --scenario cuda-drop --devices 0,1 --out "$R/warm-up"
for i in 1 2; do
  step one-gpu-$i $M compare --scenario cuda-drop --device cuda:0 --repeat 3 --out "$R/one-gpu"
  step two-gpus-$i $M compare --scenario cuda-drop --devices 0,1 --repeat 3 --out "$R/two-gpus"
done
step tp $M compare --scenario torch-gpu-tp --tree --out "$R/tp"
$M model gen qwen2-small /tmp/m/qwen2-small > /dev/null 2>&1
export MEMREL_MODELS='{"decoder": "/tmp/m/qwen2-small"}'
step tp-exec $M exec --device cuda --tree --strategy destroy-pg-empty-cache --name tp-exec --out "$R/tp-exec" -- \
  python3 -m torch.distributed.run --standalone --nproc-per-node 2 scenarios/pytorch/tensor_parallel.py
# Bare (no memrel channel: the module's phases do nothing), attached from outside.
PYTHONPATH="$PWD/python" MEMREL_CYCLES=2 MEMREL_DEVICE=cuda:0 MEMREL_STRATEGY=drop python3 -m torch.distributed.run --standalone --nproc-per-node 2 \
  scenarios/pytorch/tensor_parallel.py > "$R/tp-bare.stdout" 2> "$R/tp-bare.stderr" &
BARE=$!
step tp-attach $M attach $BARE --device cuda --interval-ms 20 --name tp-attach --out "$R/tp-attach"
wait $BARE; echo "tp-bare rc=$?" >> "$R/steps.log"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv > "$R/apps-after.txt" 2>&1
echo "== done ($(date -u +%H:%M:%S))" >> "$R/steps.log"
tar -C /tmp -czf "$OUT/results.tar.gz" results
ls -la "$OUT"
