#!/usr/bin/env bash
# Issue 49 on the GPU machine, one device call from the repository root:
#   bash results/reference/why-gpu/gpu.sh
# 1. planted_gpu.py under `memrel exec` with drop, empty-cache and
#    host-empty-cache, 3 runs each: what each of PyTorch's mechanisms holds
#    (its cache, its tensors, its pinned host cache) read back from the
#    module's views and /proc/PID/smaps, and what advise names.
# 2. the vLLM-shaped server whose wake keeps its pinned level-1 backup
#    (tests/fixtures/servers/vllm_like.py --device cuda --backup pinned),
#    driven under the server's own two settings (../drive-pinned/strategies.toml):
#    the kept backup named as pinned host memory, and advise's knob.
# nvidia-smi's per-process list is polled every 50 ms beside both.
# Needs .gpu/memrel.xz (the default CPU build: NVML is loaded at run time);
# writes $OUT/why-gpu.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/../../.."
: "${OUT:?}"
HERE=results/reference/why-gpu
R=/tmp/results/why-gpu; rm -rf /tmp/results; mkdir -p "$R"
source results/reference/device-lib.sh
unxz .gpu/memrel.xz /tmp/memrel || exit 1
M=/tmp/memrel
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv; uname -a; nproc; $M --version; python3 -c "import torch; print('torch', torch.__version__)"; } > "$R/device.txt" 2>&1
export PYTHONPATH="$PWD/python"
nvidia-smi --query-compute-apps=timestamp,pid,used_memory --format=csv,noheader,nounits -lms 50 > "$R/smi.csv" 2>&1 &
SMI=$!
step planted $M exec --device cuda --cycles 2 --repeat 3 --strategy drop --strategy empty-cache --strategy host-empty-cache \
  --out "$R/planted" -- python3 $HERE/planted_gpu.py 256
step planted-advise $M advise "$R"/planted/exec/*
step drive $M drive --device cuda --server vllm --sleep-level 1 --cycles 3 --warmup-cycles 0 --settle 1 --url http://127.0.0.1:18011 \
  --strategy-file results/reference/drive-pinned/strategies.toml --strategy host-cache-kept --strategy host-cache-emptied --repeat 3 \
  --dir "$R/drive" -- python3 tests/fixtures/servers/vllm_like.py --device cuda --backup pinned \
  --port 18011 --weights-mib 2048 --kv-mib 1024
step drive-advise $M advise "$R/drive"
sleep 0.3; kill $SMI
cat "$R/steps.log"; tail -25 "$R/planted.stdout"; cat "$R/planted-advise.stdout"; tail -25 "$R/drive.stdout"; cat "$R/drive-advise.stdout"
tar -C /tmp/results -czf "$OUT/why-gpu.tar.gz" why-gpu
