//! JAX strategies (issue 38): the `jax-cpu` scenario under each JAX
//! strategy: every run completed, the XLA variables reached the process (the
//! `xla env` check names them and the client's backend), and `jax-clear`
//! deleted the live arrays; `xla-mem-fraction=FRACTION` starts the program
//! with the fraction chosen (checked with and without jax), and a bad
//! fraction stops memrel with the reason and the fix.
//!
//! The `jax_` tests marked ignored need a python with jax: `MEMREL_TEST_PYTHON=<python> cargo test
//! --release --test it jax_ -- --ignored` (.ci/run installs it into its torch
//! venv and runs these).

use crate::common::*;

fn jax_python() -> String {
    std::env::var("MEMREL_TEST_PYTHON").unwrap_or_else(|_| {
        panic!(
            "this test needs a python3 with jax: \
             MEMREL_TEST_PYTHON=/path/to/venv/bin/python cargo test --release --test it jax_ -- --ignored"
        )
    })
}

#[test]
#[ignore = "needs jax: MEMREL_TEST_PYTHON=<python> cargo test --release --test it jax_ -- --ignored (CI runs it)"]
fn jax_cpu_runs_every_jax_strategy_and_checks_its_effect() {
    let python = jax_python();
    let (_out, dir, output) = run("jax-cpu")
        .cycles(1)
        .strategy("xla-no-prealloc")
        .strategy("xla-platform-allocator")
        .strategy("xla-mem-fraction")
        .strategy("jax-clear")
        .args(["--python", &python])
        .in_temp_dir("jax-cpu");
    let runs = runs(&dir);
    assert_eq!(runs.len(), 4, "{}", streams(&output));
    let env = [
        (
            "xla-no-prealloc",
            Some("XLA_PYTHON_CLIENT_PREALLOCATE=false"),
        ),
        (
            "xla-platform-allocator",
            Some("XLA_PYTHON_CLIENT_ALLOCATOR=platform"),
        ),
        (
            "xla-mem-fraction",
            Some("XLA_PYTHON_CLIENT_MEM_FRACTION=0.25"),
        ),
        ("jax-clear", None),
    ];
    for (run, (strategy, variable)) in runs.iter().zip(env) {
        assert_eq!(run["strategy"], strategy);
        assert_eq!(run["status"], "completed", "{run}");
        let checks = run["checks"].as_array().expect("checks");
        let xla = checks.iter().find(|c| c["name"] == "xla env");
        match variable {
            Some(variable) => {
                let xla =
                    xla.unwrap_or_else(|| panic!("{strategy}: no xla env check in {checks:?}"));
                assert_eq!(xla["ok"], true, "{strategy}: {xla}");
                let detail = xla["detail"].as_str().unwrap();
                assert!(
                    detail.contains(&format!("started with {variable}")),
                    "{strategy}: {detail}"
                );
                assert!(detail.contains("backend cpu"), "{strategy}: {detail}");
            }
            None => {
                let clear = checks
                    .iter()
                    .find(|c| c["name"] == "release jax_clear")
                    .unwrap_or_else(|| panic!("no release jax_clear check in {checks:?}"));
                assert_eq!(clear["ok"], true, "{clear}");
                assert!(
                    clear["detail"].as_str().unwrap().contains("live array(s)"),
                    "{clear}"
                );
            }
        }
    }
}

#[test]
fn jax_strategies_set_their_variable_and_name_it_in_their_setting() {
    for (name, variable) in [
        ("xla-no-prealloc", "XLA_PYTHON_CLIENT_PREALLOCATE=false"),
        (
            "xla-platform-allocator",
            "XLA_PYTHON_CLIENT_ALLOCATOR=platform",
        ),
        ("xla-mem-fraction", "XLA_PYTHON_CLIENT_MEM_FRACTION=0.25"),
        (
            "xla-mem-fraction=0.40",
            "XLA_PYTHON_CLIENT_MEM_FRACTION=0.40",
        ),
        ("xla-mem-fraction=1", "XLA_PYTHON_CLIENT_MEM_FRACTION=1"),
    ] {
        let s = memrel::strategy::lookup(name).unwrap();
        assert_eq!(s.name, name);
        assert!(!s.for_candle(), "{name}");
        let (key, value) = variable.split_once('=').unwrap();
        assert_eq!(s.env, &[(key, value)], "{name}");
        let actions = s.for_programs().unwrap();
        assert_eq!(
            actions.start,
            vec![format!("xla_env={key}:{value}")],
            "{name}"
        );
        assert!(s.setting().contains(variable), "{name}: {}", s.setting());
    }
    let clear = memrel::strategy::lookup("jax-clear").unwrap();
    assert_eq!(
        clear.for_programs().unwrap().release,
        vec!["gc", "jax_clear"]
    );
    assert!(
        clear.setting().contains("jax.clear_caches()"),
        "{}",
        clear.setting()
    );
}

/// The checks of the only run in `dir`, by name (panics naming what is there).
fn check<'a>(checks: &'a [serde_json::Value], name: &str) -> &'a serde_json::Value {
    checks
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name:?} check in {checks:?}"))
}

#[test]
#[ignore = "needs jax: MEMREL_TEST_PYTHON=<python> cargo test --release --test it jax_ -- --ignored (CI runs it)"]
fn jax_cpu_runs_the_fraction_chosen_in_the_strategy_name() {
    let python = jax_python();
    let (_out, dir, output) = run("jax-cpu")
        .cycles(1)
        .strategy("xla-mem-fraction=0.4")
        .args(["--python", &python])
        .in_temp_dir("jax-cpu");
    let runs = runs(&dir);
    assert_eq!(runs.len(), 1, "{}", streams(&output));
    let run = &runs[0];
    assert_eq!(run["strategy"], "xla-mem-fraction=0.4");
    assert_eq!(run["status"], "completed", "{run}");
    let checks = run["checks"].as_array().expect("checks");
    let env = check(checks, "env XLA_PYTHON_CLIENT_MEM_FRACTION");
    assert_eq!(env["ok"], true, "{env}");
    let start = check(checks, "start xla_env=XLA_PYTHON_CLIENT_MEM_FRACTION:0.4");
    assert_eq!(start["ok"], true, "{start}");
    let xla = check(checks, "xla env");
    assert_eq!(xla["ok"], true, "{xla}");
    let detail = xla["detail"].as_str().expect("detail");
    assert!(
        detail.contains("started with XLA_PYTHON_CLIENT_MEM_FRACTION=0.4;"),
        "{detail}"
    );
    assert!(detail.contains("backend cpu"), "{detail}");
}

/// Marks one load and its release, nothing more (no jax: the environment
/// and the `memrel` module's start step are what is checked).
const MARKED: &str = r#"
import os, memrel
print("fraction", os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION"))
with memrel.phase("load", model="m"):
    blob = bytearray(8 << 20)
with memrel.phase("unload", model="m"):
    del blob
memrel.release()
"#;

#[test]
fn exec_starts_the_program_with_the_fraction_in_the_strategy_name_and_reads_it_back() {
    let out = tempfile::tempdir().expect("tempdir");
    let output = memrel()
        .arg("exec")
        .arg("--out")
        .arg(out.path())
        .args([
            "--strategy",
            "xla-mem-fraction=0.4",
            "--",
            "python3",
            "-c",
            MARKED,
        ])
        .output()
        .expect("memrel starts");
    let dir = only_results_dir(out.path(), "exec");
    let runs = runs(&dir);
    assert_eq!(runs.len(), 1, "{}", streams(&output));
    let run = &runs[0];
    assert_eq!(run["strategy"], "xla-mem-fraction=0.4", "{run}");
    assert!(
        run["stdout_tail"]
            .as_str()
            .expect("stdout")
            .contains("fraction 0.4"),
        "{run}"
    );
    let checks = run["checks"].as_array().expect("checks");
    // memrel read the process's environment; the module saw it at start.
    let env = check(checks, "env XLA_PYTHON_CLIENT_MEM_FRACTION");
    assert_eq!(env["ok"], true, "{env}");
    assert!(
        env["detail"]
            .as_str()
            .expect("detail")
            .contains("XLA_PYTHON_CLIENT_MEM_FRACTION=0.4"),
        "{env}"
    );
    let start = check(checks, "start xla_env=XLA_PYTHON_CLIENT_MEM_FRACTION:0.4");
    assert_eq!(start["ok"], true, "{start}");
    assert!(
        start["detail"]
            .as_str()
            .expect("detail")
            .contains("started with XLA_PYTHON_CLIENT_MEM_FRACTION=0.4;"),
        "{start}"
    );
    // The name as saved reads back: report re-renders it, compare and
    // advise name it.
    let compare = memrel()
        .arg("compare")
        .arg("--out")
        .arg(out.path())
        .arg(&dir)
        .output()
        .expect("memrel starts");
    assert!(compare.status.success(), "{}", streams(&compare));
    assert!(
        text(&compare.stdout).contains("xla-mem-fraction=0.4"),
        "{}",
        streams(&compare)
    );
    let report = memrel()
        .arg("report")
        .arg(&dir)
        .output()
        .expect("memrel starts");
    assert!(report.status.success(), "{}", streams(&report));
    assert!(
        text(&report.stdout).contains("xla-mem-fraction=0.4"),
        "{}",
        streams(&report)
    );
    let advise = memrel()
        .arg("advise")
        .arg(&dir)
        .output()
        .expect("memrel starts");
    assert!(advise.status.success(), "{}", streams(&advise));
    assert!(
        text(&advise.stdout).contains("xla-mem-fraction=0.4"),
        "{}",
        streams(&advise)
    );
}

/// `memrel ARGS` (in a temp dir, where its results would go) must stop with
/// exit 2 before running anything, its error containing each of `wanted`.
fn refused(args: &[&str], wanted: &[&str]) {
    let out = tempfile::tempdir().expect("tempdir");
    let output = memrel()
        .args(args)
        .current_dir(out.path())
        .output()
        .expect("memrel starts");
    let err = stderr(&output);
    assert_eq!(
        output.status.code(),
        Some(2),
        "{args:?}: {}",
        streams(&output)
    );
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    for want in wanted {
        assert!(err.contains(want), "{args:?}: {want:?} not in {err}");
    }
}

#[test]
fn a_bad_fraction_or_a_value_on_a_strategy_without_one_says_why_and_the_fix() {
    let fix = "write FRACTION as xla-mem-fraction=0.40 (xla-mem-fraction alone means 0.25)";
    refused(
        &["exec", "--strategy", "xla-mem-fraction=2", "--", "true"],
        &[
            "--strategy",
            "\"xla-mem-fraction=2\": 2 is more than 1",
            fix,
        ],
    );
    refused(
        &[
            "run",
            "--scenario",
            "jax-cpu",
            "--strategy",
            "xla-mem-fraction=0",
        ],
        &["--strategy", "0 is not above 0", fix],
    );
    refused(
        &["exec", "--strategy", "xla-mem-fraction=half", "--", "true"],
        &["--strategy", "\"half\" is not a number", fix],
    );
    refused(
        &["exec", "--strategy", "drop=1", "--", "true"],
        &[
            "--strategy",
            "strategy \"drop\" takes no value (\"=1\"): name it alone",
        ],
    );
}

#[test]
fn a_scenario_file_with_a_bad_fraction_is_refused_naming_the_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = tmp.path().join("fractions.toml");
    std::fs::write(
        &path,
        "description = \"two fractions\"\ndevice = \"cpu\"\n\
         strategies = [\"xla-mem-fraction=0.40\", \"xla-mem-fraction=1.5\"]\n\
         command = [\"python3\", \"-c\", \"pass\"]\n",
    )
    .expect("write");
    refused(
        &["run", "--scenario", path.to_str().expect("utf-8")],
        &[
            "fractions.toml",
            "1.5 is more than 1",
            "xla-mem-fraction=0.40",
        ],
    );
}

#[test]
fn list_says_which_strategy_takes_a_value_and_how_to_write_it() {
    let long = text(&run_ok(memrel().args(["list", "--long"])).stdout);
    // Wrapped at 76 columns: the words, in order.
    let long = long.split_whitespace().collect::<Vec<_>>().join(" ");
    let takes = "takes: xla-mem-fraction=FRACTION (the fraction of the GPU's memory XLA";
    assert!(long.contains(takes), "{long}");
    assert!(
        long.contains("e.g. --strategy xla-mem-fraction=0.40"),
        "{long}"
    );
    assert!(
        long.contains("environment: XLA_PYTHON_CLIENT_MEM_FRACTION=0.25"),
        "{long}"
    );
    assert!(!long.contains("{value}"), "{long}");
}
