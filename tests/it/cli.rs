//! The command line as a shell uses it: output into a pipe its reader closes
//! early (`memrel list | head -1`), paths that are not UTF-8, and one form
//! of `--strategy` (repeated or comma-separated) on every command.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::common::*;

/// A fake scenario of two cycles (8 MiB anon + 1 MiB file): a run in well
/// under a second.
fn fake_scenario(dir: &Path) -> PathBuf {
    write_scenario(
        dir,
        "fake",
        "description = \"fake\"\ncycles = 2\nstrategies = [\"drop\"]\ninterval_ms = 5\n\
         [models.a]\nfake_anon_mib = 8\nfake_file_mib = 1\n\
         [workload]\nsteps = [\"load a\", \"forward a\", \"unload a\", \"release\", \"settle\"]\n\
         settle_ms = 20\nbaseline_ms = 20\n",
    )
}

/// Runs `command` with its stdout a pipe whose read end is closed at once;
/// it must exit 0 with nothing on stderr.
fn assert_quiet_into_closed_pipe(mut command: Command, what: &str) {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("memrel starts");
    drop(child.stdout.take());
    let stderr = stderr_of(&mut child);
    let status = child.wait().expect("memrel ends");
    assert!(status.success(), "{what}: {status}\n{stderr}");
    assert_eq!(stderr, "", "{what}");
}

fn memrel_args<I, S>(args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut command = memrel();
    command.args(args);
    command
}

#[test]
fn every_command_into_a_closed_pipe_exits_0_quietly() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let scenario = fake_scenario(tmp.path());
    let out = tmp.path().join("out");
    let trace = tmp.path().join("trace.json");
    // The run, into a closed pipe: its work is done all the same.
    let run = super::common::run(&scenario)
        .out(&out)
        .arg("--export-trace")
        .arg(&trace)
        .args(["--repeat", "3", "--save-baseline", "piped"]);
    assert_quiet_into_closed_pipe(run.command(), "run");
    assert!(trace.is_file(), "the trace is written");
    assert!(
        out.join("baselines/piped/fake").is_dir(),
        "the baseline is saved"
    );
    let dir = results_dirs(&out, "fake").remove(0);

    assert_quiet_into_closed_pipe(memrel_args(["list"]), "list");
    assert_quiet_into_closed_pipe(memrel_args(["list", "--long"]), "list --long");
    let model = tmp.path().join("model");
    let mut gen = memrel_args(["model", "gen", "bert-tiny"]);
    gen.arg(&model);
    assert_quiet_into_closed_pipe(gen, "model gen");
    let mut info = memrel_args(["model", "info"]);
    info.arg(&model);
    assert_quiet_into_closed_pipe(info, "model info");
    let mut report = memrel_args(["report"]);
    report.arg(&dir);
    assert_quiet_into_closed_pipe(report, "report");
    let mut compare = memrel_args(["compare"]);
    compare.arg(&dir).arg(&dir).arg("--out").arg(&out);
    assert_quiet_into_closed_pipe(compare, "compare");
    let mut check = memrel_args(["check", "--baseline", "piped", "--out"]);
    check.arg(&out).arg(&dir);
    assert_quiet_into_closed_pipe(check, "check");
}

#[test]
fn paths_that_are_not_utf8_work() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let scenario = fake_scenario(tmp.path());
    let base = tmp.path().join(OsStr::from_bytes(b"d\xff"));
    std::fs::create_dir(&base).expect("a directory named with byte 0xff");
    let out = base.join("out");

    let output = super::common::run(&scenario)
        .out(&out)
        .arg("--export-trace")
        .arg(base.join("trace.json"))
        .args(["--repeat", "3", "--save-baseline", "main"])
        .ok();
    assert!(
        text(&output.stdout).contains("results: "),
        "{}",
        streams(&output)
    );
    assert!(base.join("trace.json").is_file());
    let dir = only_results_dir(&out, "fake");
    // The recorded command line holds the path, its odd byte as U+FFFD.
    let command = runs_json(&dir)["header"]["command"].to_string();
    assert!(command.contains("d\u{fffd}"), "{command}");

    run_ok(
        memrel_args(["report"])
            .arg(&dir)
            .arg("--export-trace")
            .arg(base.join("again.json")),
    );
    assert!(base.join("again.json").is_file());
    run_ok(memrel_args(["compare"]).arg(&dir).arg("--out").arg(&out));
    assert_eq!(results_dirs(&out, "compare").len(), 1);
    run_ok(
        memrel_args(["exec", "--out"])
            .arg(&out)
            .args(["--", "true"]),
    );
    assert_eq!(results_dirs(&out, "exec").len(), 1);
    // check with no directories runs the baseline's scenario again.
    run_ok(memrel_args(["check", "--baseline", "main", "--out"]).arg(&out));
    assert_eq!(results_dirs(&out, "fake").len(), 2);
}

/// The strategies of a results directory's runs, in order.
fn strategies_run(dir: &Path) -> Vec<String> {
    runs(dir)
        .iter()
        .map(|r| r["strategy"].as_str().expect("strategy").to_string())
        .collect()
}

#[test]
fn strategy_is_repeatable_and_comma_separated_on_every_command() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let scenario = fake_scenario(tmp.path());
    let want = ["drop", "malloc-trim", "mallopt"];
    let forms: [(&str, &[&str]); 4] = [
        (
            "run",
            &["--strategy", "drop,malloc-trim", "--strategy", "mallopt"],
        ),
        (
            "compare",
            &["--strategy", "drop", "--strategy", "malloc-trim,mallopt"],
        ),
        // The old spelling of compare.
        ("compare", &["--strategies", "drop,malloc-trim,mallopt"]),
        (
            "exec",
            &["--strategy", "drop,malloc-trim", "--strategy", "mallopt"],
        ),
    ];
    for (i, (command, strategies)) in forms.into_iter().enumerate() {
        let out = tmp.path().join(format!("out{i}"));
        if command == "exec" {
            // Runs whose program never calls memrel.release() do not
            // complete: only the runs' strategies count here.
            let mut exec = memrel_args([command]);
            exec.args(strategies).arg("--out").arg(&out);
            exec.args(["--", "true"]);
            exec.output().expect("memrel starts");
        } else {
            Run::with(memrel(), command, &scenario)
                .args(strategies)
                .out(&out)
                .ok();
        }
        let name = if command == "exec" { "exec" } else { "fake" };
        let dir = only_results_dir(&out, name);
        assert_eq!(strategies_run(&dir), want, "{command} {strategies:?}");
    }
}

/// `exec --help` points to the guide's section on phase markers, which exists.
#[test]
fn exec_help_points_to_the_phase_markers_section_of_the_guide() {
    let help = text(&run_ok(&mut memrel_args(["exec", "--help"])).stdout);
    // clap wraps the text to the terminal's width: read it as one line.
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        help.contains("(docs/guide.md, \"Phase markers\")"),
        "{help}"
    );
    assert!(!help.contains("README: \"Phase markers\""), "{help}");
    assert!(help.contains("--quiet"), "{help}");
    let guide =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/guide.md"))
            .expect("the guide");
    assert!(
        guide.lines().any(|l| l == "### Phase markers"),
        "no such section"
    );
}
