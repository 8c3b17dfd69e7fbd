#!/usr/bin/env bash
# The GPU machine's side of the committed fleet comparison (README.md here):
# the same CPU scenario as vm/ on the GPU machine's host, and the CUDA
# scenario on its GPU, with the carried memrel binary. Run there (device
# tool, carry .gpu), one part per call, each under the 10-minute limit:
#   bash results/reference/fleet/gpu.sh cpu     # `memrel run` (cpu-trim, 5 runs per strategy)
#   bash results/reference/fleet/gpu.sh cuda    # cuda-flush, 2 runs per strategy (needs the cuda build)
# Prepared on the build machine (from the repository root):
#   cpu:  cargo build --release && mkdir -p .gpu && xz -T2 -6 -c target/release/memrel > .gpu/memrel.xz
#   cuda: bash scripts/build-cuda.sh && mkdir -p .gpu && cp target/release/memrel.xz .gpu/memrel-cuda.xz
# (the plain build records the GPU, driver and CUDA too: NVML is loaded at
# run time). Everything lands under $OUT/gpu-host/<scenario>/<stamp>/; copy
# it to results/reference/fleet/gpu-host/ and merge on the build machine:
#   deploy/fleet-merge.sh results/reference/fleet ./target/release/memrel results/reference/fleet/merged
set -euo pipefail
part=${1:?part: cpu or cuda}
: "${OUT:?OUT is set by the device tool}"
case "$part" in
cpu) packed=.gpu/memrel.xz ;;
cuda) packed=.gpu/memrel-cuda.xz ;;
*) echo "gpu.sh: unknown part $part (cpu or cuda)" >&2; exit 2 ;;
esac
[ -f "$packed" ] || { echo "gpu.sh: $packed is missing: see the preparation above" >&2; exit 2; }
xz -dc "$packed" >/tmp/memrel && chmod +x /tmp/memrel
/tmp/memrel --version
export MEMREL_CACHE_DIR=/tmp/memrel-cache
{ uname -a; nproc; ldd --version | sed -n 1p; grep -m1 'model name' /proc/cpuinfo; free -g | sed -n 1,2p
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true; } >"$OUT/host-$part.txt"
cat "$OUT/host-$part.txt"
# memrel saves every finished run: a part that runs out of time keeps them.
limit=(timeout --signal=INT 560)
case "$part" in
cpu) "${limit[@]}" /tmp/memrel run --out "$OUT/gpu-host" || true ;;
cuda)
    "${limit[@]}" /tmp/memrel run --scenario cuda-flush --repeat 2 --out "$OUT/gpu-host" || true
    # The GPU workflow's strict gate on it: exit 0 on the kind of machine
    # that made results/baselines/gpu, exit 2 naming the facts elsewhere.
    set +e
    /tmp/memrel check --baseline gpu --lenient --out results --verdict-dir "$OUT/verdict-gpu" "$OUT"/gpu-host/cuda-flush/*/
    echo "memrel check --baseline gpu: exit $?" | tee "$OUT/verdict-gpu/exit.txt"
    set -e
    ;;
esac
find "$OUT/gpu-host" -name runs.json | sort
