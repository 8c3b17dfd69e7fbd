#!/usr/bin/env bash
# memrel and its peers side by side: make a virtual environment, install the
# peers, run benches/peers/peers.py. Why a script: the peers are Python
# packages from PyPI (psutil, memory_profiler's mprof, psrecord, memray; on a
# GPU nvitop and nvidia-ml-py), and a GPU machine without network installs
# them from a wheelhouse made here.
#
#   MEMREL=/path/to/memrel bash benches/peers/run.sh [peers.py options]
#   MEMREL=/path/to/memrel bash benches/peers/run.sh --gpu --wheels benches/peers/wheels
#   bash benches/peers/run.sh --download-wheels benches/peers/wheels   # for a python 3.12 GPU machine
#
# Environment: MEMREL (the binary; or memrel on PATH), PEERS_PYTHON (the
# interpreter the venv is made from, default python3), PEERS_VENV (default
# benches/peers/.venv; with --gpu benches/peers/.venv-gpu, made with
# --system-site-packages so the machine's torch is used). Every other option
# goes to peers.py (--reps N, --only a,b, --out DIR).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
invoked_as="bash $0 $*"
python=${PEERS_PYTHON:-python3}
gpu=0
wheels=""
pass=()
while [ $# -gt 0 ]; do
    case "$1" in
        --gpu) gpu=1; pass+=("$1"); shift ;;
        --wheels) wheels=${2:?--wheels needs a directory}; shift 2 ;;
        --download-wheels)
            dest=${2:?--download-wheels needs a directory}
            # Binary wheels for CPython 3.12 on x86_64 Linux, every dependency included.
            "$python" -m pip download --only-binary=:all: --python-version 3.12 \
                --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
                --platform manylinux_2_28_x86_64 -d "$dest" \
                psutil memory_profiler psrecord memray nvitop nvidia-ml-py
            du -sh "$dest"
            exit 0 ;;
        *) pass+=("$1"); shift ;;
    esac
done

memrel=${MEMREL:-$(command -v memrel || true)}
if [ -z "$memrel" ] || [ ! -x "$memrel" ]; then
    echo "run.sh: no memrel binary: set MEMREL=/path/to/memrel (e.g. target/release/memrel)" >&2
    exit 2
fi

# PEERS_PACKAGES overrides the list (e.g. without memray's 10 MB wheel, for
# a machine the wheelhouse must travel to; run those peers with --only).
packages=(psutil memory_profiler psrecord memray)
venv_flags=()
if [ "$gpu" = 1 ]; then
    packages+=(nvitop nvidia-ml-py)
    venv_flags+=(--system-site-packages)  # torch comes from the machine's python
    venv=${PEERS_VENV:-$here/.venv-gpu}
else
    venv=${PEERS_VENV:-$here/.venv}
fi

if [ -n "${PEERS_PACKAGES:-}" ]; then
    read -r -a packages <<<"$PEERS_PACKAGES"
fi

if [ ! -x "$venv/bin/python" ]; then
    if ! "$python" -m venv "${venv_flags[@]}" "$venv" 2>/dev/null; then
        # Debian/Ubuntu without python3-venv: no ensurepip. A venv without pip
        # can still use the machine's pip when it sees the system packages.
        rm -rf "$venv"
        "$python" -m venv --without-pip --system-site-packages "$venv" || {
            echo "run.sh: '$python -m venv' failed: install python3-venv or set PEERS_PYTHON" >&2
            exit 2
        }
    fi
fi
if ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
    echo "run.sh: no pip in $venv: install python3-pip (or python3-venv) for $python, or delete $venv" >&2
    exit 2
fi

if [ -n "$wheels" ]; then
    [ -d "$wheels" ] || { echo "run.sh: wheelhouse $wheels is not a directory (make it with --download-wheels)" >&2; exit 2; }
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-index \
        --find-links "$wheels" "${packages[@]}"
else
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${packages[@]}"
fi

export PEERS_INVOKED_AS="MEMREL=$memrel $invoked_as"  # shown in peers.md
exec "$venv/bin/python" "$here/peers.py" --memrel "$memrel" "${pass[@]}"
