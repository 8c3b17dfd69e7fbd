#!/usr/bin/env bash
# ci-cuda-check.sh — compiles the `cuda` feature honestly on a machine with no GPU and no CUDA
# toolkit, so CUDA code cannot rot unseen: clippy on every target with -D warnings, with
# candle's kernels really compiled by nvcc (candle-kernels' build script runs under clippy).
# Nothing is linked or run: CI has no GPU.
#
#   scripts/ci-cuda-check.sh        (from anywhere; uses the pip toolchain unless a toolkit is found)
#
# Cost on a 2-core CI machine (clean target): the pip wheels (~1.5 GB download, once per
# cache) plus about the time of a clean CUDA build, 13-18 min, most of it candle-kernels.
# With a warm target directory it takes seconds. Prints its own duration at the end.
# Env: as build-cuda.sh (MEMREL_CUDA_PIP, MEMREL_CUDA_WORK, CUDA_COMPUTE_CAP, CARGO_TARGET_DIR).
set -euo pipefail

CRATE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
start_s=$(date +%s)

# shellcheck source=cuda-env.sh
source "$CRATE_DIR/scripts/cuda-env.sh"
memrel_cuda_env "$CRATE_DIR"
setup_s=$(( $(date +%s) - start_s ))

( cd "$CRATE_DIR" && cargo clippy --release --locked --all-targets --features cuda -- -D warnings )
echo "ci-cuda-check: ok: toolchain ${setup_s} s, total $(( $(date +%s) - start_s )) s ($MEMREL_CUDA_MODE toolchain)" >&2
