//! `memrel advise` on results the fake worker recorded: a scenario that
//! leaks under `drop` against one that gives back under `malloc-trim`, a
//! single run (too few to advise) and bad input.

use std::path::{Path, PathBuf};

use super::common::*;

/// Runs a fake scenario (64 MiB anon per load, `leak_mib` leaked per cycle)
/// under `strategy`, `repeat` times; returns its results directory.
fn recorded(root: &Path, name: &str, strategy: &str, leak_mib: u32, repeat: u32) -> PathBuf {
    recorded_with_console(root, name, strategy, leak_mib, repeat).0
}

/// [`recorded`], with what `memrel run` printed.
fn recorded_with_console(
    root: &Path,
    name: &str,
    strategy: &str,
    leak_mib: u32,
    repeat: u32,
) -> (PathBuf, String) {
    let scenario = write_scenario(
        root,
        name,
        &format!(
            "description = \"fake\"\ncycles = 2\nstrategies = [\"{strategy}\"]\ninterval_ms = 5\n\
             [models.a]\nfake_anon_mib = 64\nfake_leak_mib = {leak_mib}\n\
             [workload]\nsteps = [\"load a\", \"forward a\", \"unload a\", \"release\", \"settle\"]\n\
             settle_ms = 50\nbaseline_ms = 50\n"
        ),
    );
    let out = root.join("out");
    let output = run(&scenario).repeat(repeat).out(&out).ok();
    (only_results_dir(&out, name), text(&output.stdout))
}

/// The lines from the first `advice: …` on, where `console` has one.
fn advice_and_after(console: &str) -> Vec<&str> {
    console
        .lines()
        .skip_while(|l| !l.starts_with("advice: "))
        .collect()
}

fn advise(dirs: &[&Path]) -> std::process::Output {
    memrel()
        .arg("advise")
        .args(dirs)
        .output()
        .expect("memrel starts")
}

#[test]
fn advice_names_the_strategy_that_gives_back_in_every_run() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let leaks = recorded(tmp.path(), "leaks", "drop", 16, 3);
    let clean = recorded(tmp.path(), "clean", "malloc-trim", 0, 3);

    let both = advise(&[&leaks, &clean]);
    assert!(both.status.success(), "{}", streams(&both));
    let console = text(&both.stdout);
    assert!(
        console.starts_with("host: use malloc-trim (gives back in 3 of 3 runs; release "),
        "{console}"
    );
    assert!(
        console.contains("ctypes.CDLL(\"libc.so.6\").malloc_trim(0) (or memrel.release())"),
        "{console}"
    );
    // One retaining resource, one line: drop, which retains, is not advised.
    assert_eq!(console.lines().count(), 1, "{console}");

    let only_leaks = advise(&[&leaks]);
    assert!(only_leaks.status.success(), "{}", streams(&only_leaks));
    let text_leaks = text(&only_leaks.stdout);
    assert!(
        text_leaks.starts_with(
            "host: no strategy gives back in every run; the best, drop, retains in 3 of 3 runs"
        ),
        "{text_leaks}"
    );
    assert!(
        text_leaks.contains("del model; gc.collect()"),
        "{text_leaks}"
    );

    let only_clean = advise(&[&clean]);
    assert!(only_clean.status.success(), "{}", streams(&only_clean));
    assert_eq!(
        text(&only_clean.stdout),
        "nothing to advise: every strategy gives back\n"
    );
}

#[test]
fn one_run_is_too_few_to_advise() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let once = recorded(tmp.path(), "once", "drop", 16, 1);
    let output = advise(&[&once]);
    assert!(output.status.success(), "{}", streams(&output));
    let console = text(&output.stdout);
    assert!(
        console.starts_with("too few runs to advise: drop has 1 completed run"),
        "{console}"
    );
}

#[test]
fn bad_input_exits_2_naming_the_path() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let missing = tmp.path().join("no-such-results");
    let output = advise(&[&missing]);
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    let err = stderr(&output);
    assert!(
        err.contains(&format!(
            "memrel: error: results directory {} does not exist",
            missing.display()
        )),
        "{err}"
    );

    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).expect("mkdir");
    let output = advise(&[&empty]);
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    assert!(
        stderr(&output).contains(&empty.display().to_string()),
        "{}",
        stderr(&output)
    );

    let none = memrel().arg("advise").output().expect("memrel starts");
    assert_eq!(none.status.code(), Some(2), "{}", streams(&none));
}

#[test]
fn run_and_compare_end_with_the_advice() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (leaks, console) = recorded_with_console(tmp.path(), "leaks", "drop", 16, 3);
    // The advice, then where the results went.
    let tail = advice_and_after(&console);
    assert!(
        tail.first().is_some_and(|l| l.starts_with(
            "advice: host: no strategy gives back in every run; the best, drop, retains in 3 of 3"
        )),
        "{console}"
    );
    assert_eq!(tail.len(), 3, "{console}");
    assert!(tail[2].starts_with("results: "), "{console}");
    // compare of saved directories ends with the advice of them all.
    let clean = recorded(tmp.path(), "clean", "malloc-trim", 0, 3);
    let compared = memrel()
        .arg("compare")
        .args([&leaks, &clean])
        .arg("--out")
        .arg(tmp.path().join("cmp"))
        .output()
        .expect("memrel starts");
    assert!(compared.status.success(), "{}", streams(&compared));
    let console = text(&compared.stdout);
    let tail = advice_and_after(&console);
    assert!(
        tail.first()
            .is_some_and(|l| l.starts_with("advice: host: use malloc-trim (gives back in 3 of 3")),
        "{console}"
    );
    // One run: too few to advise, said as the last line before the results.
    let (_, one) = recorded_with_console(tmp.path(), "one", "drop", 16, 1);
    assert!(
        advice_and_after(&one).first().is_some_and(
            |l| l.starts_with("advice: too few runs to advise: drop has 1 completed run")
        ),
        "{one}"
    );
}
