#!/usr/bin/env bash
# Issue 49, item 2 on a GPU machine: the frameworks' own views at each edge.
# From the repository root, with a memrel built for the machine at $MEMREL
# (the default CPU build reads VRAM through NVML too; a CUDA build is fine):
#   OUT=/some/dir MEMREL=target/release/memrel bash results/reference/views-gpu/run.sh
# Without MEMREL it unpacks .gpu/memrel.xz (as the other GPU scripts do).
# Runs `memrel exec --cycles 2 -- python3 planted.py`, polls nvidia-smi's
# per-process list every 100 ms beside it (smi.csv), then prints each edge's
# views from events.csv next to memrel's own VRAM reading. Everything goes
# under $OUT/views-gpu (steps.log, device.txt, exec.stdout/.stderr, smi.csv,
# views.txt, the results directory run/, cost.stdout: what the module's
# edge view costs per edge with CUDA initialised).
set -u
cd "$(dirname "$0")/../../.."
: "${OUT:?set OUT to the folder the results go to}"
R="$OUT/views-gpu"
rm -rf "$R" && mkdir -p "$R" || exit 1
source results/reference/device-lib.sh
if [ -z "${MEMREL:-}" ]; then
  MEMREL=/tmp/memrel
  [ -x "$MEMREL" ] || unxz .gpu/memrel.xz "$MEMREL" || { echo "no MEMREL and no .gpu/memrel.xz" >&2; exit 1; }
fi
{
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
  python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)"
  python3 -c "import jax; print('jax', jax.__version__)" 2>&1 | tail -n 1
  "$MEMREL" --version
} > "$R/device.txt" 2>&1

nvidia-smi --query-compute-apps=timestamp,pid,used_memory --format=csv -lms 100 > "$R/smi.csv" 2>&1 &
SMI=$!
step exec "$MEMREL" exec --cycles 2 --out "$R/run" -- python3 results/reference/views-gpu/planted.py
sleep 0.3
kill "$SMI" 2>/dev/null
wait "$SMI" 2>/dev/null

# What the module's edge view costs with CUDA initialised (bare, no memrel).
step cost env PYTHONPATH=python python3 results/reference/views-gpu/planted.py --cost

EVENTS=$(find "$R/run" -name events.csv | head -n 1)
if [ -z "$EVENTS" ]; then
  echo "no events.csv under $R/run" | tee -a "$R/steps.log"
else
  python3 - "$EVENTS" > "$R/views.txt" 2>&1 <<'PY'
import csv, sys

MIB = 1 << 20
rows = list(csv.DictReader(open(sys.argv[1])))
print("events.csv: %s (MiB; views from the readings cell, memrel's own VRAM reading beside them)" % sys.argv[1])
print("%-5s %-10s %-5s %9s %9s %9s  %s" % ("cycle", "phase", "edge", "vram", "heap_use", "heap_held", "views"))
for r in rows:
    views = []
    for entry in r.get("readings", "").split():
        key, _, value = entry.partition("=")
        if "torch_" in key or "jax_" in key:
            views.append("%s=%.0f" % (key, int(value) / MIB))
    mib = lambda c: ("%.0f" % (int(r[c]) / MIB)) if r.get(c) else "-"
    print("%-5s %-10s %-5s %9s %9s %9s  %s" % (
        r["cycle"], r["phase"], r["edge"], mib("vram_bytes"), mib("heap_in_use_bytes"),
        mib("heap_held_bytes"), " ".join(views) or "(none)"))
print()
print("want at each load end: cuda:0.torch_allocated=256 cuda:0.torch_reserved=1280 "
      "host.torch_pinned_held=512 (host.torch_pinned_in_use=0 from torch 2.15 on); with JAX cuda:0.jax_pool>=256, "
      "jax_in_use about 0; at each unload end torch_allocated=0, torch_reserved=1280")
PY
fi
cat "$R/steps.log"
cat "$R/views.txt" 2>/dev/null
cat "$R/cost.stdout" "$R/cost.stderr"
grep -h "planted.py\|memrel:" "$R/exec.stderr" | tail -n 20
