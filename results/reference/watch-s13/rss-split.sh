#!/bin/bash
M=/tmp/soakrepo/target/release/memrel
OUT=/tmp/soak/split; rm -rf $OUT; mkdir -p $OUT
sleep 100000 & target=$!
$M watch --pid $target --no-tree --interval-ms 1 --metrics 127.0.0.1:0 --dir $OUT/w > $OUT/stdout 2> $OUT/stderr & w=$!
sleep 2
end=$((SECONDS+${1:-300})); next=0
while [ $SECONDS -lt $end ]; do
  if [ $SECONDS -ge $next ]; then for p in sleep asleep wake settle; do $M mark $OUT/w $p; done; next=$((SECONDS+10)); fi
  echo "$SECONDS $(awk '/^(VmRSS|RssAnon|RssFile):/{printf "%s ", $2}' /proc/$w/status)"
  sleep 5
done
kill -TERM $w; wait $w; kill $target
