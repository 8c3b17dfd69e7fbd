#!/usr/bin/env bash
# One device call (issues 23 line 5 and 22 line 5), on a fresh GPU machine:
#  1. the GPU workflow's baseline `gpu`, re-made with this memrel (machine
#     facts in every record): cuda-flush, cuda-context and article-gpu, each
#     `memrel run --scenario S --repeat 2 --save-baseline gpu --replace`;
#  2. the workflow's gate as .github/workflows/memrel-gpu.yml runs it: the
#     three scenarios again into their own root, one `memrel check` over
#     those runs against `gpu` (nothing re-run);
#  3. the fake worker with a late CUDA context: the ignored integration test
#     `gpu::a_late_cuda_context_has_a_zero_baseline_and_a_retained_value`,
#     run from its test binary at the paths it was compiled with.
# Two device calls (each under the device's 10-minute limit), on one machine:
#   bash results/reference/gpu-baselines/gpu.sh baselines   (1 and 3)
#   bash results/reference/gpu-baselines/gpu.sh job         (2)
# Needs .gpu/memrel.xz (scripts/build-cuda.sh) and .gpu/it.xz (the `it` test
# binary of a release build); writes $OUT/results.tar.gz (all of /tmp/results).
set -uo pipefail
cd "$(dirname "$0")/../../.."
: "${OUT:?}"
PART=${1:?baselines or job}
R=/tmp/results; mkdir -p "$R"
. results/reference/device-lib.sh  # unxz, step
unxz .gpu/memrel.xz /tmp/memrel || exit 1
export MEMREL_CACHE_DIR=/tmp/memrel-cache
M=/tmp/memrel
{ nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv; uname -a; nproc; } > "$R/device.txt" 2>&1
# The committed baseline `gpu` is the starting point (re-saving needs --replace
# only where coverage shrinks; it does not here).
if [ "$PART" = baselines ]; then
  mkdir -p "$R/baselines" && cp -r results/baselines/gpu "$R/baselines/"
  # The late-context test binary, at the paths it was compiled with.
  mkdir -p /work && { [ -e /work/main ] || ln -s "$PWD" /work/main; }
  mkdir -p target/release/deps target/tmp && cp /tmp/memrel target/release/memrel && unxz .gpu/it.xz target/release/deps/it
  step late-context target/release/deps/it gpu --ignored --nocapture --test-threads 1
  for s in cuda-flush cuda-context article-gpu; do
    step "base-$s" $M run --scenario "$s" --repeat 2 --save-baseline gpu --out "$R"
  done
  step baseline-show $M baseline show gpu --out "$R"
else
  # The baseline as committed (made by the `baselines` part).
  [ -d "$R/baselines/gpu" ] || { mkdir -p "$R/baselines" && cp -r results/baselines/gpu "$R/baselines/"; }
  mkdir -p /work && { [ -e /work/main ] || ln -s "$PWD" /work/main; }
  mkdir -p target/release/deps target/tmp && cp /tmp/memrel target/release/memrel && unxz .gpu/it.xz target/release/deps/it
  step late-context-2 target/release/deps/it gpu --ignored --nocapture --test-threads 1
  for s in cuda-flush cuda-context article-gpu; do
    step "job-$s" $M run --scenario "$s" --repeat 2 --out "$R/gpu-runs"
  done
  step job-check $M check --baseline gpu --out "$R" --verdict-dir "$R/verdict" "$R"/gpu-runs/*/*/
fi
nvidia-smi --query-compute-apps=pid,used_memory --format=csv > "$R/apps-after.txt" 2>&1
echo "== done ($(date -u +%H:%M:%S))" >> "$R/steps.log"
tar -C /tmp -czf "$OUT/results.tar.gz" results
ls -la "$OUT"
