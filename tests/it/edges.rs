//! The one edge reader, cell by cell: a real python3 program that acts right
//! after every edge (allocates as its load begins, frees as its unload
//! begins) and writes down its own reading just before each edge. Every
//! edge memrel records must equal the program's own reading (within 1 MiB),
//! never what the program did right after: the handshake makes the program
//! wait until memrel has read the edge.

use super::common::*;

/// memrel's edge: (phase, edge, bytes).
type EdgeRead = (String, String, f64);

/// The program's own reading before an edge: (phase, edge, rss, pss_anon).
type OwnRead = (String, String, f64, f64);

/// The program: two cycles of load (64 MiB allocated at once after the
/// begin edge) and unload (freed at once after its begin edge); its own
/// readings (statm RSS and smaps_rollup's Pss_Anon, bytes) before each edge
/// go to `readings.json` beside it.
const ACTS_RIGHT_AFTER_EACH_EDGE: &str = r#"
import json, os, sys
import memrel

PAGE = os.sysconf("SC_PAGE_SIZE")
readings = []

def own():
    with open("/proc/self/statm") as f:
        rss = int(f.read().split()[1]) * PAGE
    pss_anon = 0
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss_Anon:"):
                pss_anon = int(line.split()[1]) * 1024
    return rss, pss_anon

def edge(kind, phase):
    rss, pss = own()
    readings.append({"phase": phase, "edge": kind, "rss": rss, "pss": pss})
    (memrel.begin if kind == "begin" else memrel.end)(phase, model="blob")

blob = None
for cycle in range(2):
    edge("begin", "load")
    blob = bytearray(64 << 20)
    for i in range(0, len(blob), 4096):
        blob[i] = 1
    edge("end", "load")
    edge("begin", "unload")
    blob = None
    edge("end", "unload")

with open(os.path.join(os.path.dirname(sys.argv[0]), "readings.json"), "w") as f:
    json.dump(readings, f)
"#;

/// Runs the program under `memrel exec ARGS`; returns memrel's edges
/// (phase, edge, `column` bytes) and the program's own readings (phase,
/// edge, rss, pss_anon), in order.
fn edges_and_own(args: &[&str], column: &str) -> (Vec<EdgeRead>, Vec<OwnRead>) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = tmp.path().join("prog.py");
    std::fs::write(&path, ACTS_RIGHT_AFTER_EACH_EDGE).expect("write prog.py");
    let mut command = memrel();
    command.arg("exec").arg("--out").arg(tmp.path()).args(args);
    command.arg("--").arg("python3").arg(&path);
    let output = command.output().expect("memrel starts");
    assert!(output.status.success(), "{}", streams(&output));
    let dir = only_results_dir(tmp.path(), "exec");
    let edges = csv_rows(&dir.join("events.csv"))
        .into_iter()
        .map(|r| {
            let bytes: f64 = r[column].parse().expect("a byte count");
            (r["phase"].clone(), r["edge"].clone(), bytes)
        })
        .collect();
    let own = read_json(&tmp.path().join("readings.json"));
    let own = own
        .as_array()
        .expect("a list")
        .iter()
        .map(|r| {
            let n = |k: &str| r[k].as_f64().expect("a number");
            let s = |k: &str| r[k].as_str().expect("a string").to_string();
            (s("phase"), s("edge"), n("rss"), n("pss"))
        })
        .collect();
    (edges, own)
}

/// Every edge of memrel's equals the program's own reading (`pick`: RSS or
/// PSS) within 1 MiB; a reading taken after the program acted would be
/// 64 MiB off.
fn assert_edges_are_the_programs_own(
    edges: &[EdgeRead],
    own: &[OwnRead],
    pick: impl Fn(&OwnRead) -> f64,
) {
    assert_eq!(edges.len(), own.len(), "{edges:?}\n{own:?}");
    for (e, o) in edges.iter().zip(own) {
        assert_eq!((&e.0, &e.1), (&o.0, &o.1), "{edges:?}\n{own:?}");
        let (memrel_mib, own_mib) = (e.2 / MIB, pick(o) / MIB);
        assert!(
            (memrel_mib - own_mib).abs() <= 1.0,
            "{} {}: memrel read {memrel_mib:.2} MiB, the program {own_mib:.2} MiB\n{edges:?}\n{own:?}",
            e.0,
            e.1
        );
    }
}

#[test]
fn exec_reads_each_edge_before_the_program_acts() {
    let (edges, own) = edges_and_own(&[], "rss_bytes");
    assert_edges_are_the_programs_own(&edges, &own, |o| o.2);
}

/// Under `--tree` the parent reads the tree's PSS at each edge (it replaces
/// the program's own statm): without the handshake the program has already
/// allocated or freed by then. Compared on anonymous memory (`Pss_Anon`):
/// the whole PSS also holds shares of libraries that other processes on the
/// machine map and unmap meanwhile (the tests run side by side).
#[test]
fn exec_tree_reads_each_edge_before_the_program_acts() {
    let (edges, own) = edges_and_own(&["--tree"], "anon_bytes");
    assert_edges_are_the_programs_own(&edges, &own, |o| o.3);
}

/// Started outside memrel and measured by `memrel attach`: two cycles of
/// load (64 MiB allocated at once after the mark) and unload (freed at once),
/// then `end`. Its own anonymous memory (`Pss_Anon`) before each mark, once
/// per edge the mark makes (it ends the open phase and begins its own), goes
/// to `expected.json`. Mode `mark`: it asks the test to run `memrel mark`
/// and acts as soon as that returns (the mark's handshake). Mode `log`: it
/// writes a log line and acts 0.2 s later (a log line has no handshake).
const MARKED_FROM_OUTSIDE: &str = r#"
import json, os, sys, time
d, mode = sys.argv[1], sys.argv[2]
state = os.environ.get("FAKE_NVML_STATE")
vram = 0

def hold(mib):
    # Its VRAM, as the fake NVML lists it (where the test gave one).
    global vram
    vram = mib << 20
    if state:
        with open(state + ".tmp", "w") as f:
            f.write("0 %d %d\n" % (os.getpid(), vram))
        os.rename(state + ".tmp", state)

def own_anon():
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss_Anon:"):
                return int(line.split()[1]) * 1024
    return 0

def wait(name):
    while not os.path.exists(os.path.join(d, name)):
        time.sleep(0.002)

def say(name):
    open(os.path.join(d, name), "w").close()

expected, open_phase, n = [], None, 0

def mark(phase):
    global open_phase, n
    anon = own_anon()
    if open_phase:
        expected.append([open_phase, "end", anon, vram])
    if phase != "end":
        expected.append([phase, "begin", anon, vram])
    open_phase = None if phase == "end" else phase
    n += 1
    if mode == "mark":
        say("mark-%d-%s" % (n, phase))
        wait("marked-%d" % n)
    else:
        with open(os.path.join(d, "app.log"), "a") as f:
            f.write("EDGE %s\n" % phase)
        time.sleep(0.2)

hold(100)
say("ready")
wait("go")
blob = None
for cycle in range(2):
    mark("load")
    blob = bytearray(64 << 20)
    for i in range(0, len(blob), 4096):
        blob[i] = 1
    hold(300)
    mark("unload")
    blob = None
    hold(100)
mark("end")
with open(os.path.join(d, "expected.json"), "w") as f:
    json.dump(expected, f)
say("done")
wait("exit")
"#;

/// Attaches to [`MARKED_FROM_OUTSIDE`] in `mode`; returns memrel's edges
/// (phase, edge, anon bytes) and the program's own, in order.
fn attached(mode: &str) -> (Vec<EdgeRead>, Vec<OwnRead>) {
    attached_reading(mode, false)
}

/// [`attached`]; with `fake_gpu`, the program holds VRAM on a fake NVML's
/// GPU (`fake_nvml`), memrel attaches with `--device cuda`, and the bytes
/// compared are VRAM's (the own reading's both numbers are its VRAM).
fn attached_reading(mode: &str, fake_gpu: bool) -> (Vec<EdgeRead>, Vec<OwnRead>) {
    use std::process::{Command, Stdio};
    let work = tempfile::tempdir().expect("tempdir");
    let d = work.path();
    let results = d.join("results");
    std::fs::write(d.join("app.log"), "").expect("app.log");
    std::fs::write(d.join("prog.py"), MARKED_FROM_OUTSIDE).expect("prog.py");
    let state = d.join("nvml-state");
    std::fs::write(&state, "").expect("nvml state");
    let mut program = Command::new("python3");
    if fake_gpu {
        program.env("FAKE_NVML_STATE", &state);
    }
    let mut program = program
        .arg(d.join("prog.py"))
        .arg(d)
        .arg(mode)
        .stdin(Stdio::null())
        .spawn()
        .expect("python3 starts");
    wait_for("the program to start", || d.join("ready").exists());
    let mut attach = memrel();
    attach
        .arg("attach")
        .arg("--dir")
        .arg(&results)
        .args(["--interval-ms", "20"]);
    if fake_gpu {
        attach
            .env("LD_LIBRARY_PATH", super::fake_nvml::fake_nvml_dir())
            .env("FAKE_NVML_STATE", &state)
            .args(["--device", "cuda"]);
    }
    if mode == "log" {
        attach.arg("--log").arg(d.join("app.log"));
        for phase in ["load", "unload", "end"] {
            attach
                .arg("--mark-on")
                .arg(format!("^EDGE {phase}$={phase}"));
        }
    }
    let attach = attach
        .arg(program.id().to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("memrel starts");
    wait_for("memrel attach to go live", || results.join("live").exists());
    std::fs::write(d.join("go"), "").expect("go");
    let mut n = 0;
    while !d.join("done").exists() {
        let next = ["load", "unload", "end"]
            .into_iter()
            .find(|p| d.join(format!("mark-{}-{p}", n + 1)).exists());
        match next {
            Some(phase) if mode == "mark" => {
                let output = memrel()
                    .arg("mark")
                    .arg(&results)
                    .arg(phase)
                    .output()
                    .expect("memrel mark starts");
                assert!(output.status.success(), "{}", streams(&output));
                n += 1;
                std::fs::write(d.join(format!("marked-{n}")), "").expect("marked");
            }
            _ => std::thread::sleep(std::time::Duration::from_millis(2)),
        }
    }
    std::fs::write(d.join("exit"), "").expect("exit");
    let mut attach = attach;
    wait_with_limit(&mut attach, std::time::Duration::from_secs(60));
    let output = attach.wait_with_output().expect("memrel's output");
    program.wait().expect("the program ends");
    assert!(output.status.success(), "{}", streams(&output));
    let edges = csv_rows(&results.join("events.csv"))
        .into_iter()
        .map(|r| {
            let column = if fake_gpu { "vram_bytes" } else { "anon_bytes" };
            let bytes: f64 = r[column].parse().expect(column);
            (r["phase"].clone(), r["edge"].clone(), bytes)
        })
        .collect();
    let own = read_json(&d.join("expected.json"))
        .as_array()
        .expect("a list")
        .iter()
        .map(|r| {
            let s = |i: usize| r[i].as_str().expect("a string").to_string();
            let bytes = r[if fake_gpu { 3 } else { 2 }].as_f64().expect("bytes");
            (s(0), s(1), bytes, bytes)
        })
        .collect();
    (edges, own)
}

/// `memrel mark` returns once the attach has read its edge: the program
/// allocates (or frees) as soon as it returns, and no edge holds it.
#[test]
fn attach_with_memrel_mark_reads_each_edge_before_the_program_acts() {
    let (edges, own) = attached("mark");
    assert_edges_are_the_programs_own(&edges, &own, |o| o.2);
}

/// The same with VRAM (a fake NVML's GPU, `fake_nvml`): every mark's VRAM
/// is what the program held when it asked for the mark, exactly.
#[test]
fn attach_with_memrel_mark_reads_the_vram_at_each_edge_exactly() {
    let (edges, own) = attached_reading("mark", true);
    assert_eq!(edges.len(), own.len(), "{edges:?}\n{own:?}");
    for (e, o) in edges.iter().zip(&own) {
        assert_eq!((&e.0, &e.1, e.2), (&o.0, &o.1, o.2), "{edges:?}\n{own:?}");
    }
}

/// A log line wakes the attach at once (inotify): read well before the
/// program acts 0.2 s later, however busy the machine.
#[test]
fn attach_with_log_marks_reads_each_edge_as_the_line_is_written() {
    let (edges, own) = attached("log");
    assert_edges_are_the_programs_own(&edges, &own, |o| o.2);
}
