#!/usr/bin/env bash
# The PyTorch seed scenarios and their candle counterparts on the lent GPU
# machine (H200, driver 580, Ubuntu 24.04, its python3 with torch and
# transformers), in three parts that each fit one 10-minute call:
#
#   bash results/reference/pytorch/gpu-run.sh gpu1   # the article's GPU experiment, cudaDeviceReset, accelerate
#   bash results/reference/pytorch/gpu-run.sh gpu2   # training clean-up, synchronize, candle's article-gpu
#   bash results/reference/pytorch/gpu-run.sh cpu    # the CPU scenarios (its 16-core CPU)
#
# Needs .gpu/memrel.xz: the `cuda` build of this commit (scripts/build-cuda.sh),
# xz-compressed. Writes $OUT/<part>.tar.gz (the results directories) and
# $OUT/<part>-log.txt.
set -uo pipefail
part=${1:?gpu1, gpu2 or cpu}
out=${OUT:?set OUT}
python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('.gpu/memrel.xz'), open('/tmp/memrel','wb'))"
chmod +x /tmp/memrel
export MEMREL_CACHE_DIR=/tmp/memrel-cache
results=/tmp/results-$part
log="$out/$part-log.txt"
{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    python3 -c 'import sys, torch, transformers; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)'
    nproc
} >"$log" 2>&1
run() {
    echo "=== memrel run $* ($(date -u +%T))" >>"$log"
    /tmp/memrel run --out "$results" "$@" >>"$log" 2>&1
    echo "exit $? ($(date -u +%T))" >>"$log"
}
case $part in
gpu1)
    run --scenario torch-gpu-article --strategy drop --strategy gc-collect --strategy empty-cache \
        --strategy ipc-collect --strategy to-cpu --strategy accelerate-release
    run --scenario torch-gpu-article --strategy device-reset --cycles 2
    run --scenario torch-gpu-accelerate
    ;;
gpu2)
    run --scenario torch-gpu-training
    run --scenario torch-gpu-sync
    run --scenario article-gpu --cycles 3
    ;;
cpu)
    run --scenario torch-cpu-article
    run --scenario torch-cpu-article-copy
    run --scenario torch-cpu-training
    run --scenario article-cpu --cycles 3 --strategy drop --strategy malloc-trim \
        --strategy trim-threshold-env --strategy mallopt
    ;;
esac
tar czf "$out/$part.tar.gz" -C "$results" .
ls -la "$out" >>"$log"
