#!/usr/bin/env bash
# Issue 25 line 5, second half: a server-like PyTorch program that sleeps and
# wakes its model every 10 requests (examples/attach-server/server.py),
# started outside memrel and measured with `memrel attach`, its phases marked
# from its own log lines. One device call, from the repository root:
#   bash results/reference/sleep/attach.sh
# Needs .gpu/memrel.xz; writes $OUT/attach.tar.gz (/tmp/attach-results).
set -uo pipefail
cd "$(dirname "$0")/../../.."
: "${OUT:?}"
R=/tmp/attach-results; rm -rf "$R"; mkdir -p "$R"
python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('.gpu/memrel.xz'), open('/tmp/memrel','wb'))" && chmod +x /tmp/memrel
M=/tmp/memrel
export MEMREL_CACHE_DIR=/tmp/memrel-cache
$M model gen qwen2-small /tmp/ckpt-qwen2-small > "$R/model-gen.txt" 2>&1
LOG=/tmp/server.log; rm -f "$LOG"
python3 examples/attach-server/server.py --model /tmp/ckpt-qwen2-small --log "$LOG" > "$R/server.stdout" 2> "$R/server.stderr" &
PID=$!
for _ in $(seq 50); do [ -s "$LOG" ] && break; sleep 0.1; done
echo "server pid $PID; attach at $(date -u +%T.%N)" > "$R/steps.log"
$M attach --device cuda --no-tree --interval-ms 10 --log "$LOG" --dir "$R/attach-server" \
  --mark-on 'loading model=load' --mark-on 'ready=end' \
  --mark-on 'going to sleep=sleep' --mark-on 'asleep=asleep' \
  --mark-on 'waking=wake' --mark-on 'awake=end' \
  --mark-on 'unloading=unload' --mark-on 'unloaded=end' \
  "$PID" > "$R/attach.stdout" 2> "$R/attach.stderr"
echo "attach rc=$? at $(date -u +%T.%N)" >> "$R/steps.log"
wait "$PID"; echo "server rc=$?" >> "$R/steps.log"
cp "$LOG" "$R/server.log"
tar -C /tmp -czf "$OUT/attach.tar.gz" attach-results
cat "$R/steps.log"; tail -40 "$R/attach.stdout"; tail -20 "$R/attach.stderr"; tail -5 "$R/server.stderr"
