//! Helpers shared by the end-to-end tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The memrel binary built for these tests.
pub fn memrel() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_memrel"));
    // One model cache for all tests (generation is atomic, so parallel tests are safe).
    command.env(
        "MEMREL_CACHE_DIR",
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("memrel-cache"),
    );
    command.env("HF_HUB_OFFLINE", "1");
    command
}

pub fn run_ok(command: &mut Command) -> Output {
    let output = command.output().expect("memrel starts");
    assert!(
        output.status.success(),
        "memrel failed: {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// `memrel run --scenario SCENARIO --strategy S… --out <new temp dir>` with
/// `command` (memrel(), maybe with extra environment); it must succeed.
/// Returns the temp dir (keep it alive), the run's results directory and the output.
pub fn run_scenario(
    mut command: Command,
    scenario: &str,
    strategies: &[&str],
) -> (tempfile::TempDir, PathBuf, Output) {
    let out = tempfile::tempdir().expect("tempdir");
    command.args(["run", "--scenario", scenario, "--out"]);
    command.arg(out.path());
    for strategy in strategies {
        command.args(["--strategy", strategy]);
    }
    let output = run_ok(&mut command);
    let dir = results_dir(out.path(), scenario);
    (out, dir, output)
}

/// A results directory's runs.json.
pub fn runs_json(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("runs.json")).expect("runs.json");
    serde_json::from_str(&text).expect("runs.json is JSON")
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The only results directory under `out/<scenario>/`.
pub fn results_dir(out: &Path, scenario: &str) -> PathBuf {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(out.join(scenario))
        .expect("scenario results directory exists")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(dirs.len(), 1, "expected one results directory: {dirs:?}");
    dirs.remove(0)
}

pub fn summary(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("summary.json")).expect("summary.json");
    serde_json::from_str(&text).expect("summary.json is JSON")
}

/// Reads a CSV into header-keyed rows.
pub fn csv_rows(path: &Path) -> Vec<std::collections::HashMap<String, String>> {
    let mut reader = csv::Reader::from_path(path).expect("csv opens");
    let headers = reader.headers().expect("header").clone();
    reader
        .records()
        .map(|r| {
            let r = r.expect("row");
            headers
                .iter()
                .zip(r.iter())
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

/// A scenario file in `dir` with the given model table and steps.
pub fn write_scenario(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).expect("scenario written");
    path
}

pub const MIB: f64 = 1024.0 * 1024.0;
