#!/usr/bin/env bash
# fleet-check.sh OUT MEMREL BASELINE ANY_MACHINE
# Checks one machine's runs (every results directory under OUT) against the
# committed baseline BASELINE (results/baselines/<BASELINE>, read from the
# repository's results/): verdict.md and verdict.json go to OUT/verdict/.
# Scenarios the baseline lacks are skipped (--lenient): a fleet runs more
# than any one baseline covers. A baseline made on another kind of machine
# makes the check exit 2 naming the facts that differ, unless ANY_MACHINE is
# `true` (--any-machine: every verdict row then says so).
set -euo pipefail
if [ $# -ne 4 ]; then
    echo "usage: fleet-check.sh OUT MEMREL BASELINE true|false" >&2
    exit 2
fi
out=$1 memrel=$2 baseline=$3 any=$4
mapfile -t dirs < <(find "$out" -name runs.json -not -path '*/verdict/*' -printf '%h\n' | sort)
if [ ${#dirs[@]} -eq 0 ]; then
    echo "fleet-check.sh: no results directory under $out" >&2
    exit 2
fi
extra=()
if [ "$any" = true ]; then extra+=(--any-machine); fi
"$memrel" check --baseline "$baseline" --out results --lenient --verdict-dir "$out/verdict" "${extra[@]}" "${dirs[@]}"
