//! `memrel report` never loses data (issue 36, line 4): on a results
//! directory made by a real `memrel run` of the fake worker, then damaged
//! (samples.csv missing, events.csv cut mid-line, a corrupt summary.json or
//! runs.json), it exits 2 naming the file (and the line), and every file
//! that was there is byte-identical afterwards, none added. What can be read
//! is still written on purpose into a new directory with `--out`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::common::*;

/// One run of a small fake scenario (2 strategies × 3 cycles), made once
/// per test binary and only ever copied (tests damage their copy).
fn saved_run() -> &'static Path {
    static RUN: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, dir) = RUN.get_or_init(|| {
        let root = tempfile::tempdir().expect("tempdir");
        let scenario = write_scenario(
            root.path(),
            "rerender",
            "description = \"fake\"\ncycles = 3\nstrategies = [\"drop\", \"malloc-trim\"]\ninterval_ms = 5\n\
             [models.a]\nfake_anon_mib = 16\n\
             [workload]\nsteps = [\"load a\", \"forward a\", \"unload a\", \"release\", \"settle\"]\n\
             settle_ms = 20\nbaseline_ms = 20\n",
        );
        let out = root.path().join("out");
        run(&scenario).out(&out).ok();
        let dir = only_results_dir(&out, "rerender");
        (root, dir)
    });
    dir
}

/// A copy of the saved run in a new temp dir.
fn copy() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let to = tmp.path().join("run");
    std::fs::create_dir_all(&to).expect("mkdir");
    for entry in std::fs::read_dir(saved_run()).expect("saved run") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
    }
    (tmp, to)
}

/// Every file in `dir` with its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| {
            let e = e.expect("entry");
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).expect("file"),
            )
        })
        .collect()
}

/// `memrel report DIR` after `damage`: exit 2, every file as it was, and
/// stderr holding each of `needles` and what `damage` returns.
fn assert_refused_untouched(damage: impl FnOnce(&Path) -> String, needles: &[&str]) {
    let (_tmp, dir) = copy();
    let named = damage(&dir);
    let before = files(&dir);
    for name in ["timeline.png", "summary.json", "peaks.csv"] {
        assert!(before.contains_key(name), "{name} was made by the run");
    }
    let output = memrel().arg("report").arg(&dir).output().expect("report");
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    let err = stderr(&output);
    for needle in needles.iter().copied().chain([named.as_str()]) {
        assert!(err.contains(needle), "{needle:?} in:\n{err}");
    }
    assert!(!err.contains("panicked"), "{err}");
    let after = files(&dir);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "no file added or removed"
    );
    for (name, bytes) in &before {
        assert!(&after[name] == bytes, "{name} changed");
    }
}

/// Cuts the file in the middle of the line that holds its middle byte,
/// after that line's third comma; returns that line's number (1: the header).
fn cut_mid_line(path: &Path) -> usize {
    let bytes = std::fs::read(path).expect("file");
    let from = bytes.len() / 2;
    let start = from
        - bytes[..from]
            .iter()
            .rev()
            .take_while(|b| **b != b'\n')
            .count();
    let third_comma = bytes[start..]
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b',')
        .nth(2)
        .expect("three commas")
        .0;
    std::fs::write(path, &bytes[..start + third_comma + 1]).expect("cut");
    bytes[..start].iter().filter(|b| **b == b'\n').count() + 1
}

#[test]
fn a_missing_samples_file_leaves_every_output_as_it_was() {
    assert_refused_untouched(
        |dir| {
            std::fs::remove_file(dir.join("samples.csv")).expect("rm");
            "samples.csv".into()
        },
        &[
            "was not re-rendered",
            "samples.csv",
            "No such file",
            "--out NEWDIR",
        ],
    );
}

#[test]
fn an_events_file_cut_mid_line_leaves_every_output_as_it_was() {
    assert_refused_untouched(
        |dir| {
            let line = cut_mid_line(&dir.join("events.csv"));
            format!("events.csv line {line} is malformed or cut short")
        },
        &["was not re-rendered"],
    );
}

#[test]
fn an_events_file_cut_inside_its_last_field_is_damage_too() {
    assert_refused_untouched(
        |dir| {
            let path = dir.join("events.csv");
            let bytes = std::fs::read(&path).expect("events");
            // The last row without its end: every field parses, the row
            // may still be cut (a number short of its last digits).
            std::fs::write(&path, &bytes[..bytes.len() - 1]).expect("cut");
            "events.csv line".into()
        },
        &["is cut short (the file ends inside it)"],
    );
}

#[test]
fn a_corrupt_summary_leaves_every_output_as_it_was() {
    assert_refused_untouched(
        |dir| {
            let path = dir.join("summary.json");
            let bytes = std::fs::read(&path).expect("summary");
            std::fs::write(&path, &bytes[..bytes.len() / 3]).expect("cut");
            "summary.json is corrupt or cut short (line ".into()
        },
        &["was not re-rendered"],
    );
}

#[test]
fn a_corrupt_runs_file_leaves_every_output_as_it_was() {
    assert_refused_untouched(
        |dir| {
            std::fs::write(dir.join("runs.json"), "{\"header\": ").expect("cut");
            "runs.json is not valid JSON (cut short?)".into()
        },
        &[],
    );
}

/// Salvage on purpose: `--out NEWDIR` writes what can be read into NEWDIR
/// (exit 0, a warning naming the damage) and leaves DIR as it was.
#[test]
fn out_writes_a_repaired_copy_and_leaves_the_damaged_directory_alone() {
    let (tmp, dir) = copy();
    let line = cut_mid_line(&dir.join("samples.csv"));
    let before = files(&dir);
    let repaired = tmp.path().join("repaired");
    let output = report_into(&dir, &repaired);
    assert!(output.status.success(), "{}", streams(&output));
    let err = stderr(&output);
    assert!(
        err.contains("memrel: warning:")
            && err.contains(&format!(
                "samples.csv line {line} is malformed or cut short"
            )),
        "{err}"
    );
    assert_eq!(files(&dir), before, "the damaged directory is untouched");
    // The copy is whole: it reads back without damage and re-renders in place.
    memrel::record::Record::load(&repaired).expect("the repaired copy reads back");
    assert_rerenders(&repaired);
    // --out naming the directory itself is in place: refused.
    let same = memrel()
        .arg("report")
        .arg(&dir)
        .arg("--out")
        .arg(&dir)
        .output()
        .expect("report");
    assert_eq!(same.status.code(), Some(2), "{}", streams(&same));
    assert_eq!(files(&dir), before);
}

/// An intact directory still re-renders in place, byte for byte.
#[test]
fn an_intact_directory_re_renders_to_the_same_bytes() {
    let (_tmp, dir) = copy();
    let before = files(&dir);
    assert_rerenders(&dir);
    let after = files(&dir);
    for name in ["samples.csv", "events.csv", "runs.json", "summary.json"] {
        assert!(after[name] == before[name], "{name} changed");
    }
}

/// The data rows of `path` gone, its header kept.
fn keep_header_only(path: &Path) {
    let text = std::fs::read_to_string(path).expect("csv");
    let header = text.lines().next().expect("a header");
    std::fs::write(path, format!("{header}\n")).expect("write");
}

/// Issue 47, item 3: an emptied events.csv under samples labelled with
/// phases is damage (exit 2, nothing written), not a run of no cycles
/// whose samples.csv is rewritten as cycle 0 `idle`.
#[test]
fn an_emptied_events_file_is_damage_and_nothing_is_written() {
    assert_refused_untouched(
        |dir| {
            keep_header_only(&dir.join("events.csv"));
            "events.csv has no data rows, but runs.json says run 1 completed".into()
        },
        &["was not re-rendered", "the file was emptied"],
    );
    assert_refused_untouched(
        |dir| {
            std::fs::write(dir.join("events.csv"), "").expect("empty");
            "events.csv has no data rows".into()
        },
        &[],
    );
}

/// Issue 47, item 3: a header-only samples.csv under phase edges is damage
/// (exit 2, nothing written), not a run whose every peak is null.
#[test]
fn a_header_only_samples_file_is_damage_and_nothing_is_written() {
    assert_refused_untouched(
        |dir| {
            keep_header_only(&dir.join("samples.csv"));
            "samples.csv has no data rows, but runs.json says run 1 completed".into()
        },
        &["was not re-rendered", "the file was emptied"],
    );
}

/// Issue 47, item 3: `report` never writes samples.csv or events.csv in
/// place (they are the same files afterwards, not equal copies), and
/// under `--out` a file that read whole is copied as it is: the samples'
/// own phase labels survive a cut events.csv.
#[test]
fn report_never_rewrites_the_raw_data() {
    use std::os::unix::fs::MetadataExt;
    let (tmp, dir) = copy();
    let inode = |name: &str| std::fs::metadata(dir.join(name)).expect(name).ino();
    let before = [inode("samples.csv"), inode("events.csv")];
    assert_rerenders(&dir);
    assert_eq!(
        [inode("samples.csv"), inode("events.csv")],
        before,
        "report wrote samples.csv or events.csv in place"
    );
    let samples = std::fs::read(dir.join("samples.csv")).expect("samples");
    cut_mid_line(&dir.join("events.csv"));
    let repaired = tmp.path().join("repaired");
    let output = report_into(&dir, &repaired);
    assert!(output.status.success(), "{}", streams(&output));
    assert!(
        std::fs::read(repaired.join("samples.csv")).expect("copied") == samples,
        "samples.csv was rewritten from the salvaged events, not copied"
    );
}

/// `memrel report DIR --out REPAIRED`.
fn report_into(dir: &Path, repaired: &Path) -> std::process::Output {
    memrel()
        .arg("report")
        .arg(dir)
        .arg("--out")
        .arg(repaired)
        .output()
        .expect("report")
}
