#!/usr/bin/env bash
# One device call: the GPU regression gate end to end on a real GPU.
#  1. make the baseline `gpu` from cuda-flush with 2 processes per strategy
#     (a `regressed` verdict needs at least 2 runs on each side);
#  2. the steps of .github/workflows/memrel-gpu.yml as written (check exits 0);
#  3. a deliberately worse cuda-flush (its `release` step removed), checked
#     against the baseline (check must exit 1).
# Needs .gpu/memrel.xz (scripts/build-cuda.sh); writes $OUT/results.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/../../.."
: "${OUT:?}"
R=/tmp/results; mkdir -p "$R"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" .gpu/memrel.xz /tmp/memrel && chmod +x /tmp/memrel || exit 1
export MEMREL_CACHE_DIR=/tmp/memrel-cache
M=/tmp/memrel
{ nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv; uname -a; nproc; } > "$R/device.txt" 2>&1
step() { # name, command...
  local name=$1; shift
  echo "== $name: $* ($(date -u +%H:%M:%S))" | tee -a "$R/steps.log"
  local start=$(date +%s.%N)
  "$@" > "$R/$name.stdout" 2> "$R/$name.stderr"; local rc=$?
  echo "$name rc=$rc wall_s=$(python3 -c "import time;print(round(time.time()-$start,1))")" | tee -a "$R/steps.log"
}
step baseline $M compare --scenario cuda-flush --repeat 2 --save-baseline gpu --out "$R"
# The workflow's steps, with its results root and verdict dir under $R.
step wf-cuda-flush $M run --scenario cuda-flush --out "$R"
step wf-cuda-context $M run --scenario cuda-context --out "$R"
step wf-article-gpu $M run --scenario article-gpu --out "$R"
step wf-check $M check --baseline gpu --lenient --out "$R" --verdict-dir "$R/verdict-same"
# The worse configuration: the same scenario without its release step.
mkdir -p /tmp/worse
sed 's/"idle 300", "release", "settle"/"idle 300", "settle"/' scenarios/cuda-flush.toml > /tmp/worse/cuda-flush.toml
grep -q '"release"' /tmp/worse/cuda-flush.toml && echo "sed did not remove the release step" >> "$R/steps.log"
cp /tmp/worse/cuda-flush.toml "$R/worse-cuda-flush.toml"
step worse-run $M run --scenario /tmp/worse/cuda-flush.toml --repeat 2 --out "$R/worse"
step worse-check $M check --baseline gpu --out "$R" --verdict-dir "$R/verdict-worse" "$(ls -d "$R"/worse/cuda-flush/* | tail -1)"
echo "== done ($(date -u +%H:%M:%S))" >> "$R/steps.log"
tar -C /tmp -czf "$OUT/results.tar.gz" results
ls -la "$OUT"
