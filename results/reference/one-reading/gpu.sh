#!/usr/bin/env bash
# Issue 35 line 6 on a machine with two GPUs (the device tool's
# nvidia-h100-x2), one device call from the repository root:
#   bash results/reference/one-reading/gpu.sh
# 1. ranks.py under `memrel exec --tree --device cuda` (torchrun, two ranks
#    that act right after each edge and differ per GPU), nvidia-smi's
#    per-process list polled every 50 ms beside it; check.py holds every
#    edge's per-GPU VRAM against it (exec-tree.check.txt).
# 2. server.py (log-marked, its VRAM held by a child process) started bare
#    and measured with `memrel attach --device cuda --log ... --mark-on`,
#    nvidia-smi beside it; check.py again (attach.check.txt).
# Needs .gpu/memrel.xz (the default CPU build: NVML is loaded at run time);
# writes $OUT/results.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/../../.."
: "${OUT:?}"
R=/tmp/results; mkdir -p "$R"
HERE=results/reference/one-reading
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" .gpu/memrel.xz /tmp/memrel && chmod +x /tmp/memrel || exit 1
M=/tmp/memrel
export MEMREL_CACHE_DIR=/tmp/memrel-cache
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv; uname -a; nproc; python3 -c "import torch; print('torch', torch.__version__)"; } > "$R/device.txt" 2>&1
nvidia-smi --query-gpu=index,uuid --format=csv,noheader > "$R/gpus.csv"
poll() { nvidia-smi --query-compute-apps=timestamp,gpu_uuid,pid,used_memory --format=csv,noheader,nounits -lms 50 > "$1" 2>&1 & echo $!; }

# 1. exec --tree, two ranks on two GPUs
SMI=$(poll "$R/exec-tree.smi.csv")
EDGE_LOG="$R/exec-tree.edges.json" $M exec --device cuda --tree --interval-ms 20 --name exec-tree --out "$R/exec" -- \
  python3 -m torch.distributed.run --standalone --nproc-per-node 2 $HERE/ranks.py > "$R/exec-tree.stdout" 2> "$R/exec-tree.stderr"
echo "exec-tree rc=$?" >> "$R/steps.log"
sleep 0.3; kill $SMI
D=$(ls -d "$R"/exec/exec-tree/*/ | head -1)
python3 $HERE/check.py "$D/events.csv" "$R/exec-tree.edges.json" "$R/exec-tree.smi.csv" "$R/gpus.csv" > "$R/exec-tree.check.txt" 2>&1

# 2. attach to a log-marked server whose child holds the GPU
: > "$R/server.log"
SMI=$(poll "$R/attach.smi.csv")
python3 $HERE/server.py "$R/server.log" 3 > "$R/server.stdout" 2> "$R/server.stderr" &
SERVER=$!
sleep 1
$M attach $SERVER --device cuda --interval-ms 20 --log "$R/server.log" \
  --mark-on '^[0-9.]+ loading model$=load' --mark-on '^[0-9.]+ serving requests$=forward' \
  --mark-on '^[0-9.]+ unloading model$=unload' --mark-on '^[0-9.]+ idle$=settle' \
  --mark-on '^[0-9.]+ shutting down$=end' \
  --name attach --dir "$R/attach" > "$R/attach.stdout" 2> "$R/attach.stderr"
echo "attach rc=$?" >> "$R/steps.log"
wait $SERVER; echo "server rc=$?" >> "$R/steps.log"
sleep 0.3; kill $SMI
python3 $HERE/check.py "$R/attach/events.csv" "$R/server.log" "$R/attach.smi.csv" "$R/gpus.csv" > "$R/attach.check.txt" 2>&1
cat "$R/steps.log" "$R/exec-tree.check.txt" "$R/attach.check.txt"
tail -n 5 "$R/exec-tree.stderr" "$R/attach.stderr"
tar -C /tmp -czf "$OUT/results.tar.gz" results
