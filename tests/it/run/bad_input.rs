//! Bad input gets a clear, lowercase error naming the file, line or flag, and
//! exit code 2; never a panic.

use std::process::Command;

use crate::common::*;

fn fails_with(args: &[&str], needles: &[&str]) -> String {
    let mut command = memrel();
    command.args(args);
    refused(command, needles)
}

/// `memrel run --scenario …` built with [`run`], refused.
fn run_fails_with(run: Run, needles: &[&str]) -> String {
    refused(run.command(), needles)
}

/// Exit 2, one `memrel: error:` line holding every needle, no panic.
fn refused(mut command: Command, needles: &[&str]) -> String {
    let output = command.output().unwrap();
    let err = stderr(&output);
    let args: Vec<_> = command.get_args().collect();
    assert_eq!(output.status.code(), Some(2), "args {args:?}: {err}");
    assert!(
        err.lines().any(|l| l.starts_with("memrel: error: ")),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    for needle in needles {
        assert!(err.contains(needle), "expected {needle:?} in: {err}");
    }
    err
}

#[test]
fn unknown_scenario_lists_the_builtins() {
    run_fails_with(
        run("cpu-trimm"),
        &[
            "unknown scenario \"cpu-trimm\"",
            "cpu-load-only",
            "did you mean \"cpu-trim\"",
        ],
    );
}

#[test]
fn malformed_toml_names_file_line_column_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_scenario(
        dir.path(),
        "bad",
        "description = \"x\"\nstrategies = [\"drop\"]\ncycels = 3\n[models.m]\npreset = \"bert-tiny\"\n[workload]\nsteps = [\"load m\", \"unload m\"]\n",
    );
    let p = path.to_str().unwrap();
    run_fails_with(
        run(p),
        &[&format!("{p}:3:1: unknown field `cycels`"), "`cycles`"],
    );
}

#[test]
fn toml_syntax_error_names_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_scenario(
        dir.path(),
        "syntax",
        "description = \"x\"\nstrategies = [\"drop\"\n",
    );
    let p = path.to_str().unwrap();
    run_fails_with(run(p), &[&format!("{p}:")]);
}

#[test]
fn unknown_strategy_on_the_command_line_suggests_one() {
    run_fails_with(
        run("ci-smoke").strategy("malloc_trim"),
        &["--strategy", "did you mean \"malloc-trim\""],
    );
}

#[test]
fn gpu_strategy_on_a_cpu_scenario_is_refused() {
    run_fails_with(
        run("ci-smoke").strategy("cache-flush"),
        &["for cuda devices", "malloc-trim"],
    );
}

#[test]
#[cfg_attr(feature = "cuda", ignore = "a cuda build has the feature")]
fn cuda_without_the_feature_says_how_to_build() {
    run_fails_with(
        run("ci-smoke").args(["--device", "cuda"]),
        &["`cuda` feature", "build-cuda.sh"],
    );
}

#[test]
fn model_directory_without_config_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_str().unwrap();
    fails_with(&["model", "info", p], &[p, "config.json"]);
}

#[test]
fn unsupported_architecture_is_named_with_the_path() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("config.json"),
        r#"{"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}"#,
    )
    .unwrap();
    let p = dir.path().to_str().unwrap();
    fails_with(
        &["model", "info", p],
        &[
            p,
            "unsupported architecture",
            "gpt2",
            "bert, llama, qwen2, qwen3, mistral, gemma2, gemma3 (gemma3_text), phi3",
        ],
    );
}

#[test]
fn scenario_pointing_at_a_missing_model_directory_fails_before_running() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write_scenario(
        dir.path(),
        "missing",
        "description = \"x\"\nstrategies = [\"drop\"]\n[models.m]\npath = \"no-such-model\"\n[workload]\nsteps = [\"load m\", \"unload m\"]\n",
    );
    let out = dir.path().join("out");
    run_fails_with(
        run(&scenario).out(&out),
        &["no-such-model", "does not exist"],
    );
    assert!(!out.join("missing").exists(), "nothing was run");
}

#[test]
fn hub_model_not_cached_offline_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write_scenario(
        dir.path(),
        "hub",
        "description = \"x\"\nstrategies = [\"drop\"]\n[models.m]\nhub = \"google-bert/bert-base-uncased\"\n[workload]\nsteps = [\"load m\", \"unload m\"]\n",
    );
    let output = run(&scenario)
        .out(dir.path().join("out"))
        .env("HF_HOME", dir.path().join("hf"))
        .output();
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(
        err.contains("not in the local cache") && err.contains("HF_HUB_OFFLINE"),
        "{err}"
    );
}

#[test]
fn bad_numbers_on_the_command_line_name_the_flag() {
    run_fails_with(
        run("ci-smoke").args(["--interval-ms", "0.1"]),
        &["--interval-ms"],
    );
    run_fails_with(run("ci-smoke").cycles(0), &["--cycles"]);
    run_fails_with(run("ci-smoke").args(["--device", "tpu"]), &["--device"]);
}

/// A flag's value is checked by the argument parser, once, before a
/// scenario is read or a program looked for: a bad `--device` is named as
/// the flag on every command, never as a line of a scenario text memrel
/// wrote (exec) or after a scenario that does not exist (run).
#[test]
fn a_bad_flag_value_is_named_before_anything_is_read() {
    let device = "--device \"tpu\" is not valid: use cpu, cuda or cuda:N";
    for args in [
        &["run", "--scenario", "no-such-scenario", "--device", "tpu"][..],
        &["exec", "--device", "tpu", "--", "no-such-program-here"][..],
        &["attach", "--device", "tpu", "1"][..],
        &["calibrate", "--device", "tpu"][..],
        &["drive", "--server", "vllm", "--device", "tpu"][..],
    ] {
        let err = fails_with(args, &[device]);
        assert!(
            !err.contains("no-such"),
            "{args:?}: the flag is refused first: {err}"
        );
    }
    fails_with(
        &["exec", "--interval-ms", "0", "--", "no-such-program-here"],
        &["--interval-ms 0 is out of range: use 1 to 10000"],
    );
    fails_with(
        &["compare", "--scenario", "no-such-scenario", "--repeat", "0"],
        &["--repeat must be at least 1"],
    );
    fails_with(
        &["drive", "--server", "vllm", "--grace=-1"],
        &["--grace -1 must be a number of seconds, 0 or more"],
    );
}

/// `memrel mark --help` lists every phase a mark may begin (from the
/// protocol's list: sleep, asleep and wake included), not a hand list.
#[test]
fn mark_help_lists_every_phase() {
    let output = memrel().args(["mark", "--help"]).output().unwrap();
    let help = text(&output.stdout);
    for phase in [
        "load", "unload", "release", "busy", "sleep", "asleep", "wake",
    ] {
        assert!(help.contains(phase), "{phase}: {help}");
    }
}
