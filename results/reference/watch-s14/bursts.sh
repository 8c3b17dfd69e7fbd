#!/bin/bash
# Bursts of fast sleep/wake cycles marked on a `memrel watch` (1 ms sampling),
# each followed by 2 s idle, where memrel's main heap ([heap] Rss), VmRSS and
# RssAnon are read (kB): what a summary per edge leaves resident.
#   bash bursts.sh MEMREL OUT ROUNDS     (30 cycles, 120 marks, a round)
set -u
M=$1; OUT=$2; ROUNDS=$3
rm -rf "$OUT"; mkdir -p "$OUT"
sleep 100000 & target=$!
"$M" watch --pid $target --no-tree --interval-ms 1 --metrics 127.0.0.1:0 --dir "$OUT/watch" > "$OUT/w.out" 2> "$OUT/w.err" &
w=$!
for _ in $(seq 100); do grep -q "mark phases with" "$OUT/w.err" 2>/dev/null && break; sleep 0.1; done
echo "round heap_kb vmrss_kb rssanon_kb" > "$OUT/rss.txt"
for r in $(seq "$ROUNDS"); do
  for _ in $(seq 30); do
    "$M" mark "$OUT/watch" sleep; "$M" mark "$OUT/watch" asleep
    "$M" mark "$OUT/watch" wake; "$M" mark "$OUT/watch" settle
  done
  sleep 2
  heap=$(awk '/\[heap\]/ {h=1; next} /^[0-9a-f]+-/ {h=0} h && /^Rss:/ {print $2}' /proc/$w/smaps)
  echo "$r $heap $(awk '/^(VmRSS|RssAnon):/ {printf "%s ", $2}' /proc/$w/status)" >> "$OUT/rss.txt"
done
kill -TERM $w; wait $w; kill $target
