#!/usr/bin/env bash
# Fourth call: gpu3.sh's check exited 2 without --lenient (the baseline also holds article-gpu,
# which the fresh runs do not), and its runs went with the machine. The baseline gpu-h200 is now
# committed whole; fresh runs of cuda-flush and cuda-context are judged against it.
set -u
R=$OUT
mkdir -p target/release
. results/reference/device-lib.sh
[ -x target/release/memrel ] || unxz .gpu/memrel-cuda.xz target/release/memrel
target/release/memrel --version > "$OUT/gpu.txt"; nvidia-smi --query-gpu=name,driver_version --format=csv >> "$OUT/gpu.txt"
(while true; do nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | sed "s/^/$(date +%s.%N) /" >> "$OUT/smi.txt"; sleep 1; done) &
smi=$!
mkdir -p fresh
for s in cuda-flush cuda-context; do
  step "run-$s" timeout 200 target/release/memrel run --scenario $s --repeat 3 --out fresh
done
dirs=$(ls -d fresh/cuda-flush/2* fresh/cuda-context/2*)
step check target/release/memrel check --baseline gpu-h200 --lenient --out results --verdict-dir "$OUT/verdict" $dirs
kill $smi
tar -czf "$OUT/all.tar.gz" -C "$OUT" verdict steps.log smi.txt && rm -rf "$OUT/verdict" "$OUT/smi.txt"
tail -5 "$OUT/check.stdout"; cat "$OUT/steps.log"
