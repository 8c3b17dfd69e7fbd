#!/usr/bin/env bash
# Issue 27: the pytest plugin on host memory, as a user runs it: the wheel
# (`maturin build --release`, target/wheels) and pytest installed into a
# fresh venv, then `pytest --memrel` on tests/python/cpu_cases.py. From the
# repository root:
#   bash results/reference/pytest/cpu.sh [VENV]     (default /tmp/memrel-pytest-venv)
# Writes results/reference/pytest/cpu/: console.txt (pytest's output, the
# failure messages and the memrel report) and one results directory per test
# (summary.json, events.csv, samples.csv, runs.json, timeline.png, attach.log).
# Needs a built wheel and pytest from PyPI (or VENV with both installed).
set -euo pipefail
cd "$(dirname "$0")/../../.."
VENV=${1:-/tmp/memrel-pytest-venv}
R=results/reference/pytest/cpu
if [ ! -x "$VENV/bin/memrel" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q pytest target/wheels/memrel-*.whl
fi
rm -rf "$R"; mkdir -p "$R"
{
    echo "\$ pytest --memrel --memrel-dir $R tests/python/cpu_cases.py   # $(date -u +%FT%TZ), $(uname -srm)"
    echo "# $("$VENV/bin/memrel" --version), $("$VENV/bin/python" -m pytest --version 2>&1), $("$VENV/bin/python" --version)"
    # Expected to fail (2 of the 4 tests exceed their limit): exit 1.
    "$VENV/bin/python" -m pytest -p no:cacheprovider --memrel --memrel-dir "$R" tests/python/cpu_cases.py || echo "(pytest exit $?)"
} > "$R/console.txt" 2>&1
cat "$R/console.txt"
