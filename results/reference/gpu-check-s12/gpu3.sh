#!/usr/bin/env bash
# Third call of the twelfth session's GPU step. The first call's baseline entries of cuda-flush
# and cuda-context did not come back (too many files), so: (1) cuda-flush and cuda-context are
# saved into baseline gpu-h200 again (article-gpu's entry, from the second call, is committed);
# (2) fresh runs of both are judged against it: `memrel check --baseline gpu-h200 DIRS`.
set -u
R=$OUT
mkdir -p target/release
. results/reference/device-lib.sh
[ -x target/release/memrel ] || unxz .gpu/memrel-cuda.xz target/release/memrel
target/release/memrel --version > "$OUT/gpu.txt"; nvidia-smi --query-gpu=name,driver_version --format=csv >> "$OUT/gpu.txt"
(while true; do nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | sed "s/^/$(date +%s.%N) /" >> "$OUT/smi.txt"; sleep 1; done) &
smi=$!
for s in cuda-flush cuda-context; do
  step "save-$s" timeout 200 target/release/memrel run --scenario $s --repeat 3 --save-baseline gpu-h200 --out results
done
mkdir -p fresh
for s in cuda-flush cuda-context; do
  step "run-$s" timeout 200 target/release/memrel run --scenario $s --repeat 3 --out fresh
done
dirs=$(ls -d fresh/cuda-flush/2* fresh/cuda-context/2*)
step check target/release/memrel check --baseline gpu-h200 --lenient --out results --verdict-dir "$OUT/verdict" $dirs
kill $smi
tar -czf "$OUT/baseline-gpu-h200.tar.gz" results/baselines/gpu-h200
tar -czf "$OUT/verdict.tar.gz" -C "$OUT" verdict && rm -rf "$OUT/verdict"
tail -12 "$OUT/check.stdout"; cat "$OUT/steps.log"
