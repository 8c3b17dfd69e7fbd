//! `memrel check --baseline NAME` with no directories on a program baseline
//! (`memrel exec`): it re-runs the program as the baseline recorded it (the
//! interpreter `--python` named, the working directory), from wherever the
//! check is started; a program that fails there has its stderr in the
//! verdict; a record made before memrel kept these re-runs as before.

use std::path::{Path, PathBuf};
use std::process::Output;

use super::common::*;

/// Logs its working directory, fails with a message on stderr while
/// `fail.flag` is in it, else allocates, releases and marks its phases.
const JOB: &str = r#"
import os, sys, memrel
with open("cwd.log", "a") as log:
    log.write(os.getcwd() + "\n")
if os.path.exists("fail.flag"):
    sys.stderr.write("job: fail.flag is here, giving up\n")
    sys.exit(1)
memrel.baseline(0.05)
with memrel.phase("load", model="blob"):
    blob = bytearray(16 << 20)
    for i in range(0, len(blob), 4096):
        blob[i] = 1
with memrel.phase("unload", model="blob"):
    del blob
memrel.release()
memrel.settle(0.05)
"#;

/// A temp dir with `project/job.py`, `bin/py` (a shell-script interpreter
/// that logs each start to `interpreter.log` in its working directory and
/// runs python3), `elsewhere/` and the results root `results/`.
struct Setup {
    _tmp: tempfile::TempDir,
    project: PathBuf,
    python: PathBuf,
    elsewhere: PathBuf,
    results: PathBuf,
}

fn setup() -> Setup {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().canonicalize().expect("canonical temp dir");
    let project = root.join("project");
    let bin = root.join("bin");
    let elsewhere = root.join("elsewhere");
    for dir in [&project, &bin, &elsewhere] {
        std::fs::create_dir_all(dir).expect("mkdir");
    }
    std::fs::write(project.join("job.py"), JOB).expect("write job.py");
    let python = bin.join("py");
    std::fs::write(
        &python,
        "#!/bin/sh\necho \"$0\" >> interpreter.log\nexec python3 \"$@\"\n",
    )
    .expect("write the interpreter");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755))
        .expect("chmod the interpreter");
    Setup {
        project,
        python,
        elsewhere,
        results: root.join("results"),
        _tmp: tmp,
    }
}

/// `memrel exec --python PY --save-baseline prog -- python3 <script>` from
/// the project directory; must succeed.
fn make_baseline(s: &Setup, python: Option<&Path>, script: &str) {
    let mut command = memrel();
    command
        .current_dir(&s.project)
        .args(["exec", "--repeat", "3", "--save-baseline", "prog", "--out"])
        .arg(&s.results);
    if let Some(python) = python {
        command.arg("--python").arg(python);
    }
    command.args(["--", "python3", script]);
    run_ok(&mut command);
}

/// `memrel check --baseline prog --out RESULTS` (no directories) from `cwd`.
fn check(s: &Setup, cwd: &Path) -> Output {
    memrel()
        .current_dir(cwd)
        .args(["check", "--baseline", "prog", "--out"])
        .arg(&s.results)
        .output()
        .expect("memrel starts")
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(str::to_string)
        .collect()
}

/// The check's results directory: the newest under results/exec (the
/// first is the baseline's own run).
fn check_dir(s: &Setup) -> PathBuf {
    let dirs = results_dirs(&s.results, "exec");
    assert_eq!(
        dirs.len(),
        2,
        "the baseline's run and the check's: {dirs:?}"
    );
    dirs.into_iter().max().expect("a results directory")
}

fn baseline_runs_json(s: &Setup) -> PathBuf {
    s.results.join("baselines/prog/exec/runs.json")
}

#[test]
fn a_program_baseline_records_what_it_ran_with_and_check_re_runs_it_so() {
    let s = setup();
    make_baseline(&s, Some(&s.python), "job.py");
    let header = &read_json(&baseline_runs_json(&s))["header"];
    let program = &header["program"];
    let py = s.python.display().to_string();
    assert_eq!(program["python"], py.as_str(), "{header}");
    assert_eq!(program["argv"], serde_json::json!([py, "job.py"]));
    assert_eq!(program["cwd"], s.project.display().to_string().as_str());
    assert_eq!(program["tree"], false);
    let env = &program["env"]["drop"];
    assert_eq!(env["MEMREL_CYCLES"], "1", "{program}");
    assert_eq!(env["MEMREL_EVENT_FD"], "3", "{program}");
    assert!(
        env["MEMREL_STRATEGY"]
            .as_str()
            .is_some_and(|v| v.contains("drop")),
        "{env}"
    );
    assert!(env["PYTHONPATH"].as_str().is_some(), "{env}");
    assert_eq!(lines(&s.project.join("interpreter.log")).len(), 3);

    let output = check(&s, &s.elsewhere);
    assert_eq!(output.status.code(), Some(0), "{}", streams(&output));
    // Three more runs, started by the recorded interpreter in the project.
    assert_eq!(lines(&s.project.join("interpreter.log")), [py.as_str(); 6]);
    let cwd = s.project.display().to_string();
    assert_eq!(lines(&s.project.join("cwd.log")), [cwd.as_str(); 6]);
    assert!(
        !s.elsewhere.join("cwd.log").exists(),
        "ran in the check's cwd"
    );
    let said = format!(
        "as the baseline recorded it: {py} job.py (in {})",
        s.project.display()
    );
    assert!(stderr(&output).contains(&said), "{}", stderr(&output));
    assert!(
        !stderr(&output).contains("the program's"),
        "nothing differs, no warning: {}",
        stderr(&output)
    );
}

#[test]
fn a_program_that_fails_in_the_re_run_has_its_stderr_in_the_verdict() {
    let s = setup();
    make_baseline(&s, Some(&s.python), "job.py");
    std::fs::write(s.project.join("fail.flag"), "").expect("write the flag");
    let output = check(&s, &s.elsewhere);
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    let said = "job: fail.flag is here, giving up";
    assert!(stderr(&output).contains(said), "{}", streams(&output));
    let dir = check_dir(&s);
    let md = std::fs::read_to_string(dir.join("verdict.md")).expect("verdict.md");
    assert!(md.contains("its stderr ended:"), "{md}");
    assert!(md.contains(said), "{md}");
    let verdict = read_json(&dir.join("verdict.json"));
    assert_eq!(verdict["schema_version"], 7);
    let broken = verdict["broken_runs"].as_array().expect("broken_runs");
    assert_eq!(broken.len(), 3, "{verdict}");
    for b in broken {
        assert_eq!(b["side"], "new");
        assert_eq!(b["stderr_tail"], said, "{b}");
    }
}

#[test]
fn a_recorded_directory_that_is_gone_is_a_clear_error() {
    let s = setup();
    make_baseline(&s, Some(&s.python), "job.py");
    let moved = s.project.with_file_name("moved");
    std::fs::rename(&s.project, &moved).expect("move the project");
    let output = check(&s, &s.elsewhere);
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    let err = stderr(&output);
    assert!(
        err.contains(&format!(
            "the program ran in {}, which does not exist here",
            s.project.display()
        )) && err.contains("re-save the baseline"),
        "{err}"
    );
    assert_eq!(
        results_dirs(&s.results, "exec").len(),
        1,
        "nothing ran but the baseline's"
    );
}

#[test]
fn a_variable_memrel_sets_differently_now_is_a_warning() {
    let s = setup();
    make_baseline(&s, Some(&s.python), "job.py");
    edit_runs_json(&s.results.join("baselines/prog/exec"), |runs| {
        runs["header"]["program"]["env"]["drop"]["MEMREL_CYCLES"] = "9".into();
    });
    let output = check(&s, &s.elsewhere);
    assert_eq!(output.status.code(), Some(0), "{}", streams(&output));
    let err = stderr(&output);
    assert!(
        err.contains("the program's MEMREL_CYCLES (drop) differs from the baseline's: 9 (baseline) → 1 (new)"),
        "{err}"
    );
    let dir = check_dir(&s);
    let md = std::fs::read_to_string(dir.join("verdict.md")).expect("verdict.md");
    assert!(md.contains("MEMREL_CYCLES (drop) differs"), "{md}");
}

#[test]
fn an_older_record_without_the_program_block_re_runs_as_before() {
    let s = setup();
    let job = s.project.join("job.py").display().to_string();
    make_baseline(&s, None, &job);
    edit_runs_json(&s.results.join("baselines/prog/exec"), |runs| {
        let header = runs["header"].as_object_mut().expect("a header");
        assert!(header.remove("program").is_some(), "{header:?}");
    });
    let output = check(&s, &s.elsewhere);
    assert_eq!(output.status.code(), Some(0), "{}", streams(&output));
    // As before: plain python3, in the check's working directory.
    assert_eq!(lines(&s.elsewhere.join("cwd.log")).len(), 3);
    assert!(!s.elsewhere.join("interpreter.log").exists());
}
