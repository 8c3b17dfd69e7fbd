#!/usr/bin/env bash
# What ran on the GPU machine for results/reference/calibrate/gpu-h200/:
# memrel's default build (no `cuda` feature, no Rust there) calibrating VRAM
# through the driver library, at 10 ms and 1 ms, plus a probe of the
# per-process VRAM's steps near cuMemAlloc's 2 MiB page, one calibration
# with the nvidia-smi cross-check at every phase edge, and a fake run
# through `memrel run` (VRAM columns of the ordinary pipeline).
#
# Built here:   cargo build --release && mkdir -p .gpu/vram-calibrate &&
#               xz -T2 -6 -c target/release/memrel > .gpu/vram-calibrate/memrel.xz &&
#               cp results/reference/calibrate/gpu-run.sh .gpu/vram-calibrate/
# Run there:    bash .gpu/vram-calibrate/gpu-run.sh   (with $OUT set; carry .gpu/vram-calibrate)
#
# $OUT takes at most 8 files, 2 folders down: the tables and the machine come
# back as files, everything else (every run directory, logs) in raw.tar.xz.
set -u
: "${OUT:?set OUT to the folder that comes back}"
here=$(cd "$(dirname "$0")" && pwd)
bin=/tmp/memrel
work=/tmp/memrel-gpu
xz -dc "$here/memrel.xz" > "$bin" && chmod +x "$bin" || exit 2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 2
export MEMREL_CACHE_DIR=$work/cache

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "uname: $(uname -a)"
    echo "cpus: $(nproc)"
    grep -m1 'model name' /proc/cpuinfo
    echo "memrel: $("$bin" --version)"
    echo
    nvidia-smi -q | head -40
    echo
    nvidia-smi
} > "$OUT/machine.txt" 2>&1

log=$OUT/log.txt
step() {
    echo "== $*" >> "$log"
    local start=$SECONDS
    "$@" >> "$log" 2>&1
    echo "== rc=$? in $((SECONDS - start)) s" >> "$log"
}

step "$bin" calibrate --device cuda --out "$work/cal10"
step "$bin" calibrate --device cuda --interval-ms 1 --out "$work/cal1"
step "$bin" calibrate --device cuda --interval-ms 1 --sizes-mib 1,2,3,4,5,6,7,8,9,16,17,31,32,33 \
    --out "$work/steps"
step env MEMREL_CROSSCHECK_NVIDIA_SMI=1 "$bin" calibrate --device cuda --out "$work/smi"

cat > "$work/fake-vram.toml" <<'EOF'
description = "the fake worker on cuda: 256 MiB of device memory and 64 MiB of host memory per load"
device = "cuda"
cycles = 3
strategies = ["drop"]
interval_ms = 5
[models.a]
fake_vram_mib = 256
fake_anon_mib = 64
[workload]
steps = ["load a", "forward a", "unload a", "release", "settle"]
settle_ms = 100
baseline_ms = 100
EOF
step "$bin" run --scenario "$work/fake-vram.toml" --out "$work/run"

for d in cal10 cal1; do
    mkdir -p "$OUT/$d"
    cp "$work"/$d/calibrate/*/calibrate.md "$work"/$d/calibrate/*/calibrate.json "$OUT/$d/" 2>> "$log"
done
cp "$work"/steps/calibrate/*/calibrate.md "$OUT/steps.md" 2>> "$log"
tar -C "$work" --exclude=cache -cf - . | xz -T0 -9 > "$OUT/raw.tar.xz"
ls -la "$OUT" "$OUT"/* >> "$log" 2>&1
cat "$log"
