//! The pytest plugin (python/memrel/pytest_plugin.py) driving the memrel
//! binary these tests built: tests/python/test_pytest_plugin.py run with this
//! checkout's plugin (`PYTHONPATH=python`, `PYTEST_PLUGINS`, entry-point
//! plugins off so an installed memrel wheel cannot stand in) and
//! `MEMREL_BIN` set to the binary. Needs a python with pytest, so it is
//! ignored by default: `MEMREL_TEST_PYTEST=<python with pytest> cargo test
//! --release --test it pytest_plugin -- --ignored`. .ci/run runs the same
//! Python tests against the installed wheel instead.

use std::path::Path;
use std::process::Command;

use crate::common::*;

#[test]
#[ignore = "needs a python with pytest: MEMREL_TEST_PYTEST=<python> cargo test --release --test it pytest_plugin -- --ignored (.ci/run runs tests/python against the wheel)"]
fn pytest_plugin_tests_pass_against_this_binary() {
    let python = std::env::var("MEMREL_TEST_PYTEST").unwrap_or_else(|_| {
        panic!(
            "this test needs a python with pytest: MEMREL_TEST_PYTEST=/path/to/venv/bin/python \
             cargo test --release --test it pytest_plugin -- --ignored"
        )
    });
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let has_pytest = Command::new(&python)
        .args(["-c", "import pytest"])
        .status()
        .unwrap_or_else(|e| panic!("cannot run MEMREL_TEST_PYTEST={python}: {e}"));
    assert!(
        has_pytest.success(),
        "MEMREL_TEST_PYTEST={python} cannot import pytest: `{python} -m pip install pytest`"
    );
    let basetemp = tempfile::tempdir().expect("temp dir");
    let output = Command::new(&python)
        .current_dir(root)
        .env("PYTHONPATH", root.join("python"))
        .env("PYTEST_PLUGINS", "memrel.pytest_plugin")
        .env("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
        .env("MEMREL_BIN", env!("CARGO_BIN_EXE_memrel"))
        .args(["-m", "pytest", "-p", "no:cacheprovider", "--basetemp"])
        .arg(basetemp.path())
        .arg("tests/python/test_pytest_plugin.py")
        .output()
        .expect("python starts");
    let out = text(&output.stdout);
    assert!(output.status.success(), "{}", streams(&output));
    assert!(out.contains(" passed"), "{out}");
}
