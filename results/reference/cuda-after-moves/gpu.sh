#!/usr/bin/env bash
# Issue 48 item 4: the CUDA build of main after the moves (0e65014), on the GPU machine:
# the GPU tests of the integration binary (built with --features cuda) and
# `memrel check --baseline gpu` (the committed H100 baseline's scenarios re-run).
set -u
R=$PWD
mkdir -p /work && { [ -e /work/cuda-build ] || ln -s "$R" /work/cuda-build; }
mkdir -p target/release/deps
. results/reference/device-lib.sh  # unxz, step (run from the repository root)
unxz .gpu/memrel-cuda.xz target/release/memrel
unxz .gpu/it-cuda.xz target/release/deps/it-cuda
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; target/release/memrel --version; } > "$OUT/gpu.txt" 2>&1
(while true; do nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | sed "s/^/$(date +%s.%N) /" >> "$OUT/smi.txt"; sleep 1; done) &
smi=$!
start=$(date +%s)
(cd /work/cuda-build && timeout 150 target/release/deps/it-cuda --ignored gpu > "$OUT/it-gpu.txt" 2>&1; echo "exit $?" >> "$OUT/it-gpu.txt")
(cd /work/cuda-build && timeout 100 target/release/deps/it-cuda cuda_cli fake_nvml > "$OUT/it-cuda.txt" 2>&1; echo "exit $?" >> "$OUT/it-cuda.txt")
echo "tests took $(( $(date +%s) - start )) s" >> "$OUT/it-gpu.txt"
start=$(date +%s)
timeout 380 target/release/memrel check --baseline gpu --out results --verdict-dir "$OUT/verdict" > "$OUT/check.txt" 2>&1
echo "exit $? after $(( $(date +%s) - start )) s" >> "$OUT/check.txt"
kill $smi
tail -4 "$OUT/it-gpu.txt" "$OUT/it-cuda.txt"; tail -5 "$OUT/check.txt"
