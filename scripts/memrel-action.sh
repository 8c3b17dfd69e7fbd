#!/usr/bin/env bash
# memrel-action.sh: the gate step of the memrel GitHub Action (action.yml),
# kept in a file so it runs the same on a laptop as on a runner:
#
#   MEMREL_COMMAND=exec MEMREL_BASELINE=main MEMREL_SCENARIO=swap \
#   MEMREL_PROGRAM="python3 swap.py" bash scripts/memrel-action.sh
#
# MEMREL_COMMAND  check (default): `memrel check` re-runs what the baseline
#                 recorded and judges it; run: `memrel run --scenario
#                 MEMREL_SCENARIO` now, then one `memrel check` of that run;
#                 exec: `memrel exec --name MEMREL_SCENARIO -- MEMREL_PROGRAM`
#                 now, then one `memrel check` of that run.
# MEMREL_BASELINE the baseline's name (MEMREL_OUT/baselines/NAME), required.
# MEMREL_ARGS     more arguments for check, run or exec (split as a shell would).
# MEMREL_OUT      the results root holding baselines/ (default: results).
# MEMREL_VERDICT_DIR  where verdict.md and verdict.json go (default: memrel-verdict).
# MEMREL_RUNS     where run/exec write their results (default: a new temporary folder).
# MEMREL_BIN      the memrel binary (default: memrel on PATH, else ~/.cargo/bin/memrel).
#
# Writes verdict.md to $GITHUB_STEP_SUMMARY and `exit-code` to $GITHUB_OUTPUT
# when they are set, and exits with memrel's code: 0 no regression, 1 a
# regression or a budget exceeded, 2 broken evidence or bad input.
set -uo pipefail

fail() { echo "memrel action: $*" >&2; exit 2; }

command=${MEMREL_COMMAND:-check}
baseline=${MEMREL_BASELINE:-}
out=${MEMREL_OUT:-results}
verdict_dir=${MEMREL_VERDICT_DIR:-memrel-verdict}
bin=${MEMREL_BIN:-memrel}
if ! command -v "$bin" >/dev/null && [ -z "${MEMREL_BIN:-}" ] && [ -x "$HOME/.cargo/bin/memrel" ]; then
    bin=$HOME/.cargo/bin/memrel
fi
[ -n "$baseline" ] || fail "the input baseline is empty: name the baseline to check against (made with --save-baseline NAME)"
command -v "$bin" >/dev/null || fail "$bin not found: install memrel (cargo install --git URL --locked memrel) or set MEMREL_BIN"
# The user's own workflow input, split as a shell would split it (quotes kept).
eval "args=(${MEMREL_ARGS:-})"
eval "program=(${MEMREL_PROGRAM:-})"

runs=${MEMREL_RUNS:-}
if [ "$command" != check ] && [ -z "$runs" ]; then
    runs=$(mktemp -d "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/memrel-runs.XXXXXX")
fi

measured=0
case "$command" in
    check)
        [ ${#program[@]} -eq 0 ] || fail "the input program is for command exec, not check"
        "$bin" check --baseline "$baseline" --out "$out" --verdict-dir "$verdict_dir" "${args[@]}"
        rc=$?
        ;;
    run | exec)
        scenario=${MEMREL_SCENARIO:-}
        [ -n "$scenario" ] || fail "command $command needs the input scenario (run: a built-in name or a TOML file; exec: the name its results and baseline entry go under)"
        if [ "$command" = run ]; then
            "$bin" run --scenario "$scenario" --out "$runs" "${args[@]}"
        else
            [ ${#program[@]} -gt 0 ] || fail "command exec needs the input program (e.g. python3 serve.py)"
            "$bin" exec --name "$scenario" --out "$runs" "${args[@]}" -- "${program[@]}"
        fi
        measured=$?
        # Every results directory the command made: <runs>/<scenario>/<timestamp>/.
        mapfile -t dirs < <(find "$runs" -mindepth 2 -maxdepth 2 -type d -name '[0-9]*' | sort)
        if [ ${#dirs[@]} -eq 0 ]; then
            echo "memrel action: memrel $command exited with $measured and wrote no results under $runs" >&2
            rc=$((measured == 0 ? 2 : measured))
        else
            "$bin" check --baseline "$baseline" --out "$out" --verdict-dir "$verdict_dir" "${dirs[@]}"
            rc=$?
            # A run that failed is broken evidence, which check reports (exit 2);
            # should it not, the measuring command's own failure still fails the step.
            if [ "$rc" -eq 0 ] && [ "$measured" -ne 0 ]; then rc=$measured; fi
        fi
        ;;
    *) fail "the input command is $command: use check, run or exec" ;;
esac

if [ -n "${GITHUB_STEP_SUMMARY:-}" ] && [ -f "$verdict_dir/verdict.md" ]; then
    cat "$verdict_dir/verdict.md" >>"$GITHUB_STEP_SUMMARY"
fi
if [ -n "${GITHUB_OUTPUT:-}" ]; then
    echo "exit-code=$rc" >>"$GITHUB_OUTPUT"
fi
exit "$rc"
