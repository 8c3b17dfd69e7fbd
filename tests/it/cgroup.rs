//! The container's view (issue 26, lines 2 and 3): the worker's cgroup as
//! the `container` resource, read-only on the machine the tests run on;
//! `--cgroup-parent` against a directory the test makes (a plain directory
//! imitating cgroupfs: no real cgroup is created, moved or written); and
//! `--memory-limit` without a delegated cgroup, where it is RLIMIT_AS and an
//! allocation over it gives the run its own status.

use std::path::{Path, PathBuf};

use super::common::*;

/// A fake scenario: `anon_mib` + 16 MiB of file per load, 2 cycles.
fn fake_scenario(dir: &Path, name: &str, anon_mib: u32) -> PathBuf {
    write_scenario(
        dir,
        name,
        &format!(
            "description = \"container view\"\ncycles = 2\nstrategies = [\"drop\"]\ninterval_ms = 5\n\
             timeout_s = 60\n\
             [models.a]\nfake_anon_mib = {anon_mib}\nfake_file_mib = 16\nfake_leak_mib = 0\n\
             [workload]\nsteps = [\"load a\", \"forward a\", \"unload a\", \"release\", \"settle\"]\n\
             settle_ms = 50\nbaseline_ms = 50\n"
        ),
    )
}

fn number(row: &std::collections::HashMap<String, String>, key: &str) -> Option<f64> {
    row.get(key).and_then(|v| v.parse().ok())
}

#[test]
fn the_cgroup_the_tests_run_in_is_read_as_the_container_resource() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fake_scenario(tmp.path(), "container", 64);
    let out = tmp.path().join("out");
    let output = run(&path).out(&out).output();
    assert!(output.status.success(), "{}", stderr(&output));
    let dir = only_results_dir(&out, "container");
    let header = &runs_json(&dir)["header"]["container"];
    assert_eq!(header["scope"], "whole_cgroup", "{header}");
    assert!(
        header["unavailable"].is_null(),
        "this machine's cgroup can be read: {header}"
    );
    // Samples at least 10 ms apart have the cgroup's usage and working set
    // (every other one at this 5 ms interval); usage holds the working set
    // (it is usage less the inactive page cache).
    let samples = csv_rows(&dir.join("samples.csv"));
    assert!(samples.len() > 10, "{} samples", samples.len());
    let read: Vec<_> = samples
        .iter()
        .filter(|s| !s["container_usage_bytes"].is_empty())
        .collect();
    assert!(
        read.len() * 3 >= samples.len(),
        "{} of {} samples read the cgroup",
        read.len(),
        samples.len()
    );
    for s in read {
        let usage = number(s, "container_usage_bytes").expect("usage");
        let ws = number(s, "container_bytes").expect("a working set with every usage");
        assert!(ws <= usage, "working set {ws} > usage {usage}");
    }
    // The worker's 64 MiB of anonymous memory is charged to the cgroup: at
    // the end of a load the cgroup's working set holds at least the
    // worker's anon pages (not file pages: those may be charged elsewhere).
    let events = csv_rows(&dir.join("events.csv"));
    let loaded: Vec<_> = events
        .iter()
        .filter(|e| e["phase"] == "load" && e["edge"] == "end")
        .collect();
    assert_eq!(loaded.len(), 2);
    for e in loaded {
        let anon = number(e, "anon_bytes").expect("anon");
        let ws = number(e, "container_bytes").expect("the parent read the cgroup at the edge");
        assert!(anon >= 64.0 * MIB, "{anon}");
        assert!(
            ws >= anon,
            "cgroup working set {ws} < the worker's anon {anon}"
        );
    }
    // The run keeps every counter at its start and end.
    let cgroup = &runs(&dir)[0]["cgroup"];
    for side in ["at_start", "at_end"] {
        let c = &cgroup[side];
        assert!(c["usage_bytes"].as_u64().is_some(), "{cgroup}");
        assert!(c["inactive_file_bytes"].as_u64().is_some(), "{cgroup}");
        assert!(c["anon_bytes"].as_u64().is_some(), "{cgroup}");
    }
    // summary.json and the table carry the resource, labelled as the whole cgroup's.
    let summary = summary(&dir);
    assert!(
        summary["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .any(|r| r == "container"),
        "{}",
        summary["resources"]
    );
    let console = text(&output.stdout);
    assert!(
        console.contains("container working set (whole cgroup)"),
        "{console}"
    );
    assert_rerenders(&dir);
}

/// A plain directory that looks like a delegated cgroup v2 directory.
fn fake_cgroup_parent(root: &Path) -> PathBuf {
    let dir = root.join("delegated");
    std::fs::create_dir(&dir).expect("mkdir");
    std::fs::write(dir.join("cgroup.controllers"), "cpu io memory pids\n").unwrap();
    std::fs::write(dir.join("cgroup.subtree_control"), "memory\n").unwrap();
    dir
}

#[test]
fn a_delegated_directory_gets_a_cgroup_per_worker_with_its_limit() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let parent = fake_cgroup_parent(tmp.path());
    let path = fake_scenario(tmp.path(), "delegated", 8);
    let out = tmp.path().join("out");
    let output = run(&path)
        .out(&out)
        .repeat(1)
        .arg("--cgroup-parent")
        .arg(&parent)
        .args(["--memory-limit", "512M"])
        .output();
    assert!(output.status.success(), "{}", stderr(&output));
    let children: Vec<PathBuf> = std::fs::read_dir(&parent)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(children.len(), 1, "one child per worker: {children:?}");
    let child = &children[0];
    let name = child.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("memrel-") && name.ends_with("-run1-1"),
        "{name}"
    );
    assert_eq!(
        std::fs::read_to_string(child.join("memory.max")).unwrap(),
        (512u64 << 20).to_string()
    );
    // The worker wrote itself ("0": the writing process) before exec.
    assert_eq!(
        std::fs::read_to_string(child.join("cgroup.procs")).unwrap(),
        "0"
    );
    // The imitation has no counters: the run goes on, and says why the
    // container column is empty.
    let dir = only_results_dir(&out, "delegated");
    let header = &runs_json(&dir)["header"]["container"];
    assert_eq!(header["scope"], "worker", "{header}");
    assert_eq!(header["limit"], "cgroup_max", "{header}");
    let run = &runs(&dir)[0];
    assert_eq!(run["status"], "completed", "{run}");
    let error = run["cgroup"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("memory.current"), "{error}");
    let summary = summary(&dir);
    let container = summary["runs"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "container")
        .expect("the container resource is listed")
        .clone();
    let why = container["not_measured"].as_str().unwrap_or_default();
    assert!(
        why.contains("not available") && why.contains("memory.current"),
        "{container}"
    );
    // The samples are all there.
    let samples = csv_rows(&dir.join("samples.csv"));
    assert!(samples.len() > 10, "{} samples", samples.len());
    assert!(samples.iter().all(|s| s["container_bytes"].is_empty()));
}

#[test]
fn a_directory_that_is_not_a_delegated_cgroup_is_refused_naming_the_flag() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fake_scenario(tmp.path(), "refused", 8);
    let out = tmp.path().join("out");
    let plain = tmp.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    let no_memory = fake_cgroup_parent(tmp.path());
    std::fs::write(no_memory.join("cgroup.subtree_control"), "cpu\n").unwrap();
    for (dir, says) in [
        (plain.as_path(), "not a cgroup v2 directory"),
        (no_memory.as_path(), "cgroup.subtree_control"),
        (Path::new("/nonexistent/cg"), "not a directory"),
    ] {
        let output = run(&path)
            .out(&out)
            .arg("--cgroup-parent")
            .arg(dir)
            .output();
        assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
        let e = stderr(&output);
        assert!(e.contains("--cgroup-parent") && e.contains(says), "{e}");
    }
    assert!(results_dirs(&out, "refused").is_empty(), "nothing ran");
    let output = run(&path)
        .out(&out)
        .args(["--memory-limit", "lots"])
        .output();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("--memory-limit \"lots\""),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_memory_limit_without_a_delegated_cgroup_is_an_address_space_limit() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // 1 GiB of anonymous memory under a 512 MiB address-space limit.
    let path = fake_scenario(tmp.path(), "limited", 1024);
    let out = tmp.path().join("out");
    let output = run(&path)
        .out(&out)
        .args(["--memory-limit", "512M"])
        .output();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let dir = only_results_dir(&out, "limited");
    assert_eq!(runs_json(&dir)["header"]["container"]["limit"], "rlimit_as");
    let first = &runs(&dir)[0];
    assert_eq!(first["status"], "alloc_failed", "{first}");
    let error = first["error"].as_str().unwrap_or_default();
    assert!(error.starts_with("out of memory"), "{error}");
    // Nothing recorded is lost: the baseline was sampled.
    assert!(csv_rows(&dir.join("samples.csv")).len() >= 5);
    // The same scenario under a limit it fits in completes.
    let out = tmp.path().join("out-fits");
    let output = run(&path).out(&out).args(["--memory-limit", "8G"]).output();
    assert!(output.status.success(), "{}", stderr(&output));
}

#[test]
fn a_program_refused_memory_under_a_memory_limit_is_alloc_failed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("out");
    let output = memrel()
        .arg("exec")
        .arg("--out")
        .arg(&out)
        .args(["--memory-limit", "256M", "--"])
        .args([
            "python3",
            "-c",
            "import time; time.sleep(0.2); b = bytearray(1 << 30)",
        ])
        .output()
        .expect("memrel starts");
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let dir = only_results_dir(&out, "exec");
    let first = &runs(&dir)[0];
    assert_eq!(first["status"], "alloc_failed", "{first}");
    let error = first["error"].as_str().unwrap_or_default();
    assert!(error.starts_with("out of memory: MemoryError"), "{error}");
    assert!(
        csv_rows(&dir.join("samples.csv")).len() >= 5,
        "the samples are kept"
    );
}

/// A program that "allocates" in a fake cgroupfs directory (memory.current
/// and memory.stat, rewritten in place right after each edge, as a program
/// allocates right after its load begins); argv: the directory. Its own reading of
/// the directory before each edge goes to `own.json` beside it.
const CHARGES_ITS_CGROUP: &str = r#"
import json, os, sys
import memrel

d = sys.argv[1]
# `file`: what the unload leaves is active page cache (file pages), its
# anonymous memory comes back.
keeps_file = len(sys.argv) > 2 and sys.argv[2] == "file"
own, now = [], [0]

def charge(mib, anon_mib=None):
    # Written in place, every number the same width (as a kernel's file
    # is one inode that memrel keeps open and reads again).
    usage = mib << 20
    anon = (mib if anon_mib is None else anon_mib) << 20
    stat = "anon %020d\nfile %020d\nactive_file %020d\ninactive_file 0\n" % (
        anon, usage - anon, usage - anon)
    for name, text in (("memory.stat", stat), ("memory.current", "%020d\n" % usage)):
        with open(os.path.join(d, name), "r+") as f:
            f.write(text)
    now[0] = usage

def edge(kind, phase):
    own.append({"phase": phase, "edge": kind, "bytes": now[0]})
    (memrel.begin if kind == "begin" else memrel.end)(phase, model="m")

charge(100)
for cycle in range(2):
    edge("begin", "load")
    charge(300)
    edge("end", "load")
    edge("begin", "unload")
    charge(200, 100) if keeps_file else charge(100)
    edge("end", "unload")
with open(os.path.join(os.path.dirname(sys.argv[0]), "own.json"), "w") as f:
    json.dump(own, f)
"#;

/// `memrel exec [ARGS] -- python3 prog.py FAKE [PROG_ARGS]` under `tmp`,
/// with `MEMREL_CGROUP_DIR` a fake cgroup (empty `memory.current` and
/// `memory.stat`) that the program (`CHARGES_ITS_CGROUP`) writes as it goes.
fn exec_charging_a_fake_cgroup(
    tmp: &Path,
    args: &[&str],
    prog_args: &[&str],
) -> std::process::Output {
    let fake = tmp.join("cgroup");
    std::fs::create_dir(&fake).expect("fake cgroup dir");
    for name in ["memory.current", "memory.stat"] {
        std::fs::write(fake.join(name), "").expect(name);
    }
    let prog = tmp.join("prog.py");
    std::fs::write(&prog, CHARGES_ITS_CGROUP).expect("prog.py");
    let mut program_args = vec![fake.as_os_str()];
    program_args.extend(prog_args.iter().map(std::ffi::OsStr::new));
    exec_python(
        tmp,
        ("MEMREL_CGROUP_DIR", &fake),
        args,
        &prog,
        &program_args,
    )
}

/// Line 7 of the one-reading issue: a container that keeps memory only as
/// file pages (the page cache turning active; its anonymous memory came
/// back) is shown as file pages, as context, and no run counts as retaining.
#[test]
fn a_container_that_keeps_only_file_pages_is_said_so_and_not_charged() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let output = exec_charging_a_fake_cgroup(tmp.path(), &[], &["file"]);
    assert!(output.status.success(), "{}", streams(&output));
    let dir = only_results_dir(tmp.path(), "exec");
    let summary = read_json(&dir.join("summary.json"));
    let container = summary["strategies"][0]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["resource"] == "container")
        .unwrap_or_else(|| panic!("no container in {summary}"))
        .clone();
    // 200 MiB charged after the unload against 100 at the start: 100 MiB
    // retained, all of it file pages.
    assert_eq!(
        container["retained_bytes"]["median"],
        100.0 * 1048576.0,
        "{container}"
    );
    assert_eq!(
        container["retained_anon_bytes"]["median"], 0.0,
        "{container}"
    );
    assert_eq!(container["processes_retaining"], 0, "{container}");
    let context = container["context"].as_str().expect("a context");
    assert!(
        context.starts_with("file pages: 100.0 of the 100.0 MiB"),
        "{context}"
    );
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(out.contains("not judged, file pages"), "{out}");
}
