//! JAX strategies (issue 38): the `jax-cpu` scenario under each JAX
//! strategy: every run completed, the XLA variables reached the process (the
//! `xla env` check names them and the client's backend), and `jax-clear`
//! deleted the live arrays.
//!
//! Needs a python with jax: `MEMREL_TEST_PYTHON=<python> cargo test
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
    ] {
        let s = memrel::strategy::lookup(name).unwrap();
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
