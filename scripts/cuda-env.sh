# cuda-env.sh — sourced by build-cuda.sh and ci-cuda-check.sh: sets up the
# environment candle's `cuda` feature needs to COMPILE (nvcc, CUDA headers and
# libraries, CUDA_COMPUTE_CAP), either from an installed CUDA toolkit or from
# NVIDIA's pip wheels. It builds nothing itself.
#
# Two ways, chosen in this order:
#  1. toolkit: CUDA_HOME (or CUDA_PATH, or /usr/local/cuda) holds bin/nvcc, or nvcc is on
#     PATH. The normal case for users. Nothing is installed.
#  2. pip:     no toolkit found, or MEMREL_CUDA_PIP=1. NVIDIA's CUDA 13.0.x wheels go into a
#     venv under $MEMREL_CUDA_WORK (default /tmp/memrel-cuda), and a CUDA_HOME "shim" of
#     symlinks plus a generated libcuda.so link stub is made beside it. For build machines
#     without a GPU and without a toolkit (memrel's own development and CI machines).
#     Based on ../shared/cuda/build-cuda.sh (verified with candle 0.11.1 / cudarc 0.19.10).
#
# CUDA_COMPUTE_CAP: candle-kernels compiles its kernels for one GPU architecture. With a GPU
# and nvidia-smi on this machine candle finds it; otherwise set it (90 = H100/H200, 89 = L4/
# RTX 40xx, 86 = A10/RTX 30xx, 80 = A100). The pip path defaults to 90.
#
# Needs: bash, python3 (pip path: with venv and network access to PyPI), gcc, cargo.
# Usage:   source scripts/cuda-env.sh "$CRATE_DIR"     (sets MEMREL_CUDA_MODE=toolkit|pip)

memrel_cuda_fail() {
    echo "cuda-env: $*" >&2
    return 1
}

memrel_cuda_env() {
    local crate_dir=$1
    MEMREL_CUDA_MODE=
    local home=${CUDA_HOME:-${CUDA_PATH:-}}
    if [ -z "$home" ] && command -v nvcc >/dev/null 2>&1; then
        home=$(dirname "$(dirname "$(command -v nvcc)")")
    fi
    if [ -z "$home" ] && [ -x /usr/local/cuda/bin/nvcc ]; then
        home=/usr/local/cuda
    fi
    if [ "${MEMREL_CUDA_PIP:-0}" != 1 ] && [ -n "$home" ] && [ -x "$home/bin/nvcc" ]; then
        MEMREL_CUDA_MODE=toolkit
        export CUDA_HOME=$home
        export PATH="$CUDA_HOME/bin:$PATH"
        if [ -z "${CUDA_COMPUTE_CAP:-}" ] && ! command -v nvidia-smi >/dev/null 2>&1; then
            memrel_cuda_fail "no nvidia-smi on this machine: set CUDA_COMPUTE_CAP to the target GPU (90 = H100/H200, 89 = L4, 80 = A100)" || return 1
        fi
    else
        MEMREL_CUDA_MODE=pip
        memrel_cuda_pip_toolchain "$crate_dir" || return 1
    fi
    export CUDAFORGE_THREADS=${CUDAFORGE_THREADS:-$(nproc)} # cudaforge defaults to half the cores
    echo "cuda-env: $MEMREL_CUDA_MODE toolchain, CUDA_HOME=$CUDA_HOME, CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-<from nvidia-smi>}" >&2
    nvcc --version | tail -2 >&2
}

# Installs (once) the CUDA 13.0 U2 wheels and builds the CUDA_HOME shim.
memrel_cuda_pip_toolchain() {
    local crate_dir=$1
    local work=${MEMREL_CUDA_WORK:-/tmp/memrel-cuda}
    export CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90}
    # Keep nvcc at 13.0.x: PTX from a newer nvcc carries a newer PTX ISA than a CUDA 13.0
    # driver (580.x) loads. These are the CUDA 13.0 U2 component versions.
    local wheels=(
        "nvidia-cuda-nvcc==13.0.88"    # nvcc, ptxas, fatbinary, nvlink
        "nvidia-nvvm==13.0.88"         # cicc + libdevice
        "nvidia-cuda-crt==13.0.88"     # include/crt/*.h
        "nvidia-cuda-runtime==13.0.96" # cuda_runtime.h, cuda_fp16.h, libcudart.so.13
        "nvidia-cuda-cccl==13.0.85"    # cub / thrust / libcu++ headers
        "nvidia-cublas==13.1.0.3"      # libcublas.so.13, libcublasLt.so.13
        "nvidia-curand==10.4.0.35"     # libcurand.so.10
        "nvidia-cuda-nvrtc==13.0.88"   # libnvrtc.so.13
        "nvidia-nvjitlink==13.0.88"    # libnvJitLink.so.13
    )
    local stamp="$work/venv/.memrel-wheels"
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "${wheels[*]}" ]; then
        python3 -m venv "$work/venv" || memrel_cuda_fail "python3 -m venv failed: install python3-venv" || return 1
        "$work/venv/bin/pip" install -q --upgrade pip || return 1
        "$work/venv/bin/pip" install -q "${wheels[@]}" || memrel_cuda_fail "pip could not install the CUDA wheels (network?)" || return 1
        echo "${wheels[*]}" > "$stamp"
    fi
    local nv
    nv=$("$work/venv/bin/python" -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13"))') || return 1
    [ -x "$nv/bin/nvcc" ] || memrel_cuda_fail "no nvcc in $nv/bin after the pip install" || return 1

    export CUDA_HOME="$work/cuda-home"
    mkdir -p "$CUDA_HOME/lib/stubs"
    local d f b
    for d in bin include nvvm; do ln -sfn "$nv/$d" "$CUDA_HOME/$d"; done
    for f in "$nv"/lib/*.so.*; do
        b=$(basename "$f")
        ln -sfn "$f" "$CUDA_HOME/lib/$b"             # libcublas.so.13
        ln -sfn "$f" "$CUDA_HOME/lib/${b%%.so.*}.so" # libcublas.so (what -lcublas finds)
    done
    export PATH="$CUDA_HOME/bin:$PATH"
    export CUDARC_CUDA_VERSION=13000 # cudarc's CUDA 13.0 bindings, without parsing nvcc

    # No wheel ships libcuda.so (it belongs to the driver): link against a stub that exports
    # every cu* symbol cudarc can reference; at run time the driver's libcuda.so.1 is loaded.
    # The feature matters: without it cargo metadata leaves the optional cudarc out.
    cargo fetch --manifest-path "$crate_dir/Cargo.toml" >&2 || return 1
    local cudarc_dir
    cudarc_dir=$(cargo metadata --manifest-path "$crate_dir/Cargo.toml" --features cuda --format-version 1 |
        python3 -c 'import json,sys,os; m=json.load(sys.stdin); print(next(os.path.dirname(p["manifest_path"]) for p in m["packages"] if p["name"]=="cudarc"))') ||
        memrel_cuda_fail "cannot find cudarc's sources (cargo metadata --features cuda)" || return 1
    grep -oE 'load::<_F>\("cu[A-Za-z0-9_]+"\)' "$cudarc_dir/src/driver/sys/mod.rs" |
        sed -E 's/.*"(cu[A-Za-z0-9_]+)".*/\1/' | sort -u |
        awk '{print "void " $1 "(void) {}"}' > "$CUDA_HOME/lib/stubs/libcuda_stub.c"
    gcc -shared -fPIC -Wl,-soname,libcuda.so.1 \
        -o "$CUDA_HOME/lib/stubs/libcuda.so" "$CUDA_HOME/lib/stubs/libcuda_stub.c" || return 1
}
