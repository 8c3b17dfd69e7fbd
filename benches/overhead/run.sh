#!/usr/bin/env bash
# Entry point of the harness-overhead benchmark (issue 15, item 4).
#
# Why it exists: one command that measures what memrel itself costs (wall
# time, CPU, peak RSS; fixed per run, per second, per sample) against the same
# workloads run bare, and writes overhead.md, overhead.json and trials.csv.
# The work is done by overhead.py (Python 3 standard library only); this file
# only picks the binary and the output directory.
#
#   MEMREL=/path/to/memrel benches/overhead/run.sh [--out DIR] [overhead.py options]
#   benches/overhead/run.sh --memrel /path/to/memrel --quick --out /tmp/smoke
#
# MEMREL (or --memrel) names the binary to measure; MEMREL_COMMIT (or
# --memrel-commit) the commit it was built from, for the report. Default
# output: results/overhead/<UTC timestamp> under the current directory.
# `overhead.py --help` lists every knob. Linux only. About 10-11 minutes with
# the defaults on a 2-core VM.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${PYTHON:-python3}"
if ! command -v "$python" >/dev/null 2>&1; then
    echo "run.sh: $python not found: install Python 3.9+ or set PYTHON=/path/to/python3" >&2
    exit 2
fi
args=(--out "results/overhead/$(date -u +%Y%m%d-%H%M%S)")
if [[ -n "${MEMREL:-}" ]]; then
    args+=(--memrel "$MEMREL")
fi
# Later options win: an --out or --memrel given here replaces the defaults above.
exec "$python" "$here/overhead.py" "${args[@]}" "$@"
