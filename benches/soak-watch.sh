#!/usr/bin/env bash
# The soak of `memrel watch` (issue 50 item 2): memrel samples a process every
# 1 ms for SOAK_S seconds (default 600: about 600,000 samples, a week's worth at
# 1 s) with /metrics served and scraped, a sleep/wake cycle marked every
# MARK_EVERY_S seconds (default 10; 0: none);
# memrel's own VmRSS is read from /proc every 5 s. Writes OUT/rss.csv (t_s,
# memrel's RSS, the samples it says it took) and OUT/summary.txt (the RSS's
# range after the first minute). Run from the repository root after
# `cargo build --release --locked`:
#
#   bash benches/soak-watch.sh OUT [SOAK_S]
#   MARK_EVERY_S=0 bash benches/soak-watch.sh OUT [SOAK_S]
set -eu
OUT=${1:?usage: soak-watch.sh OUT [SOAK_S]}
SOAK_S=${2:-600}
MARK_EVERY_S=${MARK_EVERY_S:-10}
M=$PWD/target/release/memrel
mkdir -p "$OUT"
rm -rf "$OUT/watch"
sleep 100000 &
target=$!
"$M" watch --pid "$target" --no-tree --interval-ms 1 --metrics 127.0.0.1:0 \
  --dir "$OUT/watch" > "$OUT/watch.stdout" 2> "$OUT/watch.stderr" &
watch=$!
trap 'kill $watch $target 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  grep -q "mark phases with" "$OUT/watch.stderr" 2>/dev/null && break
  sleep 0.1
done
addr=$(sed -n 's|^memrel: OpenMetrics at http://\(.*\)/metrics$|\1|p' "$OUT/watch.stderr")
echo "t_s,memrel_rss_bytes,samples_total" > "$OUT/rss.csv"
start=$(date +%s.%N)
next_mark=0
while true; do
  now=$(python3 -c "import time;print(round(time.time()-$start,1))")
  python3 - "$now" "$SOAK_S" <<'EOF' || break
import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)
EOF
  if [ "$MARK_EVERY_S" != 0 ] && python3 -c "import sys;sys.exit(0 if $now >= $next_mark else 1)"; then
    "$M" mark "$OUT/watch" sleep; "$M" mark "$OUT/watch" asleep
    "$M" mark "$OUT/watch" wake; "$M" mark "$OUT/watch" settle
    next_mark=$(python3 -c "print($next_mark + $MARK_EVERY_S)")
  fi
  rss=$(awk '/^VmRSS:/ {print $2 * 1024}' "/proc/$watch/status")
  samples=$(python3 - "$addr" <<'EOF'
import sys, urllib.request
text = urllib.request.urlopen(f"http://{sys.argv[1]}/metrics", timeout=5).read().decode()
print(next((l.split()[-1] for l in text.splitlines() if l.startswith("memrel_samples_total")), ""))
EOF
)
  echo "$now,$rss,$samples" >> "$OUT/rss.csv"
  sleep 5
done
kill -TERM $watch
wait $watch || true
python3 - "$OUT" <<'EOF' | tee "$OUT/summary.txt"
import csv, sys
rows = list(csv.DictReader(open(f"{sys.argv[1]}/rss.csv")))
after = [r for r in rows if float(r["t_s"]) >= 60]
rss = [int(r["memrel_rss_bytes"]) for r in after]
mib = 1 << 20
print(f"readings {len(rows)}, {len(after)} after the first minute; samples taken {rows[-1]['samples_total']} in {rows[-1]['t_s']} s")
print(f"memrel RSS after the first minute: min {min(rss)/mib:.2f} MiB, max {max(rss)/mib:.2f} MiB, range {(max(rss)-min(rss))/mib:.2f} MiB")
print(f"first reading {int(rows[0]['memrel_rss_bytes'])/mib:.2f} MiB, last {rss[-1]/mib:.2f} MiB")
EOF
