//! The truth matrix's VRAM cells on a machine without a GPU: a fake NVML
//! (tests/fixtures/fake-nvml/libnvidia-ml.c, built here with `cc -shared`
//! and found first on LD_LIBRARY_PATH) lists the compute processes a text
//! file names. A real python3 program "allocates" and "frees" VRAM by
//! rewriting that file right after each edge, as a PyTorch program allocates
//! right after its load begins; memrel's edge readings must equal the
//! program's own (the file before the edge) exactly: on one GPU and on two,
//! for the program alone and for a child that holds the VRAM (`--tree`).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::common::*;

/// The fake library's directory, built once per test binary.
pub fn fake_nvml_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir").keep();
        let source =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake-nvml/libnvidia-ml.c");
        let status = std::process::Command::new("cc")
            .args(["-shared", "-fPIC", "-O1", "-o"])
            .arg(dir.join("libnvidia-ml.so.1"))
            .arg(&source)
            .status()
            .expect("cc (gcc) builds the fake NVML: install gcc");
        assert!(status.success(), "cc failed on {}", source.display());
        dir
    })
}

/// The program. argv: the state file, the number of GPUs, and `child` (a
/// child process holds the VRAM, on the last GPU) or `self`. Two cycles:
/// load (the holder goes from 100 to 300 MiB on GPU 0 right after the begin
/// edge; with two GPUs the other process holds 50 MiB more on GPU 1) and
/// unload (back at once). Before each edge it writes down what the file
/// says, per GPU, to `own.json` beside it.
const HOLDS_VRAM: &str = r#"
import json, os, subprocess, sys, time
import memrel

state, gpus, holder_kind = sys.argv[1], int(sys.argv[2]), sys.argv[3]
child = None
if holder_kind == "child":
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
holder = child.pid if child else os.getpid()
other = os.getpid() if child else None
own, now = [], {}

def hold(mib):
    now.clear()
    lines = ["0 %d %d" % (holder, mib << 20)]
    now[0] = mib << 20
    if gpus > 1:
        pid = other if other else holder
        lines.append("1 %d %d" % (pid, (mib // 2) << 20))
        now[1] = (mib // 2) << 20
    tmp = state + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.rename(tmp, state)

def edge(kind, phase):
    own.append({"phase": phase, "edge": kind, "gpus": dict(now)})
    (memrel.begin if kind == "begin" else memrel.end)(phase, model="m")

hold(100)
memrel.baseline(0.05)
for cycle in range(2):
    edge("begin", "load")
    hold(300)
    edge("end", "load")
    edge("begin", "unload")
    hold(100)
    edge("end", "unload")
with open(os.path.join(os.path.dirname(sys.argv[0]), "own.json"), "w") as f:
    json.dump(own, f)
if child:
    child.kill()
    child.wait()
"#;

/// Runs the program under `memrel exec --device cuda ARGS` against `gpus`
/// fake GPUs; memrel's edges after the baseline (phase, edge, events.csv
/// row) and the program's own readings (phase, edge, bytes per GPU).
fn measured(args: &[&str], gpus: u32, holder: &str) -> Vec<(Row, serde_json::Value)> {
    let tmp = tempfile::tempdir().expect("tempdir");
    let state = tmp.path().join("state");
    std::fs::write(&state, "").expect("state");
    let prog = tmp.path().join("prog.py");
    std::fs::write(&prog, HOLDS_VRAM).expect("prog.py");
    let output = memrel()
        .env("LD_LIBRARY_PATH", fake_nvml_dir())
        .env("FAKE_NVML_STATE", &state)
        .env("FAKE_NVML_GPUS", gpus.to_string())
        .args(["exec", "--device", "cuda", "--out"])
        .arg(tmp.path())
        .args(args)
        .arg("--")
        .arg("python3")
        .arg(&prog)
        .arg(&state)
        .args([&gpus.to_string(), holder])
        .output()
        .expect("memrel starts");
    assert!(output.status.success(), "{}", streams(&output));
    let dir = only_results_dir(tmp.path(), "exec");
    let edges: Vec<Row> = csv_rows(&dir.join("events.csv"))
        .into_iter()
        .filter(|r| r["phase"] != "baseline")
        .collect();
    let own = read_json(&tmp.path().join("own.json"));
    let own = own.as_array().expect("a list").clone();
    assert_eq!(edges.len(), own.len(), "{edges:?}\n{own:?}");
    for (e, o) in edges.iter().zip(&own) {
        assert_eq!(
            (e["phase"].as_str(), e["edge"].as_str()),
            (o["phase"].as_str().unwrap(), o["edge"].as_str().unwrap())
        );
    }
    edges.into_iter().zip(own).collect()
}

type Row = std::collections::HashMap<String, String>;

/// The program's own bytes on `gpu` before an edge.
fn own_on(own: &serde_json::Value, gpu: u32) -> u64 {
    own["gpus"][gpu.to_string()].as_u64().expect("bytes")
}

#[test]
fn exec_reads_the_programs_vram_at_each_edge_exactly() {
    for (edge, own) in measured(&[], 1, "self") {
        let vram: u64 = edge["vram_bytes"].parse().expect("vram at every edge");
        assert_eq!(vram, own_on(&own, 0), "{edge:?}");
    }
}

#[test]
fn exec_tree_reads_the_vram_a_child_holds_at_each_edge_exactly() {
    for (edge, own) in measured(&["--tree"], 1, "child") {
        let vram: u64 = edge["vram_bytes"].parse().expect("vram at every edge");
        assert_eq!(vram, own_on(&own, 0), "{edge:?}");
    }
}

#[test]
fn on_two_gpus_each_edge_reads_every_gpu_of_the_tree_exactly() {
    for (edge, own) in measured(&["--tree"], 2, "child") {
        let cell = &edge["gpu_vram"];
        let per_gpu: Vec<(u32, u64)> = cell
            .split_whitespace()
            .map(|e| {
                let (gpu, bytes) = e.split_once(':').expect("GPU:BYTES");
                let bytes = bytes.split('/').next().expect("sum");
                (gpu.parse().expect("gpu"), bytes.parse().expect("bytes"))
            })
            .collect();
        assert_eq!(
            per_gpu,
            [(0, own_on(&own, 0)), (1, own_on(&own, 1))],
            "{edge:?}"
        );
    }
}
