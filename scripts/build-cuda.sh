#!/usr/bin/env bash
# build-cuda.sh — builds memrel with the `cuda` feature (candle's CUDA backend + NVML).
#
#   scripts/build-cuda.sh [CARGO_BUILD_ARGS...]     default: --release --features cuda
#
# With a CUDA toolkit installed (CUDA_HOME, or nvcc on PATH, or /usr/local/cuda) this is just
#   CUDA_HOME=/usr/local/cuda cargo build --release --features cuda
# and you can run that yourself. On a machine with only python3 + pip (no toolkit, no GPU) it
# installs NVIDIA's CUDA 13.0 wheels into a venv and builds against them; see cuda-env.sh for
# both paths and CUDA_COMPUTE_CAP (needed where there is no nvidia-smi; 90 = H100/H200).
#
# Env: MEMREL_CUDA_PIP=1 forces the pip path; MEMREL_CUDA_WORK (default /tmp/memrel-cuda) is
#      where it puts the venv; CARGO_TARGET_DIR is honoured; MEMREL_CUDA_XZ=0 skips the .xz.
# Output: <target>/release/memrel, plus memrel.xz beside it (46 MB -> ~5 MB) for copying to a
#      GPU machine. At run time the machine needs an NVIDIA driver (libcuda.so.1,
#      libnvidia-ml.so.1) and the CUDA runtime libraries libcublas/libcublasLt/libcurand/
#      libcudart resolvable by ld.so (pip path: export LD_LIBRARY_PATH=<venv>/.../nvidia/cu13/lib).
# Time: a clean build takes 13-18 min on 2 cores (candle-kernels' nvcc), later ones seconds.
# The first CUDA run on a machine JIT-compiles candle's PTX (10-15 s); memrel's CUDA
# scenarios warm up before measuring.
set -euo pipefail

CRATE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ $# -gt 0 ]; then CARGO_ARGS=("$@"); else CARGO_ARGS=(--release --features cuda); fi

# shellcheck source=cuda-env.sh
source "$CRATE_DIR/scripts/cuda-env.sh"
memrel_cuda_env "$CRATE_DIR"

start_s=$(date +%s)
( cd "$CRATE_DIR" && cargo build "${CARGO_ARGS[@]}" )
echo "build-cuda: cargo build took $(( $(date +%s) - start_s )) s ($MEMREL_CUDA_MODE toolchain)" >&2

profile=debug
for arg in "${CARGO_ARGS[@]}"; do [ "$arg" = --release ] && profile=release; done
target_dir=$(cd "$CRATE_DIR" && cargo metadata --no-deps --format-version 1 |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
bin="$target_dir/$profile/memrel"
[ -x "$bin" ] || { echo "build-cuda: no binary at $bin" >&2; exit 1; }
echo "build-cuda: $bin ($(du -h "$bin" | cut -f1))" >&2
if command -v readelf >/dev/null 2>&1; then
    readelf -d "$bin" | grep NEEDED >&2 # expect libcuda.so.1 libcublas.so.13 libcurand.so.10 ...
fi
if [ "${MEMREL_CUDA_XZ:-1}" != 0 ] && command -v xz >/dev/null 2>&1; then
    xz -T0 -9 -k -f "$bin"
    echo "build-cuda: $bin.xz ($(du -h "$bin.xz" | cut -f1))" >&2
fi
