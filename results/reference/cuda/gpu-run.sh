#!/usr/bin/env bash
# One device call: unpack memrel (cuda build), run every CUDA scenario, the
# nvidia-smi cross-check and the NVML bench; pack results into $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?}"
R=/tmp/results; mkdir -p "$R"
unpack() { python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$1" "$2" && chmod +x "$2"; }
unpack .gpu/memrel.xz /tmp/memrel || exit 1
[ -f .gpu/nvml-bench.xz ] && unpack .gpu/nvml-bench.xz /tmp/nvml-bench
export MEMREL_CACHE_DIR=/tmp/memrel-cache
log() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$R/steps.log"; }
{ nvidia-smi; nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv; uname -a; nproc; free -g; } > "$R/device.txt" 2>&1
/tmp/memrel --help > "$R/help.txt" 2>&1
ls ~/.nv/ComputeCache 2>&1 | head -3 > "$R/jit-cache-before.txt"
run() { # name, env..., args...
  local name=$1; shift
  log "$name: $*"
  local start=$(date +%s.%N)
  env "$@" > "$R/$name.stdout" 2> "$R/$name.stderr"; local rc=$?
  echo "$name rc=$rc wall_s=$(python3 -c "import time;print(round(time.time()-$start,1))")" | tee -a "$R/steps.log"
}
run first-run-jit MEMREL_X=0 /tmp/memrel run --scenario cuda-drop --strategy sync --cycles 1 --out "$R/jit"
run cuda-flush-crosscheck MEMREL_CROSSCHECK_NVIDIA_SMI=1 /tmp/memrel compare --scenario cuda-flush --out "$R/runs"
run cuda-drop MEMREL_X=0 /tmp/memrel run --scenario cuda-drop --out "$R/runs"
run cuda-context MEMREL_X=0 /tmp/memrel compare --scenario cuda-context --out "$R/runs"
run article-gpu MEMREL_X=0 /tmp/memrel run --scenario article-gpu --out "$R/runs"
run vram-fallback MEMREL_VRAM_FALLBACK=1 /tmp/memrel run --scenario cuda-flush --strategy sync --strategy context-release --out "$R/fallback"
if [ -x /tmp/nvml-bench ]; then
  run nvml-bench MEMREL_X=0 /tmp/nvml-bench --bench --warm-up-time 1 --measurement-time 3 --noplot
fi
nvidia-smi --query-compute-apps=pid,used_memory --format=csv > "$R/apps-after.txt" 2>&1
log done
tar -C /tmp -czf "$OUT/results.tar.gz" results
ls -la "$OUT"
