#!/usr/bin/env bash
# One VRAM reading of memrel's sampler against a bare NVML call (issue 26,
# line 5: "one VRAM reading <= a bare NVML call"). Needs an NVIDIA GPU and
# its driver, Python 3 with nvidia-ml-py (pynvml); no torch.
#
#   benches/nvml/run.sh [MEMREL ...]      # from the repository root
#
# 1. The bare calls from Python (bare_nvml.py): NVML's process list and
#    device memory, each call timed alone, with one CUDA context listed;
#    back to back, then one every 5 ms (the pace of memrel's run below: a
#    call after a sleep costs more than one right after another).
# 2. For each memrel binary given (default: target/release/memrel, any
#    build: NVML is loaded at run time), a real run: `memrel exec --device
#    cuda --interval-ms 5` of a program that holds a CUDA context 5 s; its
#    runs.json check "vram sampler (nvml)" says what one per-process read
#    and one device-memory read cost inside the sampler, and how many
#    readings it took. A sampler reading is one per-process read (plus one
#    device-memory read every 100 ms since issue 26; at every reading before).
# 3. With CRITERION=1, also `cargo bench --features cuda --bench nvml`.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${PYTHON:-python3}"
echo "== bare NVML from Python, back to back =="
"$python" "$here/bare_nvml.py"
echo "== bare NVML from Python, one call every 5 ms (memrel's pace below) =="
"$python" "$here/bare_nvml.py" --pace-ms 5 --calls 1000
binaries=("$@")
if [[ ${#binaries[@]} -eq 0 ]]; then
    binaries=(target/release/memrel)
fi
for memrel in "${binaries[@]}"; do
    echo "== $memrel: exec --device cuda --interval-ms 5, a program holding a context 5 s =="
    out="$(mktemp -d)"
    "$memrel" exec --device cuda --interval-ms 5 --out "$out" -- \
        "$python" "$here/bare_nvml.py" --hold 5 >/dev/null
    "$python" - "$out" <<'PY'
import glob, json, sys
runs = json.load(open(glob.glob(sys.argv[1] + "/exec/*/runs.json")[0]))["runs"]
for check in runs[0]["checks"]:
    if check["name"] == "vram sampler (nvml)":
        print(check["detail"])
PY
    rm -rf "$out"
done
if [[ "${CRITERION:-0}" == 1 ]]; then
    echo "== criterion: cargo bench --features cuda --bench nvml =="
    cargo bench --features cuda --bench nvml -- 'vram_sample/' 2>&1 | grep -E '^vram_sample|time:'
fi
