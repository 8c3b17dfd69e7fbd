#!/usr/bin/env bash
# Runs docs/adopt.md's steps end to end on the sample in this folder, from a
# fresh directory standing in for another repository, and prints every
# command with its output (walkthrough.log is one such run):
#
#   cargo build --release --locked && bash examples/adopt/walkthrough.sh > examples/adopt/walkthrough.log
#
# The memrel built here (target/release/memrel) stands in for `cargo install
# --git … --locked memrel`; scripts/memrel-action.sh is the action's gate step.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[ -x "$repo/target/release/memrel" ] || { echo "walkthrough: build memrel first: cargo build --release --locked" >&2; exit 2; }
export PATH="$repo/target/release:$PATH"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 2

# Prints a command as typed, then runs it and prints its exit code.
step() {
    printf '\n$ %s\n' "$*"
    bash -c "$*" 2>&1
    printf '[exit %s]\n' "$?"
}
# The first lines of verdict.md: its headline and what failed.
headline() { sed -n '1,/^<details>/p' "$1" | grep -v '^<details>' | head -12; }

echo "# docs/adopt.md, step by step, in a fresh directory ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(. /etc/os-release && echo "$PRETTY_NAME"))"
echo; echo "## 0. your repository: a program, here examples/adopt/swap.py"
step "cp '$repo/examples/adopt/swap.py' '$repo/examples/adopt/swap.toml' . && ls"
echo; echo "## 1. install (cargo install --git <url> --locked memrel; here the binary built in this checkout)"
step "memrel --version"
echo; echo "## 2. the scenario: which program, which strategies, how many cycles"
step "grep -v '^#' swap.toml"
echo; echo "## 3. the program marks its phases"
step "grep -n 'memrel\\.' swap.py"
echo; echo "## 4. make the baseline (commit results/baselines/ afterwards)"
step "memrel run --scenario swap.toml --repeat 3 --save-baseline main"
step "find results/baselines -type f | sort"
step "memrel baseline show main"
echo; echo "## 5. check: re-runs what the baseline recorded and judges it"
step "memrel check --baseline main --verdict-dir verdict > /dev/null"
headline verdict/verdict.md
echo; echo "## 6. the workflow's step (action.yml runs scripts/memrel-action.sh): run now, one check, verdict.md into the job summary"
step "MEMREL_COMMAND=run MEMREL_SCENARIO=swap.toml MEMREL_BASELINE=main MEMREL_ARGS='--repeat 3' GITHUB_STEP_SUMMARY=summary.md bash '$repo/scripts/memrel-action.sh' > /dev/null"
headline summary.md
echo; echo "## 7. a change that leaks: a quarter of each model outlives it"
step "sed -i 's/request_log.append(bytearray(64 \\* 1024))/request_log.append(model[::4])/' swap.py && grep -n 'request_log.append' swap.py"
step "MEMREL_COMMAND=run MEMREL_SCENARIO=swap.toml MEMREL_BASELINE=main MEMREL_ARGS='--repeat 3' bash '$repo/scripts/memrel-action.sh' > /dev/null"
headline memrel-verdict/verdict.md
echo; echo "(the leak is undone: swap.py as committed)"
cp "$repo/examples/adopt/swap.py" swap.py
echo; echo "## 8. an intended change (the model grows to 96 MiB): the gate says so, and the baseline is updated on purpose"
echo "(check with no directories re-runs the baseline's own copy of the scenario; a changed scenario file is judged by running it: command run)"
step "sed -i 's/\"--mib\", \"64\"/\"--mib\", \"96\"/' swap.toml && grep '^command' swap.toml"
step "MEMREL_COMMAND=run MEMREL_SCENARIO=swap.toml MEMREL_BASELINE=main MEMREL_ARGS='--repeat 3' bash '$repo/scripts/memrel-action.sh' > /dev/null"
headline memrel-verdict/verdict.md
step "memrel run --scenario swap.toml --repeat 3 --save-baseline main | tail -2"
step "MEMREL_COMMAND=run MEMREL_SCENARIO=swap.toml MEMREL_BASELINE=main MEMREL_ARGS='--repeat 3' bash '$repo/scripts/memrel-action.sh' > /dev/null"
headline memrel-verdict/verdict.md
