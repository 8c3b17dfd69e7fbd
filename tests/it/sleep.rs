//! Sleep and wake (issue 25): the steps a scenario may take, and the sleep
//! metrics measured end to end on a real program that sleeps a "model" the
//! way a server offloads one: a host copy made at sleep and freed at wake.

use super::common::*;

/// 160 MiB "on the device" stands for the model; at sleep a 96 MiB host copy
/// is made (and written), at wake it is freed. The notes carry the fields a
/// sleep reports.
const SLEEPER: &str = r#"
import time, memrel
memrel.baseline(0.3)
with memrel.phase("warmup") as p:
    p.note = "pinned copy ceiling: ceiling_d2h_gib_s=40.00 ceiling_h2d_gib_s=20.00"
with memrel.phase("load", model="m"):
    model = bytearray(160 << 20)
    for i in range(0, len(model), 4096):
        model[i] = 1
with memrel.phase("sleep", model="m") as p:
    host = bytearray(96 << 20)
    for i in range(0, len(host), 4096):
        host[i] = 2
    p.note = "mode=offload copied_bytes=%d copy_s=0.010000 gib_per_s=10.00" % (96 << 20)
with memrel.phase("asleep"):
    time.sleep(0.3)
with memrel.phase("wake", model="m") as p:
    del host
    p.note = "copied_bytes=%d copy_s=0.020000 gib_per_s=5.00" % (96 << 20)
with memrel.phase("unload", model="m"):
    del model
memrel.release()
memrel.settle(0.2)
"#;

#[test]
fn a_programs_sleep_and_wake_are_measured_in_memory_and_against_the_ceiling() {
    let out = tempfile::tempdir().expect("tempdir");
    let output = memrel()
        .args(["exec", "--interval-ms", "5", "--out"])
        .arg(out.path())
        .args(["--", "python3", "-c", SLEEPER])
        .output()
        .expect("memrel starts");
    assert!(output.status.success(), "{}", streams(&output));
    let console = text(&output.stdout);
    assert!(
        console.contains("sleep and wake per strategy"),
        "no sleep table on the console:\n{console}"
    );
    let dir = only_results_dir(out.path(), "exec");
    let rows = csv_rows(&dir.join("sleep.csv"));
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(row["model"], "m");
    assert_eq!(row["mode"], "offload");
    assert_eq!(row["copied_bytes"], (96u64 << 20).to_string());
    let f = |k: &str| {
        row[k]
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("{k}: {:?}", row[k]))
    };
    assert_eq!(f("sleep_ceiling_fraction"), 0.25);
    assert_eq!(f("wake_ceiling_fraction"), 0.25);
    // The host copy: ~96 MiB more while asleep, given back by the wake
    // (a bytearray this large is its own mmap: freed at once).
    let grown = f("host_grown_asleep_bytes") / MIB;
    assert!((90.0..110.0).contains(&grown), "grown asleep {grown} MiB");
    let held = f("host_held_after_wake_bytes") / MIB;
    assert!(held.abs() < 8.0, "held after wake {held} MiB");
    assert!(f("sleep_s") > 0.0 && f("wake_s") >= 0.0);
    // A CPU program has no VRAM: the columns are empty, not zero.
    assert_eq!(row["vram_asleep_bytes"], "");
    assert_eq!(row["vram_settle_s"], "");
    // Nothing came back after the sleep returned: no release gap.
    assert!(
        f("host_settle_s") < 0.05,
        "host settle {}",
        row["host_settle_s"]
    );
    assert!(
        f("host_late_bytes") / MIB < 4.0,
        "late {}",
        row["host_late_bytes"]
    );
    // summary.json carries the same pair.
    let summary = summary(&dir);
    assert_eq!(summary["runs"][0]["sleeps"][0]["copied_bytes"], 96u64 << 20);
    // `report` re-renders it from the files on disk.
    std::fs::remove_file(dir.join("sleep.csv")).expect("remove");
    run_ok(memrel().arg("report").arg(&dir));
    assert!(
        dir.join("sleep.csv").is_file(),
        "report did not write sleep.csv"
    );
}

#[test]
fn a_run_without_sleeps_has_no_sleep_outputs() {
    let out = tempfile::tempdir().expect("tempdir");
    let output = memrel()
        .args(["exec", "--interval-ms", "5", "--out"])
        .arg(out.path())
        .args(["--", "python3", "-c", "import memrel\nwith memrel.phase('load', model='m'):\n    x = bytearray(1 << 20)\nwith memrel.phase('unload', model='m'):\n    del x\n"])
        .output()
        .expect("memrel starts");
    assert!(output.status.success(), "{}", streams(&output));
    assert!(!text(&output.stdout).contains("sleep and wake"));
    let dir = only_results_dir(out.path(), "exec");
    assert!(!dir.join("sleep.csv").exists());
    assert!(summary(&dir)["runs"][0].get("sleeps").is_none());
}

/// Steps that cannot happen are refused when the scenario is read, naming the step.
#[test]
fn impossible_sleep_steps_are_refused_by_name() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for (steps, want) in [
        (
            r#"["load m", "wake m", "unload m"]"#,
            "wake \"m\" comes before \"sleep m\"",
        ),
        (
            r#"["sleep m", "load m", "unload m"]"#,
            "sleep \"m\" comes before \"load m\"",
        ),
        (
            r#"["load m", "sleep m", "forward m", "wake m", "unload m"]"#,
            "model \"m\" is asleep; add \"wake m\"",
        ),
        (
            r#"["load m", "sleep m", "unload m"]"#,
            "model \"m\" is asleep; add \"wake m\"",
        ),
        (
            r#"["load m", "sleep m"]"#,
            "still asleep at the end of the cycle",
        ),
        (
            r#"["load m", "asleep soon", "unload m"]"#,
            "asleep needs milliseconds",
        ),
    ] {
        let text = format!(
            "description = \"t\"\ndevice = \"cpu\"\nstrategies = [\"drop\"]\n[models.m]\npreset = \"bert-tiny\"\n[workload]\nsteps = {steps}\n"
        );
        let path = write_scenario(tmp.path(), "s", &text);
        let output = run(&path).out(tmp.path()).output();
        assert_eq!(
            output.status.code(),
            Some(2),
            "{steps}: {}",
            streams(&output)
        );
        assert!(
            stderr(&output).contains(want),
            "{steps}: want {want:?} in\n{}",
            stderr(&output)
        );
    }
}

/// A sleep step needs a strategy that says how to sleep.
#[test]
fn a_sleep_step_under_a_strategy_that_does_not_sleep_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let text = "description = \"t\"\ndevice = \"cpu\"\nstrategies = [\"drop\"]\n[models.m]\npreset = \"bert-tiny\"\n[workload]\nsteps = [\"load m\", \"sleep m\", \"wake m\", \"unload m\"]\n";
    let path = write_scenario(tmp.path(), "s", text);
    let output = run(&path).out(tmp.path()).output();
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    let err = stderr(&output);
    assert!(err.contains("does not put models to sleep"), "{err}");
    assert!(err.contains("offload, offload-pinned, reload"), "{err}");
}

/// The gate judges sleeps: a wake that leaves the host copy behind (a
/// program that keeps it) is a regression of `wake_held_bytes` against a
/// baseline whose wake freed it, and verdict.md names the metric.
#[test]
fn the_gate_catches_a_wake_that_keeps_its_host_copy() {
    let out = tempfile::tempdir().expect("tempdir");
    let exec = |script: &str, extra: &[&str]| {
        let output = memrel()
            .args(["exec", "--interval-ms", "5", "--repeat", "3", "--out"])
            .arg(out.path())
            .args(extra)
            .args(["--", "python3", "-c", script])
            .output()
            .expect("memrel starts");
        assert!(output.status.success(), "{}", streams(&output));
    };
    exec(SLEEPER, &["--save-baseline", "sleeper"]);
    // The same program, but the wake keeps the 96 MiB host copy alive.
    let keeper = SLEEPER.replace("    del host\n", "    kept = host\n");
    assert_ne!(keeper, SLEEPER);
    exec(&keeper, &[]);
    let newest = results_dirs(out.path(), "exec")
        .into_iter()
        .max()
        .expect("two results directories");
    let verdict = out.path().join("verdict");
    let output = memrel()
        .args(["check", "--baseline", "sleeper", "--out"])
        .arg(out.path())
        .arg("--verdict-dir")
        .arg(&verdict)
        .arg(&newest)
        .output()
        .expect("memrel starts");
    let md = std::fs::read_to_string(verdict.join("verdict.md")).expect("verdict.md");
    assert_eq!(output.status.code(), Some(1), "{}\n{md}", streams(&output));
    let json = read_json(&verdict.join("verdict.json"));
    let rows = json["verdicts"].as_array().expect("verdicts");
    let held = rows
        .iter()
        .find(|r| r["metric"] == "wake_held_bytes" && r["resource"] == "host")
        .unwrap_or_else(|| panic!("no wake_held_bytes row for host:\n{md}"));
    assert_eq!(held["verdict"], "regressed", "{held}");
    assert!(md.contains("held after wake"), "{md}");
}
