#!/usr/bin/env bash
# The twelfth session's GPU step: the CUDA build of main at 1a117b0 (scripts/build-cuda.sh,
# carried as .gpu/memrel-cuda.xz), after the fix of the eleventh session's finding (times that
# span edges leave out the program's waits for memrel's readings: events.csv `held_s`).
# 1. The committed GPU baseline's three scenarios run again, 3 runs a strategy, saved as a new
#    baseline `gpu-h200` (this machine's own), nvidia-smi polled beside them.
# 2. `memrel check --baseline gpu --any-machine` judges those runs against the H100's baseline.
set -u
R=$OUT
mkdir -p target/release
. results/reference/device-lib.sh  # unxz, step (run from the repository root)
unxz .gpu/memrel-cuda.xz target/release/memrel
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; target/release/memrel --version; } > "$OUT/gpu.txt" 2>&1
(while true; do nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | sed "s/^/$(date +%s.%N) /" >> "$OUT/smi.txt"; sleep 1; done) &
smi=$!
for s in cuda-flush cuda-context article-gpu; do
  step "run-$s" timeout 200 target/release/memrel run --scenario $s --repeat 3 --save-baseline gpu-h200 --out results
done
dirs=$(for s in cuda-flush cuda-context article-gpu; do ls -d results/$s/2* | tail -1; done)
step check target/release/memrel check --baseline gpu --any-machine --verdict-dir "$OUT/verdict" $dirs
kill $smi
cp -r results/baselines/gpu-h200 "$OUT/baseline-gpu-h200"
tar -czf "$OUT/new-runs.tar.gz" $dirs
tail -12 "$OUT/check.stdout"; cat "$OUT/steps.log"
