//! `memrel attach PID` and `memrel mark DIR PHASE` on real processes started
//! outside memrel (python3 programs the tests write, `sleep`): attached,
//! marked from another process and from a log file, ended by the process's
//! exit, SIGTERM or --duration; and the errors of bad pids, flags and dirs.
//!
//! The programs wait for files the test creates (`go`, `free`, `exit`) so
//! that each step happens while memrel measures, on any machine speed.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use super::common::*;

/// Allocates and touches 200 MiB once `go` exists, frees it once `free`
/// exists, exits once `exit` exists; says where it is with files.
const ALLOCATES_200_MIB: &str = r#"
import os, sys, time
d = sys.argv[1]
def wait(name):
    while not os.path.exists(os.path.join(d, name)):
        time.sleep(0.005)
def say(name):
    open(os.path.join(d, name), "w").close()
say("ready")
wait("go")
blob = bytearray(200 << 20)
for i in range(0, len(blob), 4096):
    blob[i] = 1
say("allocated")
wait("free")
del blob
say("freed")
wait("exit")
"#;

/// Writes log lines around a 100 MiB allocation, rotating its log (rename,
/// new file) between them.
const LOGS_AND_ROTATES: &str = r#"
import os, sys, time
d = sys.argv[1]
log_path = os.path.join(d, "app.log")
def wait(name):
    while not os.path.exists(os.path.join(d, name)):
        time.sleep(0.005)
def log(line):
    with open(log_path, "a") as f:
        f.write(line + "\n")
log("starting up")
open(os.path.join(d, "ready"), "w").close()
wait("go")
log("INFO loading model bert")
blob = bytearray(100 << 20)
for i in range(0, len(blob), 4096):
    blob[i] = 1
time.sleep(0.4)
os.rename(log_path, log_path + ".1")
log("INFO model bert unloaded")
# A log line has no handshake: free once memrel has recorded its edge.
events = os.path.join(d, "results", "events.csv")
while not any(",unload,begin," in l for l in (open(events) if os.path.exists(events) else [])):
    time.sleep(0.005)
del blob
time.sleep(0.4)
log("INFO finished")
time.sleep(0.3)
"#;

/// `python3 PROGRAM DIR`, started outside memrel, once it has said `ready`.
fn start_program(dir: &Path, program: &str) -> Child {
    let path = dir.join("prog.py");
    std::fs::write(&path, program).expect("write prog.py");
    let child = Command::new("python3")
        .arg(&path)
        .arg(dir)
        .stdin(Stdio::null())
        .spawn()
        .expect("python3 starts (the attach tests need python3 on PATH)");
    wait_for("the program to start", || dir.join("ready").exists());
    child
}

/// `memrel attach --dir DIR --interval-ms 20 ARGS… PID` in the background,
/// once its `live` file exists.
fn start_attach(results: &Path, pid: u32, args: &[&str]) -> Child {
    let child = memrel()
        .arg("attach")
        .arg("--dir")
        .arg(results)
        .args(["--interval-ms", "20"])
        .args(args)
        .arg(pid.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("memrel starts");
    wait_for("memrel attach to go live", || results.join("live").exists());
    child
}

/// `memrel mark DIR PHASE [ARGS…]`.
fn mark(results: &Path, phase: &str) -> Output {
    memrel()
        .arg("mark")
        .arg(results)
        .args(phase.split(' '))
        .output()
        .expect("memrel mark starts")
}

fn mark_ok(results: &Path, phase: &str) {
    let output = mark(results, phase);
    assert!(
        output.status.success(),
        "memrel mark {phase}: {}",
        streams(&output)
    );
}

fn touch(dir: &Path, name: &str) {
    std::fs::write(dir.join(name), "").expect("write a step file");
}

/// memrel's output once it ended (within 60 s).
fn finish(mut child: Child) -> Output {
    wait_with_limit(&mut child, Duration::from_secs(60));
    child.wait_with_output().expect("memrel's output")
}

/// (phase, edge, t_s, note) of each row of events.csv.
fn edges(results: &Path) -> Vec<(String, String, f64, String)> {
    csv_rows(&results.join("events.csv"))
        .into_iter()
        .map(|r| {
            (
                r["phase"].clone(),
                r["edge"].clone(),
                r["t_s"].parse().expect("t_s"),
                r["note"].clone(),
            )
        })
        .collect()
}

fn phase_edges(results: &Path) -> Vec<String> {
    edges(results)
        .into_iter()
        .map(|(p, e, _, _)| format!("{p} {e}"))
        .collect()
}

/// The anonymous memory the unload's begin edge read (the model still
/// held: an edge is read when its mark is, never left to a periodic sample
/// landing in time) and its end edge's (after the program freed it), in MiB.
/// Two edges of one idle program: neither its start-up nor the page sharing
/// of other processes on a busy machine moves the difference.
fn held_and_freed_at_unload_mib(results: &Path) -> (f64, f64) {
    let events = csv_rows(&results.join("events.csv"));
    let at = |edge: &str| {
        let row = events
            .iter()
            .find(|r| r["phase"] == "unload" && r["edge"] == edge)
            .unwrap_or_else(|| panic!("an unload {edge} edge"));
        row["anon_bytes"].parse::<f64>().expect("anon_bytes") / MIB
    };
    (at("begin"), at("end"))
}

#[test]
fn a_program_started_outside_memrel_is_attached_marked_and_measured_until_it_exits() {
    let work = tempfile::tempdir().expect("tempdir");
    let results = work.path().join("results");
    let mut program = start_program(work.path(), ALLOCATES_200_MIB);
    let pid = program.id();
    let out = work.path().to_str().expect("utf-8 temp dir");
    let attach = start_attach(
        &results,
        pid,
        &["--save-baseline", "attached", "--out", out],
    );
    mark_ok(&results, "load --model bert");
    touch(work.path(), "go");
    wait_for("the allocation", || work.path().join("allocated").exists());
    std::thread::sleep(Duration::from_millis(150));
    mark_ok(&results, "unload");
    touch(work.path(), "free");
    wait_for("the free", || work.path().join("freed").exists());
    std::thread::sleep(Duration::from_millis(150));
    mark_ok(&results, "end");
    touch(work.path(), "exit");
    let output = finish(attach);
    program.wait().expect("the program ends");
    // An attached process is one run: no baseline the gate could fail on,
    // so the save is refused (exit 2), naming what would work; the
    // measurement itself is whole.
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    let err = stderr(&output);
    assert!(
        err.contains("cannot save baseline attached: a baseline needs 3 runs")
            && err.contains("an attached process is one run")
            && err.contains("memrel exec --repeat 3 --save-baseline attached"),
        "{err}"
    );
    assert!(
        err.contains(&format!("ended: process {pid} exited")),
        "{err}"
    );

    assert_eq!(
        phase_edges(&results),
        ["load begin", "load end", "unload begin", "unload end"]
    );
    // Issue 49, item 1: each mark's edge splits host memory by mapping; the
    // 200 MiB bytearray is the heap's.
    crate::mappings::assert_each_edge_is_split(&results.join("events.csv"), true);
    let heap_mib = |phase: &str, edge: &str| {
        let rows = csv_rows(&results.join("events.csv"));
        let row = rows
            .iter()
            .find(|r| r["phase"] == phase && r["edge"] == edge)
            .unwrap_or_else(|| panic!("no {phase} {edge}"));
        row["readings"]
            .split_whitespace()
            .find_map(|e| e.strip_prefix("host.heap="))
            .expect("host.heap")
            .parse::<f64>()
            .expect("bytes")
            / MIB
    };
    let grew = heap_mib("unload", "begin") - heap_mib("load", "begin");
    assert!(
        (190.0..215.0).contains(&grew),
        "the heap grew {grew:.1} MiB"
    );
    assert!(edges(&results).iter().all(
        |e| e.3.starts_with("memrel mark; read ") && e.3.ends_with(" ms after it was written")
    ));
    let models: Vec<String> = csv_rows(&results.join("events.csv"))
        .into_iter()
        .map(|r| r["model"].clone())
        .collect();
    assert_eq!(models, ["bert", "bert", "", ""]);
    let (held_mib, freed_mib) = held_and_freed_at_unload_mib(&results);
    assert!(
        held_mib - freed_mib >= 195.0,
        "the 200 MiB allocation is not in the unload's edge: held {held_mib:.1} MiB, freed {freed_mib:.1} MiB"
    );
    let header = &runs_json(&results)["header"];
    assert_eq!(header["attached"]["pid"], pid);
    let argv = header["attached"]["argv"].to_string();
    assert!(argv.contains("prog.py"), "{argv}");
    assert_eq!(header["attached"]["tree"], true);
    assert_eq!(runs(&results)[0]["status"], "completed");
    // The container: the whole cgroup the program runs in, read only (the
    // tests' own, readable wherever they run): sampled, at every edge, and
    // its counters at the start and the end; the 200 MiB are charged to it.
    assert_eq!(header["container"]["scope"], "whole_cgroup", "{header}");
    assert!(header["container"]["unavailable"].is_null(), "{header}");
    let events = csv_rows(&results.join("events.csv"));
    assert!(
        events.iter().all(|e| !e["container_bytes"].is_empty()),
        "every edge reads the cgroup"
    );
    // The cgroup is shared with whatever else runs (other tests): its level,
    // not its rise, is what the program's 200 MiB of anon pages bound.
    let loaded_ws: f64 = events
        .iter()
        .find(|e| e["phase"] == "load" && e["edge"] == "end")
        .and_then(|e| e["container_bytes"].parse().ok())
        .expect("a working set at the load's end");
    assert!(
        loaded_ws >= 195.0 * MIB,
        "the cgroup's working set {loaded_ws} holds the program's 200 MiB"
    );
    assert!(csv_rows(&results.join("samples.csv"))
        .iter()
        .any(|s| !s["container_bytes"].is_empty()));
    let cgroup = &runs(&results)[0]["cgroup"];
    assert!(
        cgroup["at_start"]["usage_bytes"].as_u64().is_some(),
        "{cgroup}"
    );
    assert!(
        cgroup["at_end"]["usage_bytes"].as_u64().is_some(),
        "{cgroup}"
    );
    assert!(summary(&results)["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .any(|r| r == "container"));
    let record = assert_intact(&results, 1);
    assert_eq!(record.header.sampler, "procfs-tree-pss");
    // The live file is gone with the measurement: a late mark is refused.
    assert!(!results.join("live").exists());
    let late = mark(&results, "load");
    assert_eq!(late.status.code(), Some(2), "{}", streams(&late));
    assert!(
        stderr(&late).contains("no live measurement in"),
        "{}",
        stderr(&late)
    );
    // The results are a run's: compare reads them, and a baseline made of
    // them by hand (a copy of the record) is judged by check: one run a
    // side cannot show a change holds, so it is too few (issue 47), and
    // the hint says how to measure the program with enough runs.
    let compare = memrel()
        .arg("compare")
        .arg(&results)
        .arg(&results)
        .arg("--out")
        .arg(work.path())
        .output()
        .expect("compare");
    assert!(compare.status.success(), "{}", streams(&compare));
    let scenario = header["scenario"].as_str().expect("scenario").to_string();
    let entry = work.path().join("baselines/attached").join(&scenario);
    std::fs::create_dir_all(&entry).expect("entry");
    for file in ["runs.json", "samples.csv", "events.csv", "summary.json"] {
        std::fs::copy(results.join(file), entry.join(file)).expect(file);
    }
    let check = memrel()
        .args(["check", "--baseline", "attached", "--out"])
        .arg(work.path())
        .arg(&results)
        .output()
        .expect("check");
    assert_eq!(check.status.code(), Some(2), "{}", streams(&check));
    assert!(
        stderr(&check).contains("too few runs: use --repeat 3")
            && stderr(&check).contains("memrel exec --repeat 3 --save-baseline attached"),
        "{}",
        streams(&check)
    );
    // Without a directory, check would re-run the baseline's scenarios: an
    // attached process cannot be started again, and check says so.
    let rerun = memrel()
        .args(["check", "--baseline", "attached", "--out"])
        .arg(work.path())
        .output()
        .expect("check");
    assert_eq!(rerun.status.code(), Some(2), "{}", streams(&rerun));
    assert!(
        stderr(&rerun).contains("measured by memrel attach"),
        "{}",
        stderr(&rerun)
    );
}

#[test]
fn log_lines_that_match_mark_on_mark_phases_across_a_rotation() {
    let work = tempfile::tempdir().expect("tempdir");
    let results = work.path().join("results");
    let mut program = start_program(work.path(), LOGS_AND_ROTATES);
    let log = work.path().join("app.log");
    let log_arg = log.to_str().expect("utf-8 temp dir");
    let attach = start_attach(
        &results,
        program.id(),
        &[
            "--log",
            log_arg,
            // Logged before memrel attached: history, never a mark.
            "--mark-on",
            "starting up=warmup",
            "--mark-on",
            r"loading model \w+=load",
            "--mark-on",
            "unloaded=unload",
            "--mark-on",
            "INFO finished=end",
        ],
    );
    touch(work.path(), "go");
    let output = finish(attach);
    program.wait().expect("the program ends");
    assert!(output.status.success(), "{}", streams(&output));
    assert_eq!(
        phase_edges(&results),
        ["load begin", "load end", "unload begin", "unload end"]
    );
    let notes: Vec<String> = edges(&results).into_iter().map(|e| e.3).collect();
    assert!(
        notes[0].contains("--mark-on #2") && notes[0].contains("INFO loading model bert"),
        "{notes:?}"
    );
    let (held_mib, freed_mib) = held_and_freed_at_unload_mib(&results);
    assert!(
        held_mib - freed_mib >= 95.0,
        "held at the unload {held_mib:.1}, after it {freed_mib:.1}"
    );
    // The rotation is in the record (and nothing logged after it was missed:
    // the unload and end lines are in the new file).
    let checks = runs(&results)[0]["checks"].to_string();
    assert!(
        checks.contains("log followed") && checks.contains("rotated"),
        "{checks}"
    );
    assert!(!checks.contains("truncated"), "{checks}");
    assert_eq!(
        runs_json(&results)["header"]["attached"]["log"].as_str(),
        Some(log_arg)
    );
    assert_intact(&results, 1);
}

/// Holds 60 MiB from its start; takes 100 MiB more once `go` exists;
/// frees all of it once `free` exists; exits once `exit` exists.
const HOLDS_THEN_FREES_ALL: &str = r#"
import os, sys, time
d = sys.argv[1]
def wait(name):
    while not os.path.exists(os.path.join(d, name)):
        time.sleep(0.005)
def say(name):
    open(os.path.join(d, name), "w").close()
def touched(mib):
    b = bytearray(mib << 20)
    for i in range(0, len(b), 4096):
        b[i] = 1
    return b
cache = touched(60)
say("ready")
wait("go")
model = touched(100)
say("allocated")
wait("free")
del cache, model
say("freed")
wait("exit")
"#;

/// Issue 47, item 4: a log line read after the program acted ("Unloading
/// model" read once everything was freed, the extreme of a program that
/// frees as it logs) gives a cycle whose loaded is below its baseline:
/// flagged on the console and in summary.json, never "gives back".
#[test]
fn a_log_line_read_after_the_program_acted_is_flagged_not_judged() {
    let work = tempfile::tempdir().expect("tempdir");
    let results = work.path().join("results");
    let log = work.path().join("app.log");
    std::fs::write(&log, "").expect("log");
    let log_arg = log.to_str().expect("utf-8 temp dir");
    let mut program = start_program(work.path(), HOLDS_THEN_FREES_ALL);
    let attach = start_attach(
        &results,
        program.id(),
        &[
            "--log",
            log_arg,
            "--mark-on",
            "Loading model=load",
            "--mark-on",
            "Unloading model=unload",
            "--mark-on",
            "Unloaded=end",
        ],
    );
    let append = |line: &str| {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&log)
            .expect("log");
        writeln!(f, "{line}").expect("log line");
    };
    let has_edge = |phase: &str, edge: &str| {
        phase_edges(&results)
            .iter()
            .any(|e| e == &format!("{phase} {edge}"))
    };
    append("INFO Loading model");
    wait_for("the load's begin edge", || {
        results.join("events.csv").exists() && has_edge("load", "begin")
    });
    touch(work.path(), "go");
    wait_for("the allocation", || work.path().join("allocated").exists());
    touch(work.path(), "free");
    wait_for("the free", || work.path().join("freed").exists());
    append("INFO Unloading model");
    wait_for("the unload's begin edge", || has_edge("unload", "begin"));
    append("INFO Unloaded");
    wait_for("the unload's end edge", || has_edge("unload", "end"));
    touch(work.path(), "exit");
    let output = finish(attach);
    program.wait().expect("the program ends");
    assert!(output.status.success(), "{}", streams(&output));
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("loaded at or below the baseline in 1 of 1 cycle"),
        "{stdout}"
    );
    assert!(!stdout.contains("gives back"), "{stdout}");
    let summary = summary(&results);
    let host = summary["strategies"][0]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["resource"] == "host")
        .expect("host")
        .clone();
    assert!(
        host["context"]
            .as_str()
            .is_some_and(|c| c.contains("a log line has no handshake")),
        "{host}"
    );
    // Each log edge says how it was read.
    assert!(edges(&results)
        .iter()
        .all(|e| e.3.contains("the reading before the line was read")));
}

#[test]
fn sigterm_or_duration_end_the_measurement_with_results_and_exit_0() {
    let work = tempfile::tempdir().expect("tempdir");
    let mut sleeper = Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("sleep starts");
    let pid = sleeper.id();

    let by_signal = work.path().join("by-signal");
    let attach = start_attach(&by_signal, pid, &["--no-tree"]);
    mark_ok(&by_signal, "load");
    let kill = Command::new("kill")
        .arg("-TERM")
        .arg(attach.id().to_string())
        .status()
        .expect("kill starts");
    assert!(kill.success());
    let output = finish(attach);
    assert!(output.status.success(), "{}", streams(&output));
    let header = &runs_json(&by_signal)["header"];
    assert_eq!(header["attached"]["ended"], "memrel received SIGTERM");
    assert_eq!(header["sampler"], "procfs-statm");
    // The phase a mark opened is closed where the measurement ended.
    assert_eq!(phase_edges(&by_signal), ["load begin", "load end"]);
    assert!(!by_signal.join("live").exists());
    assert_intact(&by_signal, 1);

    let by_duration = work.path().join("by-duration");
    let output = memrel()
        .arg("attach")
        .arg("--dir")
        .arg(&by_duration)
        .args(["--duration", "0.5"])
        .arg(pid.to_string())
        .output()
        .expect("memrel starts");
    assert!(output.status.success(), "{}", streams(&output));
    let header = &runs_json(&by_duration)["header"];
    let ended = header["attached"]["ended"].as_str().unwrap_or("");
    assert!(ended.starts_with("--duration"), "{ended}");
    assert!(
        alive(i64::from(pid)),
        "memrel must not stop the process it attached to"
    );
    let _ = sleeper.kill();
    let _ = sleeper.wait();
}

/// stderr of a memrel that must exit 2.
fn fails_with_2(args: &[&str]) -> String {
    let output = memrel().args(args).output().expect("memrel starts");
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    stderr(&output)
}

#[test]
fn a_pid_that_does_not_exist_is_an_error_naming_it() {
    // No pid reaches pid_max: it never exists.
    let pid_max = std::fs::read_to_string("/proc/sys/kernel/pid_max").expect("pid_max");
    let pid_max = pid_max.trim();
    let err = fails_with_2(&["attach", pid_max]);
    assert!(
        err.contains(&format!("no process with pid {pid_max}")),
        "{err}"
    );
}

#[test]
fn another_users_process_is_an_error_saying_memrel_needs_that_user_or_root() {
    // As root, memrel runs as nobody (setpriv) against a process of root's;
    // as another user, against pid 1 (root's). The rule itself is unit-tested
    // with other uids (attach::target).
    let mut sleeper = Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("sleep starts");
    let root = rustix::process::geteuid().is_root();
    let output = if root {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_memrel"))
            .arg("attach")
            .arg(sleeper.id().to_string())
            .output()
            .expect("setpriv (util-linux) is needed to run memrel as another user when the tests run as root")
    } else {
        memrel()
            .args(["attach", "1"])
            .output()
            .expect("memrel starts")
    };
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    let err = stderr(&output);
    assert!(err.contains("belongs to another user (uid 0)"), "{err}");
    assert!(err.contains("needs the same user or root"), "{err}");
}

#[test]
fn bad_flags_and_dirs_are_errors_that_name_them_and_record_nothing() {
    let work = tempfile::tempdir().expect("tempdir");
    let log = work.path().join("app.log");
    std::fs::write(&log, "").expect("write the log");
    let log_arg = log.to_str().expect("utf-8 temp dir");
    let me = std::process::id().to_string();
    let out = work.path().join("out");
    let out_arg = out.to_str().expect("utf-8 temp dir");
    let attach_logging = |log: &str, mark_on: &str| {
        fails_with_2(&[
            "attach",
            "--out",
            out_arg,
            "--log",
            log,
            "--mark-on",
            mark_on,
            &me,
        ])
    };

    let err = attach_logging(log_arg, "load(=load");
    assert!(
        err.contains("--mark-on \"load(=load\"") && err.contains("not a valid regex"),
        "{err}"
    );
    let err = attach_logging(log_arg, "x=lunch");
    assert!(
        err.contains("unknown phase \"lunch\"") && err.contains("load, forward"),
        "{err}"
    );
    let missing = work.path().join("missing.log");
    let missing_arg = missing.to_str().expect("utf-8 temp dir");
    let err = attach_logging(missing_arg, "x=load");
    assert!(
        err.contains(&format!("--log {missing_arg}: no such file")),
        "{err}"
    );
    let err = fails_with_2(&["attach", "--out", out_arg, "--mark-on", "x=load", &me]);
    assert!(err.contains("--log"), "{err}");
    assert!(!out.exists(), "a refused attach made {}", out.display());

    let not_empty = work.path();
    let err = fails_with_2(&["attach", "--dir", not_empty.to_str().expect("utf-8"), &me]);
    assert!(err.contains("not an empty directory"), "{err}");

    let err = fails_with_2(&["mark", not_empty.to_str().expect("utf-8"), "load"]);
    assert!(err.contains("no live measurement in"), "{err}");
    let err = fails_with_2(&["mark", not_empty.to_str().expect("utf-8"), "loaded"]);
    assert!(err.contains("unknown phase \"loaded\""), "{err}");
    let nowhere: PathBuf = work.path().join("nowhere");
    let err = fails_with_2(&["mark", nowhere.to_str().expect("utf-8"), "load"]);
    assert!(err.contains("is not a directory"), "{err}");
}

/// Reads its 32 MiB model file into the page cache when told (`read`) and
/// drops it from the cache when told (`evict`).
const CACHES_ITS_MODEL_FILE: &str = r#"
import os, sys, time
d = sys.argv[1]
path = os.path.join(d, "model.safetensors")
with open(path, "wb") as f:
    f.write(os.urandom(32 << 20))
def evict():
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
def wait(name):
    while not os.path.exists(os.path.join(d, name)):
        time.sleep(0.005)
def say(name):
    open(os.path.join(d, name), "w").close()
evict()
say("ready")
wait("read")
with open(path, "rb") as f:
    while f.read(1 << 20):
        pass
say("was-read")
wait("evict")
evict()
say("evicted")
wait("exit")
"#;

/// `--model-files`: the page cache of the files named is read at every
/// mark (a program's files are not memrel's to guess).
#[test]
fn the_page_cache_of_the_model_files_named_is_read_at_every_mark() {
    let work = tempfile::tempdir().expect("tempdir");
    let results = work.path().join("results");
    let mut program = start_program(work.path(), CACHES_ITS_MODEL_FILE);
    let model = work.path().join("model.safetensors");
    let missing = memrel()
        .args(["attach", "--model-files", "/nonexistent/model.safetensors"])
        .arg(program.id().to_string())
        .output()
        .expect("memrel starts");
    assert_eq!(missing.status.code(), Some(2), "{}", streams(&missing));
    assert!(
        stderr(&missing).contains("--model-files /nonexistent/model.safetensors: no such file"),
        "{}",
        stderr(&missing)
    );
    let attach = start_attach(
        &results,
        program.id(),
        &["--model-files", model.to_str().expect("utf-8 temp dir")],
    );
    mark_ok(&results, "load");
    touch(work.path(), "read");
    wait_for("the read", || work.path().join("was-read").exists());
    mark_ok(&results, "unload");
    touch(work.path(), "evict");
    wait_for("the eviction", || work.path().join("evicted").exists());
    mark_ok(&results, "end");
    touch(work.path(), "exit");
    let output = finish(attach);
    program.wait().expect("the program ends");
    assert!(output.status.success(), "{}", streams(&output));
    let cached: Vec<(String, f64)> = csv_rows(&results.join("events.csv"))
        .into_iter()
        .map(|r| {
            let bytes: f64 = r["page_cache_bytes"]
                .parse()
                .expect("page cache at every edge");
            (format!("{} {}", r["phase"], r["edge"]), bytes / MIB)
        })
        .collect();
    let at = |edge: &str| cached.iter().find(|(e, _)| e == edge).expect(edge).1;
    assert!(at("load begin") < 1.0, "{cached:?}");
    assert!(at("unload begin") > 31.0, "{cached:?}");
    assert!(at("unload end") < 1.0, "{cached:?}");
}

#[test]
fn budgets_given_to_attach_are_kept_and_judged_by_check() {
    let work = tempfile::tempdir().expect("tempdir");
    let mut sleeper = Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("sleep starts");
    let pid = sleeper.id().to_string();
    // One cycle, marked: load, unload, end; then SIGTERM ends it.
    let attach = |name: &str, budget: &str| {
        let dir = work.path().join(name);
        let child = start_attach(&dir, sleeper.id(), &["--budget", budget]);
        for phase in ["load", "unload", "end"] {
            mark_ok(&dir, phase);
        }
        let kill = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status()
            .expect("kill starts");
        assert!(kill.success());
        (dir.clone(), finish(child))
    };
    let check = |dir: &Path| {
        memrel()
            .args(["check", "--baseline", "b", "--lenient", "--out"])
            .arg(work.path())
            .arg(dir)
            .output()
            .expect("memrel starts")
    };
    // No process has a peak of 0 MiB: over; none of a sleep reaches 64 GiB.
    let (over, output) = attach("over", "max_peak_mib=0");
    assert!(output.status.success(), "{}", streams(&output));
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        out.contains("budget (host): max_peak_mib = 0.0 MiB") && out.contains("over-budget"),
        "{out}"
    );
    let checked = check(&over);
    assert_eq!(checked.status.code(), Some(1), "{}", streams(&checked));
    let (within, output) = attach("within", "max_peak_mib=65536");
    assert!(output.status.success(), "{}", streams(&output));
    let checked = check(&within);
    assert_eq!(checked.status.code(), Some(0), "{}", streams(&checked));
    // A key no scenario knows: exit 2 naming the flag, nothing written.
    let bad = work.path().join("bad");
    let output = memrel()
        .arg("attach")
        .arg("--dir")
        .arg(&bad)
        .args(["--budget", "max_peek_mib=1", &pid])
        .output()
        .expect("memrel starts");
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    assert!(
        stderr(&output).contains("--budget \"max_peek_mib=1\": unknown field `max_peek_mib`"),
        "{}",
        streams(&output)
    );
    assert!(!bad.exists());
}

/// Issue 49: a budget per mechanism (`max_retained_<mechanism>_mib`) is a
/// budget like any other. Attached, a program that keeps 200 MiB in a
/// bytearray through the unload is over its anonymous memory's budget and
/// within its shared memory's; a budget on free malloc chunks, which no
/// view separates in a process that sends none, is an error, never a pass.
#[test]
fn a_budget_per_mechanism_is_judged_and_one_nothing_separates_is_an_error() {
    let work = tempfile::tempdir().expect("tempdir");
    let results = work.path().join("results");
    let mut program = start_program(work.path(), ALLOCATES_200_MIB);
    let attach = start_attach(
        &results,
        program.id(),
        &[
            "--budget",
            "max_retained_other_anon_mib=100",
            "--budget",
            "max_retained_shared_memory_mib=100",
            "--budget",
            "max_retained_free_chunks_mib=100",
        ],
    );
    mark_ok(&results, "load");
    touch(work.path(), "go");
    wait_for("the allocation", || work.path().join("allocated").exists());
    mark_ok(&results, "unload");
    mark_ok(&results, "end");
    touch(work.path(), "free");
    touch(work.path(), "exit");
    let output = finish(attach);
    program.wait().expect("the program ends");
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    let line = |needle: &str| {
        out.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in\n{out}"))
            .to_string()
    };
    let anon = line("max_retained_other_anon_mib = 100.0 MiB");
    assert!(
        anon.starts_with("budget (host): other anonymous: ") && anon.ends_with(": over-budget"),
        "{anon}"
    );
    let worst: f64 = anon
        .split("worst of 1 runs ")
        .nth(1)
        .and_then(|s| s.split(" MiB").next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{anon}"));
    assert!((190.0..215.0).contains(&worst), "{anon}");
    assert!(line("max_retained_shared_memory_mib").ends_with(": no-change"));
    let chunks = line("max_retained_free_chunks_mib");
    assert!(
        chunks.ends_with(": error")
            && chunks.contains("no run's views separate free malloc chunks"),
        "{chunks}"
    );
    assert!(
        stderr(&output).contains("1 of the budgets could not be judged"),
        "{}",
        streams(&output)
    );
    // `memrel check` judges the same rows: the error wins (exit 2).
    let checked = memrel()
        .args(["check", "--baseline", "b", "--lenient", "--out"])
        .arg(work.path())
        .arg(&results)
        .output()
        .expect("memrel starts");
    assert_eq!(checked.status.code(), Some(2), "{}", streams(&checked));
    assert!(
        stderr(&checked).contains("budget max_retained_free_chunks_mib (host) was not checked"),
        "{}",
        streams(&checked)
    );
}
