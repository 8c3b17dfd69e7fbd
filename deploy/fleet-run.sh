#!/usr/bin/env bash
# fleet-run.sh OUT MEMREL "SCENARIOS" REPEAT
# One machine's share of a fleet run (docs/fleet.md), the same in every
# engine (GitHub Actions, the Kubernetes Job, the Slurm array): runs each
# scenario with every strategy, REPEAT runs each, into OUT/<scenario>/<stamp>/.
# Each record carries the machine's facts and its `machine` key, so the
# merge step needs nothing else. MEMREL_MACHINE, when set, names the machine.
set -euo pipefail
if [ $# -ne 4 ]; then
    echo "usage: fleet-run.sh OUT MEMREL \"SCENARIOS\" REPEAT" >&2
    exit 2
fi
out=$1 memrel=$2 scenarios=$3 repeat=$4
mkdir -p "$out"
"$memrel" --version
status=0
for s in $scenarios; do
    echo "== $s ($(date -u +%H:%M:%S))"
    # A failed scenario is kept (its record marks the broken runs); go on.
    "$memrel" run --scenario "$s" --repeat "$repeat" --out "$out" || status=$?
done
exit "$status"
