#!/usr/bin/env bash
# ci-cuda-check.sh — compiles the `cuda` feature honestly on a machine with no GPU and no CUDA
# toolkit, so CUDA code cannot rot unseen: clippy on every target with -D warnings, with
# candle's kernels really compiled by nvcc (candle-kernels' build script runs under clippy).
# Nothing is linked or run: CI has no GPU.
#
#   scripts/ci-cuda-check.sh        (from anywhere; uses the pip toolchain unless a toolkit is found)
#
# Cost, measured 2026-11-22 on the 2-core development VM (shared with other builds, so an upper
# bound): 16 min 30 s wall (12 min 21 s CPU) from an empty target directory and an empty venv,
# pip's CUDA wheels included; most of it is candle-kernels' nvcc. With a warm target directory:
# about 30 s. It prints its own duration at the end, also when it fails.
# Env: as build-cuda.sh (MEMREL_CUDA_PIP, MEMREL_CUDA_WORK, CUDA_COMPUTE_CAP, CARGO_TARGET_DIR).
set -euo pipefail

CRATE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
start_s=$(date +%s)
setup_s=-
report() {
    local status=$?
    local verdict=ok
    [ "$status" -eq 0 ] || verdict="FAILED (exit $status)"
    echo "ci-cuda-check: $verdict: toolchain ${setup_s} s, total $(( $(date +%s) - start_s )) s (${MEMREL_CUDA_MODE:-no} toolchain)" >&2
}
trap report EXIT

# shellcheck source=cuda-env.sh
source "$CRATE_DIR/scripts/cuda-env.sh"
memrel_cuda_env "$CRATE_DIR"
setup_s=$(( $(date +%s) - start_s ))

( cd "$CRATE_DIR" && cargo clippy --release --locked --all-targets --features cuda -- -D warnings )
