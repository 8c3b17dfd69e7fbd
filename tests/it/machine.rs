//! `memrel check` says which facts of the machine differ from the baseline's
//! (issue 23), and a baseline from another kind of machine is an error
//! unless `--any-machine` (issue 28): on copies of the committed `ci`
//! baseline whose runs.json host is edited. The hostname alone is never a
//! difference.

use std::path::Path;
use std::process::Output;

use serde_json::{json, Value};

use crate::common::{edit_runs_json, memrel, read_json, streams, text};

const RECORD_FILES: [&str; 4] = ["runs.json", "samples.csv", "events.csv", "summary.json"];

fn copy_record(from: &Path, to: &Path) {
    crate::common::copy_record(from, to, &RECORD_FILES);
}

/// `<work>/results/baselines/ci/ci-gate` and `<work>/new`, both copies of the
/// committed ci baseline, each with its host edited.
fn baseline_and_new(
    work: &Path,
    base_host: impl FnOnce(&mut Value),
    new_host: impl FnOnce(&mut Value),
) -> (std::path::PathBuf, std::path::PathBuf) {
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("results/baselines/ci/ci-gate");
    let root = work.join("results");
    let base = root.join("baselines/ci/ci-gate");
    let new = work.join("new");
    copy_record(&committed, &base);
    copy_record(&committed, &new);
    edit_runs_json(&base, |j| base_host(&mut j["header"]["host"]));
    edit_runs_json(&new, |j| new_host(&mut j["header"]["host"]));
    (root, new)
}

fn check(root: &Path, new: &Path) -> Output {
    let output = memrel()
        .args(["check", "--baseline", "ci", "--out"])
        .arg(root)
        .arg(new)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", streams(&output));
    output
}

fn full_facts(host: &mut Value, distribution: &str, jemalloc: Option<&str>) {
    let mut allocators = json!({"libtcmalloc-minimal4": "2.10-1"});
    if let Some(v) = jemalloc {
        allocators["libjemalloc2"] = v.into();
    }
    host["machine"] = json!({
        "distribution": distribution,
        "cpu_model": "AMD EPYC",
        "gpus": [],
        "gpu_driver": null,
        "cuda": null,
        "allocators": allocators,
    });
}

#[test]
fn a_new_hostname_alone_is_not_a_machine_difference() {
    let work = tempfile::tempdir().unwrap();
    let (root, new) = baseline_and_new(work.path(), |_| {}, |h| h["hostname"] = "runner-7".into());
    let output = check(&root, &new);
    let md = text(&output.stdout);
    assert!(!md.contains("machine differs"), "{md}");
    assert!(
        !text(&output.stderr).contains("runner-7"),
        "{}",
        streams(&output)
    );
    assert!(read_json(&new.join("verdict.json"))
        .get("machine_differences")
        .is_none());
}

#[test]
fn glibc_and_cpus_that_differ_are_in_the_headline_warnings_and_verdict_json() {
    let work = tempfile::tempdir().unwrap();
    let (root, new) = baseline_and_new(
        work.path(),
        |h| {
            h["libc"] = "glibc 2.39".into();
            h["cpus"] = 4.into();
            // A baseline made before memrel recorded the full facts.
            h.as_object_mut().unwrap().remove("machine");
        },
        |h| h["hostname"] = "runner-7".into(),
    );
    let output = check(&root, &new);
    let md = std::fs::read_to_string(new.join("verdict.md")).unwrap();
    let headline: Vec<&str> = md.lines().take(5).collect();
    assert!(
        headline.contains(&"⚠ machine differs from the baseline's: glibc 2.39 → 2.36, CPUs 4 → 2"),
        "{md}"
    );
    let err = text(&output.stderr);
    assert!(
        err.contains("scenario ci-gate: the machine differs from the baseline's: glibc 2.39 → 2.36, CPUs 4 → 2"),
        "{err}"
    );
    // The baseline predates the full facts: the check says what it left out.
    assert!(err.contains("predates memrel's machine facts"), "{err}");
    let json = read_json(&new.join("verdict.json"));
    assert_eq!(
        json["machine_differences"],
        json!([
            {"scenario": "ci-gate", "fact": "glibc", "baseline": "2.39", "new": "2.36"},
            {"scenario": "ci-gate", "fact": "CPUs", "baseline": "4", "new": "2"},
        ])
    );
}

/// A baseline from another kind of machine (issue 28): the check names the
/// key facts that differ and exits 2; `--any-machine` judges anyway and
/// every verdict row says so.
#[test]
fn a_baseline_from_another_kind_of_machine_exits_2_unless_any_machine() {
    let work = tempfile::tempdir().unwrap();
    let (root, new) = baseline_and_new(
        work.path(),
        |h| full_facts(h, "Ubuntu 24.04.1 LTS", Some("5.3.0-2build1")),
        |h| full_facts(h, "Debian GNU/Linux 12 (bookworm)", None),
    );
    let run = |extra: &[&str]| {
        memrel()
            .args(["check", "--baseline", "ci", "--out"])
            .arg(&root)
            .args(extra)
            .arg(&new)
            .output()
            .unwrap()
    };
    let output = run(&[]);
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    let err = text(&output.stderr);
    assert!(
        err.contains("machine: scenario ci-gate: the baseline was made on machine amd-epyc-2c-24g-glibc2.36-"),
        "{err}"
    );
    assert!(
        err.contains(
            "(distribution Ubuntu 24.04 LTS → Debian GNU/Linux 12, libjemalloc2 5.3.0 → absent)"
        ),
        "{err}"
    );
    assert!(err.contains("or pass --any-machine"), "{err}");
    let json = read_json(&new.join("verdict.json"));
    assert_eq!(json["other_machines"][0]["scenario"], "ci-gate");
    assert_eq!(json["any_machine"], false);

    let output = run(&["--any-machine"]);
    assert_eq!(output.status.code(), Some(0), "{}", streams(&output));
    let json = read_json(&new.join("verdict.json"));
    assert_eq!(json["any_machine"], true);
    let rows = json["verdicts"].as_array().unwrap();
    assert!(!rows.is_empty());
    for row in rows {
        assert!(
            row["note"].as_str().unwrap().contains(
                "across machines (--any-machine): baseline on amd-epyc-2c-24g-glibc2.36-"
            ),
            "{row}"
        );
    }
    let md = text(&output.stdout);
    assert!(
        md.contains("⚠ judged across machines (--any-machine): scenario ci-gate"),
        "{md}"
    );
    // The raw facts that differ are still listed, as before.
    assert!(
        md.contains(
            "⚠ machine differs from the baseline's: distribution Ubuntu 24.04.1 LTS → Debian GNU/Linux 12 (bookworm), libjemalloc2 5.3.0-2build1 → absent"
        ),
        "{md}"
    );
}

/// A fresh VM of the class the `ci` baseline was made on: another
/// hostname, kernel build and a few KiB less RAM is the same machine.
#[test]
fn a_fresh_vm_of_the_baselines_class_is_the_same_machine() {
    let work = tempfile::tempdir().unwrap();
    let (root, new) = baseline_and_new(
        work.path(),
        |_| {},
        |h| {
            h["hostname"] = "runner-7".into();
            h["kernel"] = "6.18.44-fc-v595".into();
            h["total_memory_bytes"] = (25_276_063_744u64 - 400 * 1024).into();
        },
    );
    let output = check(&root, &new);
    let json = read_json(&new.join("verdict.json"));
    assert!(json.get("other_machines").is_none(), "{json}");
    let md = text(&output.stdout);
    assert!(
        md.contains(
            "⚠ machine differs from the baseline's: kernel 6.18.44-fc-v782 → 6.18.44-fc-v595"
        ),
        "{md}"
    );
}

#[test]
fn a_run_records_the_machine_facts() {
    let work = tempfile::tempdir().unwrap();
    let output = memrel()
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
        .arg(work.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", streams(&output));
    let dir = crate::common::only_results_dir(work.path(), "ci-smoke");
    let host = &crate::common::runs_json(&dir)["header"]["host"];
    let machine = &host["machine"];
    assert!(machine.is_object(), "{host}");
    assert!(machine["cpu_model"].is_string(), "{host}");
    assert!(machine["allocators"].is_object(), "{host}");
    assert!(machine["gpus"].is_array(), "{host}");
    // The commit memrel was built from (build.rs): this checkout is a git tree.
    let commit = crate::common::runs_json(&dir)["header"]["memrel_commit"].clone();
    let commit = commit
        .as_str()
        .unwrap_or_else(|| panic!("no memrel_commit: {commit}"));
    assert!(
        commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit()),
        "{commit}"
    );
}

/// `memrel compare` across machines (issue 28): the machine is a column of
/// compare.csv and the tables, an older record is `unknown`, and one
/// `MEMREL_MACHINE` name on two kinds of machine is an error naming both.
#[test]
fn compare_keys_rows_by_machine_and_refuses_a_key_clash() {
    let work = tempfile::tempdir().unwrap();
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("results/baselines/ci/ci-gate");
    let (a, b, old) = (
        work.path().join("a"),
        work.path().join("b"),
        work.path().join("old"),
    );
    for dir in [&a, &b, &old] {
        copy_record(&committed, dir);
    }
    edit_runs_json(&b, |j| j["header"]["host"]["cpus"] = 16.into());
    edit_runs_json(&old, |j| {
        j["header"]["host"]
            .as_object_mut()
            .unwrap()
            .remove("machine");
    });
    let output = memrel()
        .args(["compare", "--out"])
        .arg(work.path().join("out"))
        .args([&a, &b, &old])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", streams(&output));
    let console = text(&output.stdout);
    assert!(console.contains("machine"), "{console}");
    let out = crate::common::only_results_dir(&work.path().join("out"), "compare");
    let csv = std::fs::read_to_string(out.join("compare.csv")).unwrap();
    let machines: Vec<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(4).unwrap())
        .collect();
    assert!(
        machines[0].starts_with("amd-epyc-2c-24g-glibc2.36-"),
        "{csv}"
    );
    assert!(
        machines
            .iter()
            .any(|m| m.starts_with("amd-epyc-16c-24g-glibc2.36-")),
        "{csv}"
    );
    assert_eq!(machines.last(), Some(&"unknown"), "{csv}");
    let json = read_json(&out.join("compare.json"));
    assert_eq!(json["machines"].as_array().unwrap().len(), 3, "{json}");

    // One name on two kinds of machine.
    for dir in [&a, &b] {
        edit_runs_json(dir, |j| {
            j["header"]["host"]["machine"]["name"] = "pool-a".into()
        });
    }
    let output = memrel()
        .args(["compare", "--out"])
        .arg(work.path().join("out"))
        .args([&a, &b])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    let err = text(&output.stderr);
    assert!(err.contains("machine key clash"), "{err}");
    assert!(
        err.contains(&a.display().to_string()) && err.contains(&b.display().to_string()),
        "{err}"
    );
    assert!(err.contains("CPUs 2 → 16"), "{err}");
}
