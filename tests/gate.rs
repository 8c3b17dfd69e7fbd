//! The regression gate end to end: a baseline made with a release step, a
//! new run whose release step is skipped (regressed, exit 1), a repeat of the
//! baseline's own configuration (exit 0), and a missing baseline (exit 2 with
//! the command that creates it).

use std::path::Path;
use std::process::{Command, Output};

fn memrel() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_memrel"));
    command.env(
        "MEMREL_CACHE_DIR",
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("memrel-cache"),
    );
    command
}

fn text(output: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// bert-base load → drop under malloc-trim; `release` decides everything.
fn scenario(dir: &Path, with_release: bool) -> std::path::PathBuf {
    let steps = if with_release {
        r#"["load bert", "unload bert", "release", "settle"]"#
    } else {
        r#"["load bert", "unload bert", "settle"]"#
    };
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("gate-test.toml");
    std::fs::write(
        &path,
        format!(
            "description = \"gate test\"\nstrategies = [\"malloc-trim\"]\ncycles = 3\nrepeat = 2\n\
             [models.bert]\npreset = \"bert-base\"\n[workload]\nsteps = {steps}\nsettle_ms = 100\nbaseline_ms = 50\n"
        ),
    )
    .unwrap();
    path
}

fn latest_results(root: &Path) -> std::path::PathBuf {
    let mut dirs: Vec<_> = std::fs::read_dir(root.join("gate-test"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    dirs.pop().unwrap()
}

#[test]
fn skipped_release_regresses_and_a_repeat_does_not() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("results");
    let good = scenario(&work.path().join("good"), true);
    let made = memrel()
        .args(["run", "--scenario"])
        .arg(&good)
        .args(["--save-baseline", "main", "--out"])
        .arg(&root)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", text(&made));
    assert!(root.join("baselines/main/gate-test/summary.json").is_file());
    assert!(root.join("baselines/main/gate-test/samples.csv").is_file());

    // The same configuration again, through compare (which can save a baseline too): no regression.
    let again = memrel()
        .args(["compare", "--scenario"])
        .arg(&good)
        .args(["--save-baseline", "repeat", "--out"])
        .arg(&root)
        .output()
        .unwrap();
    assert!(again.status.success(), "{}", text(&again));
    assert!(root.join("baselines/repeat/gate-test/runs.json").is_file());
    let same = memrel()
        .args(["check", "--baseline", "main", "--out"])
        .arg(&root)
        .arg(latest_results(&root))
        .output()
        .unwrap();
    assert_eq!(same.status.code(), Some(0), "{}", text(&same));

    // The release step skipped: retained memory regresses.
    let bad = scenario(&work.path().join("bad"), false);
    let worse = memrel()
        .args(["run", "--scenario"])
        .arg(&bad)
        .arg("--out")
        .arg(&root)
        .output()
        .unwrap();
    assert!(worse.status.success(), "{}", text(&worse));
    let dir = latest_results(&root);
    let check = memrel()
        .args(["check", "--baseline", "main", "--out"])
        .arg(&root)
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(1), "{}", text(&check));
    let verdict: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("verdict.json")).unwrap()).unwrap();
    assert_eq!(verdict["regressed"], true);
    let retained = verdict["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["metric"] == "retained_bytes")
        .unwrap();
    assert_eq!(retained["verdict"], "regressed", "{retained}");
    let md = std::fs::read_to_string(dir.join("verdict.md")).unwrap();
    assert!(
        md.contains("| gate-test | malloc-trim | retained_bytes |"),
        "{md}"
    );
    assert!(md.contains("regressed"));
    assert!(
        text(&check).contains("differs from the baseline"),
        "{}",
        text(&check)
    );
}

#[test]
fn missing_baseline_exits_2_with_the_command_to_create_it() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("results");
    let run = memrel()
        .args([
            "run",
            "--scenario",
            "ci-smoke",
            "--strategy",
            "drop",
            "--cycles",
            "1",
            "--out",
        ])
        .arg(&root)
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", text(&run));
    let dir = std::fs::read_dir(root.join("ci-smoke"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::create_dir_all(root.join("baselines/nightly")).unwrap();
    let check = memrel()
        .args(["check", "--baseline", "nightly", "--out"])
        .arg(&root)
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(2), "{}", text(&check));
    let err = String::from_utf8_lossy(&check.stderr);
    assert!(
        err.contains("memrel run --scenario ci-smoke --save-baseline nightly"),
        "{err}"
    );
    // Lenient mode skips it with a warning and passes.
    let lenient = memrel()
        .args(["check", "--baseline", "nightly", "--lenient", "--out"])
        .arg(&root)
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(lenient.status.code(), Some(0), "{}", text(&lenient));
    assert!(String::from_utf8_lossy(&lenient.stderr).contains("skipped"));
}

#[test]
fn a_bad_baseline_name_fails_before_anything_runs() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("results");
    let output = memrel()
        .args([
            "run",
            "--scenario",
            "ci-smoke",
            "--save-baseline",
            "../up",
            "--out",
        ])
        .arg(&root)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains("--save-baseline"), "{err}");
    assert!(err.contains("letters, digits"), "{err}");
    assert!(!root.exists(), "nothing should have run");
}
