#!/usr/bin/env bash
# The eleventh session's GPU step: the CUDA build of main (scripts/build-cuda.sh, carried as
# .gpu/memrel-cuda.xz) re-runs the committed GPU baseline's scenarios and judges them:
# `memrel check --baseline gpu --any-machine` (the baseline was made on an H100; only H200s
# were lent this session), with nvidia-smi polled beside it.
set -u
R=$PWD
mkdir -p target/release
. results/reference/device-lib.sh  # unxz, step (run from the repository root)
unxz .gpu/memrel-cuda.xz target/release/memrel
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; target/release/memrel --version; } > "$OUT/gpu.txt" 2>&1
(while true; do nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | sed "s/^/$(date +%s.%N) /" >> "$OUT/smi.txt"; sleep 1; done) &
smi=$!
start=$(date +%s)
timeout 420 target/release/memrel check --baseline gpu --any-machine --out results --verdict-dir "$OUT/verdict" > "$OUT/check.txt" 2>&1
echo "exit $? after $(( $(date +%s) - start )) s" >> "$OUT/check.txt"
kill $smi
tar -czf "$OUT/new-runs.tar.gz" $(ls -d results/article-gpu results/cuda-context results/cuda-flush 2>/dev/null)
tail -8 "$OUT/check.txt"
