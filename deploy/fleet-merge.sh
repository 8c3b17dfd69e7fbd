#!/usr/bin/env bash
# fleet-merge.sh ROOT MEMREL OUT
# The merge step of every engine (docs/fleet.md): finds every results
# directory under ROOT (each machine's OUT of fleet-run.sh, wherever the
# engine put it), and per scenario runs `memrel compare` over all of them:
# rows keyed by (machine, strategy), compare.png with a panel per machine.
# Writes OUT/<scenario>/ (compare.md, compare.csv, compare.png, …) and
# OUT/summary.md: each scenario's compare.md, then each machine's verdict.md
# where fleet-check.sh wrote one. Exits 2 when there is nothing to merge or
# a comparison fails (two records that claim one machine key but differ in
# its facts, say); the summary says which.
set -euo pipefail
if [ $# -ne 3 ]; then
    echo "usage: fleet-merge.sh ROOT MEMREL OUT" >&2
    exit 2
fi
root=$1 memrel=$2 out=$3
mkdir -p "$out"
summary="$out/summary.md"
: >"$summary"
# Results directories: OUT/<scenario>/<stamp>/runs.json of fleet-run.sh;
# not the compare/ outputs or a merge's own.
mapfile -t dirs < <(find "$root" -name runs.json -not -path "$out/*" -not -path '*/compare/*' -printf '%h\n' | sort)
if [ ${#dirs[@]} -eq 0 ]; then
    echo "fleet-merge.sh: no results directory (runs.json) under $root" | tee -a "$summary" >&2
    exit 2
fi
mapfile -t scenarios < <(for d in "${dirs[@]}"; do basename "$(dirname "$d")"; done | sort -u)
status=0
for s in "${scenarios[@]}"; do
    mine=()
    for d in "${dirs[@]}"; do
        [ "$(basename "$(dirname "$d")")" = "$s" ] && mine+=("$d")
    done
    echo "== $s: ${#mine[@]} results directories"
    work="$out/.work-$s"
    rm -rf "$work"
    if "$memrel" compare --out "$work" "${mine[@]}" >"$out/$s.txt" 2>&1; then
        rm -rf "${out:?}/$s"
        mv "$work"/compare/* "$out/$s"
        cat "$out/$s/compare.md" >>"$summary"
        printf '\n' >>"$summary"
    else
        status=2
        { printf '### memrel compare: %s failed\n\n```\n' "$s"; cat "$out/$s.txt"; printf '```\n\n'; } >>"$summary"
    fi
    rm -rf "$work"
    cat "$out/$s.txt"
done
while IFS= read -r verdict; do
    { printf '#### verdict of %s\n\n' "$(dirname "$verdict")"; cat "$verdict"; printf '\n'; } >>"$summary"
done < <(find "$root" -path '*/verdict/verdict.md' -not -path "$out/*" | sort)
echo "summary: $summary"
exit "$status"
