#!/usr/bin/env bash
# Issue 27 line 3 on the GPU machine: the pytest plugin measuring VRAM. A
# PyTorch test that keeps a 256 MiB CUDA tensor fails on
# max_vram_retained_mib=64; one that frees it fails too while PyTorch's cache
# holds it, and passes with release="empty-cache". One device call, from the
# repository root:
#   bash results/reference/pytest/gpu.sh
# Installs nothing from the network (there is none there). Needs:
#   - a memrel binary: MEMREL_BIN, else .gpu/memrel, else .gpu/memrel.xz
#     (scripts/build-cuda.sh makes one; any memrel build samples VRAM, through
#     the driver's NVML);
#   - pytest, if that machine's python3 lacks it: its wheels in .gpu/wheels
#     (or MEMREL_WHEELS), downloaded here with
#       python3 -m pip download --no-deps --only-binary=:all: -d .gpu/wheels \
#         pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1 packaging==26.4 pygments==2.21.0
#     (all pure Python, 1.8 MB) and carried with .gpu.
# The plugin is this checkout's python/memrel (PYTHONPATH, PYTEST_PLUGINS,
# entry-point plugins off):
# no memrel wheel is installed there. Writes $OUT/pytest-gpu.tar.gz
# (/tmp/pytest-gpu: device.txt, steps.log, the two pytest outputs, a results
# directory per case with summary.json and timeline.png); unpack it into
# results/reference/pytest/gpu/.
set -uo pipefail
cd "$(dirname "$0")/../../.."
: "${OUT:?}"
R=/tmp/pytest-gpu; rm -rf "$R"; mkdir -p "$R"

if [ -z "${MEMREL_BIN:-}" ]; then
    if [ -x .gpu/memrel ]; then
        MEMREL_BIN=$PWD/.gpu/memrel
    elif [ -f .gpu/memrel.xz ]; then
        python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('.gpu/memrel.xz'), open('/tmp/memrel','wb'))" &&
            chmod +x /tmp/memrel || exit 1
        MEMREL_BIN=/tmp/memrel
    else
        echo "gpu.sh: no memrel binary: set MEMREL_BIN or carry .gpu/memrel(.xz)" >&2; exit 1
    fi
fi
export MEMREL_BIN
SITE=
if ! python3 -c "import pytest" 2>/dev/null; then
    WHEELS=${MEMREL_WHEELS:-.gpu/wheels}
    ls "$WHEELS"/pytest-*.whl >/dev/null 2>&1 ||
        { echo "gpu.sh: python3 has no pytest and $WHEELS has no pytest wheel (see this script's header)" >&2; exit 1; }
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/pytest-site "$WHEELS"/*.whl || exit 1
    SITE=/tmp/pytest-site
fi
export PYTHONPATH=$PWD/python${SITE:+:$SITE}
export PYTEST_PLUGINS=memrel.pytest_plugin
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 # this checkout's plugin, whatever is installed there

{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    uname -a
    "$MEMREL_BIN" --version
    python3 -c "import torch, pytest; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'pytest', pytest.__version__)"
} > "$R/device.txt" 2>&1
cat "$R/device.txt"

step() { # name, command...
    local name=$1; shift
    echo "== $name: $* ($(date -u +%H:%M:%S))" | tee -a "$R/steps.log"
    "$@" > "$R/$name.txt" 2>&1
    echo "$name rc=$? ($(date -u +%H:%M:%S))" | tee -a "$R/steps.log"
}
# The assertions: each case in its own pytest process (pytester); all pass.
step gpu-tests python3 -m pytest -v -p no:cacheprovider tests/python/gpu/test_cuda_retained.py
# The cases as a user runs them, in one process, results kept: expected
# 2 failed (the kept tensor, the cached one), 1 passed (empty-cache), exit 1.
step cases python3 -m pytest -p no:cacheprovider --memrel --memrel-dir "$R/cases" tests/python/gpu/cuda_cases.py
# The host-memory tests of the plugin, on that machine too.
step cpu-tests python3 -m pytest -p no:cacheprovider tests/python/test_pytest_plugin.py
echo "== done ($(date -u +%H:%M:%S))" >> "$R/steps.log"
tar -C /tmp -czf "$OUT/pytest-gpu.tar.gz" pytest-gpu
tail -25 "$R/gpu-tests.txt"; tail -40 "$R/cases.txt"; tail -5 "$R/cpu-tests.txt"
