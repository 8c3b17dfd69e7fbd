#!/usr/bin/env bash
# Lazy CUDA contexts on the GPU machine (issue 22, acceptance 5): a real
# PyTorch program that creates its context 2 s after it starts, unmarked and
# marked, measured by the CPU build of memrel (NVML is opened at run time).
#   bash results/reference/lazy-cuda/gpu.sh      (on the GPU machine; $OUT set)
set -uo pipefail
HERE=results/reference/lazy-cuda
mkdir -p .gpu/bin && xz -dc .gpu/memrel.xz > .gpu/bin/memrel && chmod +x .gpu/bin/memrel
M=.gpu/bin/memrel
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' >> "$OUT/device.txt"
run() { echo "\$ $*" >> "$OUT/steps.log"; local t0=$(date +%s); "$@" > "$OUT/$name.txt" 2>&1; local rc=$?; echo "exit $rc, $(( $(date +%s) - t0 )) s" >> "$OUT/steps.log"; }
name=unmarked run $M exec --device cuda --name unmarked --out "$OUT/results" -- python3 $HERE/late_unmarked.py
name=marked run $M exec --device cuda --cycles 3 --strategy drop,empty-cache --name marked --out "$OUT/results" -- python3 $HERE/late_marked.py
# what NVML listed while the unmarked program ran, for the record
ls "$OUT"/results/*/ >> "$OUT/steps.log"
# flat copies of the two results directories (what comes back is at most a few levels deep)
for n in unmarked marked; do d=$(ls -d "$OUT"/results/$n/*/ | head -1); mkdir -p "$OUT/$n"; cp "$d"/* "$OUT/$n/"; done
rm -rf "$OUT/results"
# one archive (what comes back is a few files at most)
tar -C "$OUT" -czf /tmp/lazy-cuda.tgz . && rm -rf "${OUT:?}"/* && mv /tmp/lazy-cuda.tgz "$OUT/"
