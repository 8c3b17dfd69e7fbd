#!/usr/bin/env bash
# Issue 46 line 7 on the GPU machine, one device call from the repository root:
#   bash results/reference/drive-pinned/gpu.sh
# The vLLM-shaped server (tests/fixtures/servers/vllm_like.py --device cuda
# --backup pinned) keeps its level-1 backup in pinned host memory
# (torch.empty(..., pin_memory=True)), driven by `memrel drive --strategy`
# under the two user-defined strategies of strategies.toml (the default, and
# the engine emptying PyTorch's pinned host cache after each wake), 3 runs
# each, 3 sleep/wake cycles a run, all judged (--warmup-cycles 0: the server is ready, torch and the CUDA context loaded, before the first sleep; a warm-up would hide the first wake, which is where the cached backup appears).
# nvidia-smi's per-process list is polled every 50 ms beside it; check.py
# holds every settled VRAM reading against it and tabulates what each
# strategy's wakes keep on the host. pinned_maps.py shows which mappings of
# /proc/PID/smaps PyTorch's pinned memory and the CUDA context use.
# Needs .gpu/memrel.xz (the default CPU build: NVML is loaded at run time);
# writes $OUT/drive-pinned.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/../../.."
: "${OUT:?}"
HERE=results/reference/drive-pinned
R=/tmp/results/drive-pinned; rm -rf /tmp/results; mkdir -p "$R"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" .gpu/memrel.xz /tmp/memrel && chmod +x /tmp/memrel || exit 1
M=/tmp/memrel
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv; uname -a; nproc; $M --version; python3 -c "import torch; print('torch', torch.__version__)"; } > "$R/device.txt" 2>&1
python3 $HERE/pinned_maps.py > "$R/pinned-maps.txt" 2>&1
echo "pinned_maps rc=$?" >> "$R/steps.log"
nvidia-smi --query-compute-apps=timestamp,pid,used_memory --format=csv,noheader,nounits -lms 50 > "$R/smi.csv" 2>&1 &
SMI=$!
$M drive --device cuda --server vllm --sleep-level 1 --cycles 3 --warmup-cycles 0 --settle 1 --url http://127.0.0.1:18011 \
  --strategy-file $HERE/strategies.toml --strategy host-cache-kept --strategy host-cache-emptied --repeat 3 \
  --dir "$R/drive" -- python3 tests/fixtures/servers/vllm_like.py --device cuda --backup pinned \
  --port 18011 --weights-mib 2048 --kv-mib 1024 > "$R/drive.stdout" 2> "$R/drive.stderr"
echo "drive rc=$?" >> "$R/steps.log"
sleep 0.3; kill $SMI
python3 $HERE/check.py "$R/drive" "$R/smi.csv" > "$R/check.txt" 2>&1
$M compare "$R/drive" > "$R/compare.txt" 2>&1; echo "compare rc=$?" >> "$R/steps.log"
$M advise "$R/drive" > "$R/advise.txt" 2>&1; echo "advise rc=$?" >> "$R/steps.log"
cat "$R/steps.log"; tail -20 "$R/check.txt"; tail -30 "$R/drive.stdout"
tar -C /tmp/results -czf "$OUT/drive-pinned.tar.gz" drive-pinned
