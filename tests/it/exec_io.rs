//! `memrel exec` and the program's I/O (issue 36), with real processes: the
//! program reads memrel's stdin, its stdout and stderr are shown as they
//! come (`--quiet` hides them), their tails stay in runs.json; a program
//! that exits before memrel's first reading is told in plain words.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use super::common::*;

/// Runs `memrel exec [args] -- sh -c SCRIPT` with `input` on its stdin (a
/// pipe, closed after it); returns the output and the run's runs.json entry.
fn exec_sh(args: &[&str], script: &str, input: &str) -> (std::process::Output, serde_json::Value) {
    exec_fed(args, &["sh", "-c", script], input)
}

/// Runs `memrel exec [args] -- PROGRAM…` with `input` on its stdin (a pipe,
/// closed after it); returns the output and the run's runs.json entry.
fn exec_fed(
    args: &[&str],
    program: &[&str],
    input: &str,
) -> (std::process::Output, serde_json::Value) {
    let out = tempfile::tempdir().expect("tempdir");
    let mut child = memrel()
        .arg("exec")
        .arg("--out")
        .arg(out.path())
        .args(args)
        .arg("--")
        .args(program)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("memrel starts");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input.as_bytes()).expect("input written");
    drop(stdin);
    let output = child.wait_with_output().expect("memrel ends");
    let dir = only_results_dir(out.path(), "exec");
    let run = runs(&dir).remove(0);
    (output, run)
}

#[test]
fn the_program_reads_memrels_stdin_and_its_output_is_shown_and_kept() {
    let (output, run) = exec_sh(&[], "cat; echo 'to stderr' >&2", "hi through the pipe\n");
    assert!(output.status.success(), "{}", streams(&output));
    let stdout = text(&output.stdout);
    let stderr = stderr(&output);
    assert!(stdout.contains("hi through the pipe\n"), "{stdout}");
    assert!(stderr.contains("to stderr\n"), "{stderr}");
    // The program's stdout is not on memrel's stderr, nor its stderr on stdout.
    assert!(!stderr.contains("hi through the pipe"), "{stderr}");
    assert!(!stdout.contains("to stderr"), "{stdout}");
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["stdout_tail"], "hi through the pipe\n", "{run}");
    assert_eq!(run["stderr_tail"], "to stderr\n", "{run}");
}

#[test]
fn quiet_hides_the_output_and_keeps_the_tails() {
    let (output, run) = exec_sh(
        &["--quiet"],
        "cat; echo 'to stderr' >&2",
        "hi through the pipe\n",
    );
    assert!(output.status.success(), "{}", streams(&output));
    let all = streams(&output);
    assert!(!all.contains("hi through the pipe"), "{all}");
    assert!(!all.contains("to stderr"), "{all}");
    assert_eq!(run["stdout_tail"], "hi through the pipe\n", "{run}");
    assert_eq!(run["stderr_tail"], "to stderr\n", "{run}");
}

/// Live: the program's first line reaches memrel's stdout while the program
/// still runs (it waits for a line on its stdin, which the test sends only
/// once it has seen that first line). No timing window: without live output
/// the first line would never come before the program ends, and the bound
/// below only keeps a broken memrel from hanging the test.
#[test]
fn the_output_is_shown_while_the_program_runs() {
    let out = tempfile::tempdir().expect("tempdir");
    let mut child = memrel()
        .arg("exec")
        .arg("--out")
        .arg(out.path())
        .args([
            "--",
            "sh",
            "-c",
            "echo waiting; read reply; echo \"got $reply\"",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("memrel starts");
    let stdout = child.stdout.take().expect("stdout");
    let (lines, seen) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut stdin = child.stdin.take().expect("stdin");
    let mut before = Vec::new();
    loop {
        let line = seen
            .recv_timeout(Duration::from_secs(300))
            .expect("the program's first line, shown before it ends");
        if line == "waiting" {
            break;
        }
        before.push(line);
    }
    writeln!(stdin, "go").expect("the reply is written");
    drop(stdin);
    let status = wait_with_limit(&mut child, Duration::from_secs(300));
    let rest: Vec<String> = seen.iter().collect();
    let _ = reader.join();
    assert!(status.success(), "{before:?} {rest:?}");
    assert!(rest.iter().any(|l| l == "got go"), "{rest:?}");
}

#[test]
fn a_program_that_exits_before_the_first_reading_is_told_in_plain_words() {
    let out = tempfile::tempdir().expect("tempdir");
    let output = memrel()
        .arg("exec")
        .arg("--out")
        .arg(out.path())
        .args(["--", "/bin/true"])
        .output()
        .expect("memrel starts");
    assert!(output.status.success(), "{}", streams(&output));
    let dir = only_results_dir(out.path(), "exec");
    let readings =
        csv_rows(&dir.join("samples.csv")).len() + csv_rows(&dir.join("events.csv")).len();
    let stderr = stderr(&output);
    let told = stderr
        .contains("run 1 (drop): the program exited before memrel's first reading (it ran ")
        && stderr
            .contains("give it work to measure, or mark phases (docs/guide.md, \"Phase markers\")");
    // /bin/true is almost always gone before the first reading; on a loaded
    // machine it may be read once, and then there is nothing to tell.
    assert_eq!(told, readings == 0, "{readings} readings: {stderr}");
}

/// Issue 47, item 9: a program that is not there is said once, with a
/// shell's exit code (127), and never as a program that "exited before
/// memrel's first reading".
#[test]
fn a_missing_program_is_said_once_with_exit_127() {
    let out = tempfile::tempdir().expect("tempdir");
    for program in ["memrel-no-such-program", "./no/such/program"] {
        let output = memrel()
            .current_dir(out.path())
            .arg("exec")
            .arg("--out")
            .arg(out.path())
            .args(["--", program])
            .output()
            .expect("memrel starts");
        assert_eq!(output.status.code(), Some(127), "{}", streams(&output));
        let stderr = stderr(&output);
        assert_eq!(
            stderr.matches(&format!("cannot run \"{program}\"")).count(),
            1,
            "{stderr}"
        );
        assert!(!stderr.contains("first reading"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// Issue 47, item 9: the note that ptrace was refused is for a live
/// process only; `cat` fed a line ends before the tracer comes, which is
/// no refusal (memrel's tests run where ptrace is allowed, as root).
#[test]
fn a_program_gone_before_the_tracer_came_gets_no_ptrace_note() {
    for _ in 0..3 {
        let (output, run) = exec_fed(&[], &["cat"], "hi\n");
        assert!(output.status.success(), "{}", streams(&output));
        let stderr = stderr(&output);
        assert!(!stderr.contains("ptrace"), "{stderr}");
        assert!(
            !run["exit_reading_note"]
                .as_str()
                .is_some_and(|n| n.contains("refused")),
            "{run}"
        );
    }
}
