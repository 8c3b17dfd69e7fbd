//! Issue 23, line 2 and its bad input: a baseline changes only on purpose.
//! Re-saving with less coverage needs `--replace` (and names what goes),
//! two saves at once are refused, a crashed save's leftovers never count,
//! a hand-edited entry is a clear error, and `memrel baseline list|show`
//! say what each baseline covers and how it was made. Real runs of the
//! fake worker (fast, exact bytes).

use std::path::{Path, PathBuf};

use super::common::*;

/// A fake scenario named `swap` with the given strategies, one run each:
/// every metric the gate judges has a budget, so one run makes a baseline.
fn swap_scenario(dir: &Path) -> PathBuf {
    write_scenario(
        dir,
        "swap",
        "description = \"fake\"\ncycles = 2\nstrategies = [\"drop\", \"malloc-trim\"]\ninterval_ms = 5\n\
         [models.a]\nfake_anon_mib = 32\n\
         [workload]\nsteps = [\"load a\", \"forward a\", \"unload a\", \"release\", \"settle\"]\n\
         settle_ms = 20\nbaseline_ms = 20\n\
         [thresholds]\nmax_retained_mib = 1000\nmax_peak_mib = 100000\n\
         max_retained_slope_mib_per_cycle = 1000\nmax_settle_ms = 100000\nmax_late_mib = 1000\n",
    )
}

fn entry(root: &Path) -> PathBuf {
    root.join("baselines/main/swap")
}

/// `memrel run` of the swap scenario saving baseline `main`, with `extra`.
fn save(scenario: &Path, root: &Path, extra: &[&str]) -> std::process::Output {
    run(scenario)
        .args(["--save-baseline", "main"])
        .args(extra)
        .out(root)
        .output()
}

fn baseline_cmd(root: &Path, args: &[&str]) -> std::process::Output {
    memrel()
        .arg("baseline")
        .args(args)
        .arg("--out")
        .arg(root)
        .output()
        .expect("memrel starts")
}

/// The command exited 2 and said `needle` on stderr.
fn assert_refused(output: &std::process::Output, needle: &str) {
    assert_eq!(output.status.code(), Some(2), "{}", streams(output));
    assert!(
        stderr(output).contains(needle),
        "{needle:?}: {}",
        streams(output)
    );
}

/// A baseline saved once in a fresh folder: the folder, its results root,
/// the scenario and the saved entry's runs.json.
fn saved_once() -> (tempfile::TempDir, PathBuf, PathBuf, Vec<u8>) {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("results");
    let scenario = swap_scenario(work.path());
    let made = save(&scenario, &root, &[]);
    assert!(made.status.success(), "{}", streams(&made));
    let before = std::fs::read(entry(&root).join("runs.json")).unwrap();
    (work, root, scenario, before)
}

#[test]
fn less_coverage_needs_replace_and_names_what_is_dropped() {
    let (_work, root, scenario, before) = saved_once();

    // One strategy of the two: refused, nothing written.
    let fewer = save(&scenario, &root, &["--strategy", "drop"]);
    assert_refused(
        &fewer,
        "cannot save baseline main: its entry for swap covers strategy malloc-trim",
    );
    assert_refused(&fewer, "--replace");
    assert_eq!(
        std::fs::read(entry(&root).join("runs.json")).unwrap(),
        before
    );

    // The same coverage again needs no --replace.
    let same = save(&scenario, &root, &[]);
    assert!(same.status.success(), "{}", streams(&same));

    // --replace drops it, and says so.
    let replaced = save(&scenario, &root, &["--strategy", "drop", "--replace"]);
    assert!(replaced.status.success(), "{}", streams(&replaced));
    assert!(
        stderr(&replaced).contains("baseline main: replaced; dropped strategy malloc-trim"),
        "{}",
        streams(&replaced)
    );
    let shown = baseline_cmd(&root, &["show", "main"]);
    assert!(shown.status.success(), "{}", streams(&shown));
    let text = text(&shown.stdout);
    assert!(text.contains("  strategies: drop (1)\n"), "{text}");

    // --replace without --save-baseline is a usage error.
    let alone = run(&scenario).arg("--replace").out(&root).output();
    assert_refused(&alone, "--save-baseline");
}

#[test]
fn list_and_show_say_what_a_baseline_covers_and_how_it_was_made() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("results");
    let empty = baseline_cmd(&root, &["list"]);
    assert!(empty.status.success(), "{}", streams(&empty));
    assert!(
        text(&empty.stdout).contains("no baselines in"),
        "{}",
        streams(&empty)
    );

    let scenario = swap_scenario(work.path());
    let made = save(&scenario, &root, &[]);
    assert!(made.status.success(), "{}", streams(&made));

    let listed = baseline_cmd(&root, &["list"]);
    assert!(listed.status.success(), "{}", streams(&listed));
    let list = text(&listed.stdout);
    let row = list
        .lines()
        .find(|l| l.starts_with("main "))
        .unwrap_or_else(|| panic!("no row for main:\n{list}"));
    assert!(row.contains("swap"), "{row}");
    assert!(row.contains("drop (1), malloc-trim (1)"), "{row}");
    assert!(row.contains("glibc"), "{row}");

    let shown = baseline_cmd(&root, &["show", "main"]);
    assert!(shown.status.success(), "{}", streams(&shown));
    let show = text(&shown.stdout);
    for needle in [
        "scenario swap (cpu, 2 cycles)",
        "  strategies: drop (1), malloc-trim (1)",
        "  resources:  host RSS",
        "--save-baseline main",
        "  machine:    glibc ",
        "CPUs ",
    ] {
        assert!(show.contains(needle), "{needle:?} in:\n{show}");
    }

    let missing = baseline_cmd(&root, &["show", "nope"]);
    assert_refused(&missing, "baseline \"nope\" does not exist");
    let bad_name = baseline_cmd(&root, &["show", "../up"]);
    assert_refused(&bad_name, "path separator");
}

/// A hand-edited entry (a file missing, another schema, runs.json gone, a
/// renamed directory) is an error naming it and the fix, for `check`,
/// `baseline show` and a save that would replace it without --replace.
#[test]
fn a_hand_edited_baseline_is_a_clear_error_and_is_never_used() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("results");
    let scenario = swap_scenario(work.path());
    let made = save(&scenario, &root, &[]);
    assert!(made.status.success(), "{}", streams(&made));
    let new = only_results_dir(&root, "swap");
    let pristine = work.path().join("pristine");
    std::fs::create_dir_all(&pristine).unwrap();
    for f in ["runs.json", "samples.csv", "events.csv", "summary.json"] {
        std::fs::copy(entry(&root).join(f), pristine.join(f)).unwrap();
    }
    let restore = || {
        for f in ["runs.json", "samples.csv", "events.csv", "summary.json"] {
            std::fs::copy(pristine.join(f), entry(&root).join(f)).unwrap();
        }
    };
    let check = || {
        memrel()
            .args(["check", "--baseline", "main", "--out"])
            .arg(&root)
            .arg(&new)
            .output()
            .unwrap()
    };
    let intact = check();
    assert_eq!(intact.status.code(), Some(0), "{}", streams(&intact));

    type Edit = Box<dyn Fn(&Path)>;
    let edits: Vec<(&str, Edit, &str)> = vec![
        (
            "samples.csv removed",
            Box::new(|e: &Path| std::fs::remove_file(e.join("samples.csv")).unwrap()),
            "samples.csv",
        ),
        (
            "another schema",
            Box::new(|e: &Path| {
                let p = e.join("runs.json");
                let t = std::fs::read_to_string(&p).unwrap();
                std::fs::write(
                    &p,
                    t.replacen("\"schema_version\": 1", "\"schema_version\": 7", 1),
                )
                .unwrap()
            }),
            "schema",
        ),
        (
            "runs.json removed",
            Box::new(|e: &Path| std::fs::remove_file(e.join("runs.json")).unwrap()),
            "has no runs.json",
        ),
        (
            "runs.json truncated",
            Box::new(|e: &Path| std::fs::write(e.join("runs.json"), "{\"header\": ").unwrap()),
            "runs.json",
        ),
    ];
    for (what, edit, needle) in edits {
        restore();
        edit(&entry(&root));
        eprintln!("hand edit: {what}");
        let checked = check();
        assert_refused(&checked, needle);
        assert_refused(&checked, "baselines/main/swap");
        let shown = baseline_cmd(&root, &["show", "main"]);
        assert_eq!(shown.status.code(), Some(2), "{what}: {}", streams(&shown));
        assert!(
            text(&shown.stdout).contains("scenario swap: damaged: "),
            "{what}"
        );
        // A save over it needs --replace (it cannot say what it would drop).
        assert_refused(
            &save(&scenario, &root, &[]),
            "pass --replace to overwrite it",
        );
    }
    restore();
    let replaced = save(&scenario, &root, &["--replace"]);
    assert!(replaced.status.success(), "{}", streams(&replaced));
}

/// A second save while one holds the baseline's lock is refused and the
/// entry stays as it was; a crashed save's temporary directory is never
/// taken for a scenario and is removed by the next save.
#[test]
fn two_saves_at_once_are_refused_and_crash_leftovers_do_not_count() {
    let (_work, root, scenario, before) = saved_once();

    // Another memrel saving: it holds the lock on the baseline's directory.
    let held = std::fs::File::open(root.join("baselines/main")).unwrap();
    held.lock().unwrap();
    let second = save(&scenario, &root, &[]);
    assert_refused(&second, "another memrel is saving into");
    assert_eq!(
        std::fs::read(entry(&root).join("runs.json")).unwrap(),
        before
    );
    drop(held);

    // A save that crashed mid-copy left its temporary directory behind.
    let leftover = root.join("baselines/main/.swap.tmp99999");
    std::fs::create_dir_all(&leftover).unwrap();
    std::fs::write(leftover.join("runs.json"), "{").unwrap();
    let listed = baseline_cmd(&root, &["show", "main"]);
    assert!(listed.status.success(), "{}", streams(&listed));
    let shown = text(&listed.stdout);
    let entries = shown.lines().filter(|l| l.starts_with("scenario ")).count();
    assert_eq!(entries, 1, "{shown}");
    let again = save(&scenario, &root, &[]);
    assert!(again.status.success(), "{}", streams(&again));
    assert!(
        !leftover.exists(),
        "the next save removes a crashed save's leftovers"
    );
    let names: Vec<_> = std::fs::read_dir(root.join("baselines/main"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["swap"]);
}
