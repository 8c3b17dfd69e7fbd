#!/usr/bin/env bash
# The CPU strategies on a second host: the lent GPU machine's own CPU
# (Ubuntu 24.04, glibc 2.39, 16 cores), with the same memrel binary and the
# same Debian 12 allocator packages as the first host, unpacked with dpkg -x
# into a folder of their own (that machine has no network).
#
# Prepared on the build machine (from the repository root):
#   cargo build --release && mkdir -p .gpu/debs
#   xz -T2 -9 -c target/release/memrel > .gpu/memrel.xz
#   (cd .gpu/debs && apt-get download libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0)
# Run there (device tool, carry .gpu), one part per call:
#   bash results/reference/allocators/second-host.sh PART
# PART: cpu-all | article-glibc | article-jemalloc-tcmalloc | article-mimalloc-respawn
# (article-cpu in three parts, each under the 10-minute limit of one call; the
# build machine compares the three saved directories) | idle | busy (the
# release scenarios). Each part leaves one tarball of its results under $OUT,
# also when it runs out of time (memrel saves every finished run).
set -euo pipefail
part=${1:?part: cpu-all, article-cpu or release}
: "${OUT:?OUT is set by the device tool}"

libs=/tmp/allocator-libs
mkdir -p "$libs"
for deb in .gpu/debs/*.deb; do dpkg -x "$deb" "$libs"; done
export MEMREL_ALLOCATOR_PATH="$libs/usr/lib/x86_64-linux-gnu"
xz -dc .gpu/memrel.xz > /tmp/memrel && chmod +x /tmp/memrel
export MEMREL_CACHE_DIR=/tmp/memrel-cache
cpu_strategies=$(/tmp/memrel list | awk '/^strategies/{s=1;next} /^$/{s=0} s && /\[(cpu|any)\]/{print $1}' | paste -sd,)
echo "strategies: $cpu_strategies"
{ uname -a; nproc; ldd --version | sed -n 1p; grep -m1 'model name' /proc/cpuinfo; free -g | sed -n 1,2p; } > "$OUT/host.txt"
cat "$OUT/host.txt"

res=/tmp/results
pick() { echo "$cpu_strategies" | tr , '\n' | grep -E "$@" | paste -sd,; }
limit=(timeout --signal=INT 540)
case "$part" in
cpu-all) "${limit[@]}" /tmp/memrel compare --scenario cpu-all --repeat 3 --out "$res" || true ;;
article-*)
    case "$part" in
    article-glibc) only=$(pick -v 'jemalloc|tcmalloc|mimalloc|respawn') ;;
    article-jemalloc-tcmalloc) only=$(pick 'jemalloc|tcmalloc') ;;
    article-mimalloc-respawn) only=$(pick 'mimalloc|respawn') ;;
    *) echo "unknown part $part" >&2; exit 2 ;;
    esac
    "${limit[@]}" /tmp/memrel compare --scenario article-cpu --strategies "$only" --repeat 3 --out "$res" || true
    ;;
idle) "${limit[@]}" /tmp/memrel compare --scenario cpu-idle-release --out "$res" || true ;;
busy) "${limit[@]}" /tmp/memrel compare --scenario cpu-busy-release --out "$res" || true ;;
*) echo "unknown part $part" >&2; exit 2 ;;
esac
tar -C "$res" -cJf "$OUT/$part.tar.xz" .
ls -la "$OUT"
