#!/usr/bin/env bash
# The first answer on a fresh clone (issue 36 line 11): the README's build,
# then the default `memrel run`, timed, with cargo's registry as it is on
# this machine (warm: the crates downloaded once) and an empty model cache
# (the run writes its bert-base checkpoint first, as a new user's does).
#   bash results/reference/build-timings/first-answer.sh [COMMIT]
set -u
B=/tmp/first-answer; rm -rf "$B"; mkdir -p "$B"
git clone -q /work/main "$B/src" && cd "$B/src" || exit 1
[ $# -ge 1 ] && git checkout -q "$1"
echo "commit $(git rev-parse --short HEAD); start $(date -u +%T); load $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores"
s=$(date +%s.%N)
/usr/bin/time -f "build: wall %e s, user %U s, sys %S s" cargo build --release --locked --timings 2>&1 | grep -E 'Finished|build:|error'
m=$(date +%s.%N)
MEMREL_CACHE_DIR=$B/cache /usr/bin/time -f "run: wall %e s, user %U s, sys %S s" ./target/release/memrel run --out "$B/results" > "$B/run.txt" 2> "$B/run.err"
grep "run:" "$B/run.err"
e=$(date +%s.%N)
python3 -c "import sys; s,m,e=map(float,sys.argv[1:]); print('first answer: build %.0f s + run %.0f s = %.0f s (%d min %02d s)' % (m-s, e-m, e-s, (e-s)//60, (e-s)%60))" "$s" "$m" "$e"
echo "end $(date -u +%T); load $(cut -d' ' -f1-3 /proc/loadavg)"
cp target/cargo-timings/cargo-timing.html "$B/timing.html"
