#!/usr/bin/env bash
# Second call of the twelfth session's GPU step (gpu.sh's article-gpu ran past its 200 s limit):
# article-gpu again with 420 s, saved into baseline gpu-h200, then the check of the three
# scenarios' newest runs against the H100's baseline `gpu`. Files come back as few archives.
set -u
R=$OUT
mkdir -p target/release
. results/reference/device-lib.sh
[ -x target/release/memrel ] || unxz .gpu/memrel-cuda.xz target/release/memrel
(while true; do nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | sed "s/^/$(date +%s.%N) /" >> "$OUT/smi.txt"; sleep 1; done) &
smi=$!
ls -d results/cuda-flush/2* results/cuda-context/2* > "$OUT/kept.txt" 2>&1
step run-article-gpu timeout 420 target/release/memrel run --scenario article-gpu --repeat 3 --save-baseline gpu-h200 --out results
dirs=$(for s in cuda-flush cuda-context article-gpu; do ls -d results/$s/2* | tail -1; done)
step check target/release/memrel check --baseline gpu --any-machine --verdict-dir "$OUT/verdict" $dirs
kill $smi
tar -czf "$OUT/baseline-gpu-h200.tar.gz" results/baselines/gpu-h200
tar -czf "$OUT/new-runs.tar.gz" $dirs
tail -12 "$OUT/check.stdout"; cat "$OUT/steps.log"
