#!/usr/bin/env bash
# usage: buildtime.sh NAME [profile-file-to-append]
set -u
NAME=$1; B=/tmp/buildtime/$NAME
rm -rf "$B"; mkdir -p "$B"
git clone -q /work/main "$B/src"
cd "$B/src"
if [ $# -ge 2 ]; then python3 - "$2" <<'PY'
import sys
p='Cargo.toml'; s=open(p).read()
i=s.index('[profile.release]')
j=s.index('\n\n', i) if '\n\n' in s[i:] else len(s)
s=s[:i]+open(sys.argv[1]).read().strip()+'\n'+s[j:]
open(p,'w').write(s)
PY
fi
git diff --stat
export CARGO_HOME=$B/cargo-home
echo "start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/time -f "wall %e s, user %U s, sys %S s" cargo build --release --locked --timings 2>&1 | grep -E 'Finished|wall|error|Downloaded [0-9]+ crates' 
echo "end $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
cp target/cargo-timings/cargo-timing.html "$B/timing.html"
