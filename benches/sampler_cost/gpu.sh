#!/usr/bin/env bash
# Issue 26, line 5, on a GPU machine (the device tool's H100), one device
# call from the repository root:
#   bash benches/sampler_cost/gpu.sh
# 1. The floor under any sampling loop: one thread waking every 1 ms with
#    no work, three ways (benches/wakeup.rs, its built binary).
# 2. The sampler's cost at 1 kHz: `memrel exec --interval-ms 1 -- sleep 10`,
#    the sampler thread's share of a core and the whole memrel process's
#    CPU (benches/sampler_cost/sampler_cost.py), 5 runs.
# 3. One VRAM reading against a bare NVML call (benches/nvml/run.sh) for
#    the binary before the one-call process list, this one, and this
#    one's cuda build, in that order.
# Needs, made on the build machine and compressed with xz:
#   .gpu/memrel.xz       cargo build --release (this commit)
#   .gpu/memrel-old.xz   the same before src/sampler/nvml_list.rs
#   .gpu/memrel-cuda.xz  scripts/build-cuda.sh (this commit)
#   .gpu/wakeup.xz       cargo bench --bench wakeup --no-run's binary
# Writes $OUT/{device,wakeup,sampler_cost,nvml}.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?}"
unxz() { python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$1" "$2" && chmod +x "$2"; }
for b in memrel memrel-old memrel-cuda wakeup; do
  unxz ".gpu/$b.xz" "/tmp/$b" || exit 1
done
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv; uname -a; nproc
  grep -m1 "model name" /proc/cpuinfo; systemd-detect-virt 2>/dev/null || true
  cat /sys/devices/system/clocksource/clocksource0/current_clocksource; uptime; } > "$OUT/device.txt" 2>&1
/tmp/wakeup 5 > "$OUT/wakeup.txt" 2>&1
python3 benches/sampler_cost/sampler_cost.py --runs 5 /tmp/memrel > "$OUT/sampler_cost.txt" 2>&1
bash benches/nvml/run.sh /tmp/memrel-old /tmp/memrel /tmp/memrel-cuda > "$OUT/nvml.txt" 2>&1
uptime >> "$OUT/device.txt"
tail -n 40 "$OUT"/*.txt
