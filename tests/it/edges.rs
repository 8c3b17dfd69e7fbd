//! The one edge reader, cell by cell: a real python3 program that acts right
//! after every edge (allocates as its load begins, frees as its unload
//! begins) and writes down its own reading just before each edge. Every
//! edge memrel records must equal the program's own reading (within 1 MiB),
//! never what the program did right after: the handshake makes the program
//! wait until memrel has read the edge.

use super::common::*;

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
fn edges_and_own(
    args: &[&str],
    column: &str,
) -> (Vec<(String, String, f64)>, Vec<(String, String, f64, f64)>) {
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
    edges: &[(String, String, f64)],
    own: &[(String, String, f64, f64)],
    pick: impl Fn(&(String, String, f64, f64)) -> f64,
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
