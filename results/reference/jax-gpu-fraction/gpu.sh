#!/usr/bin/env bash
# Issue 38: xla-mem-fraction at fractions chosen in the strategy's name, on
# the GPU machine, one device call from the repository root:
#   bash results/reference/jax-gpu-fraction/gpu.sh
# `memrel run --scenario jax-gpu` with xla-mem-fraction=0.10 and =0.50 (one
# process each, two cycles), nvidia-smi's per-process list polled every
# 50 ms beside it (smi.csv); jax-gpu's check.py holds each run's VRAM at its
# edges against nvidia-smi's last poll before them (check.txt).
# Needs .gpu/memrel.xz (the default CPU build: NVML is loaded at run time);
# writes $OUT/jax-gpu-fraction.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/../../.."
: "${OUT:?}"
R=/tmp/jax-gpu-fraction; rm -rf "$R"; mkdir -p "$R"
[ -x /tmp/memrel ] || { python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" .gpu/memrel.xz /tmp/memrel && chmod +x /tmp/memrel; } || exit 1
M=/tmp/memrel
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv; python3 -c "import jax; print('jax', jax.__version__, jax.devices())"; } > "$R/device.txt" 2>&1
nvidia-smi --query-compute-apps=timestamp,pid,used_memory --format=csv,noheader,nounits -lms 50 > "$R/smi.csv" 2>&1 &
SMI=$!
python3 -c 'import time; print("%.6f" % time.time())' > "$R/t0"
$M run --scenario jax-gpu --strategy xla-mem-fraction=0.10,xla-mem-fraction=0.50 --out "$R/out" > "$R/stdout" 2> "$R/stderr"
echo "jax-gpu-fraction rc=$?" >> "$R/steps.log"
sleep 0.3; kill $SMI
D=$(ls -d "$R"/out/jax-gpu/*/ | head -1)
python3 results/reference/jax-gpu/check.py "$D" "$R/t0" "$R/smi.csv" > "$R/check.txt" 2>&1
cat "$R/steps.log" "$R/check.txt"; tail -n 30 "$R/stdout"; tail -n 5 "$R/stderr"
tar -C /tmp -czf "$OUT/jax-gpu-fraction.tar.gz" jax-gpu-fraction
