//! Shared memory, the catalogue's resource (`sampler::resources::shm`): a
//! real python3 program that puts a segment into shared memory as each
//! load begins and, at each unload, either unlinks it or leaves it there (as
//! a `multiprocessing.shared_memory` segment nobody unlinked stays). Each
//! test has a shared-memory directory of its own (`MEMREL_SHM_DIR`; the
//! machine's /dev/shm is every test's): the leak must be retained and the
//! clean program not, and a budget on `shm` must judge it. Each edge against
//! the program's own reading is the truth matrix's (`matrix::shm_*`).

use std::path::Path;

use super::common::*;

/// The program: two cycles of load (an 8 MiB file written to
/// `$MEMREL_SHM_DIR` right after the begin edge) and unload (unlinked right
/// after the begin edge, unless argv[2] is `leak`). argv[1] names its files
/// (`<name>-<pid>-<cycle>`).
const SHM_PROGRAM: &str = r#"
import os, sys
import memrel

tag, mode = sys.argv[1], sys.argv[2]

def edge(kind, phase):
    (memrel.begin if kind == "begin" else memrel.end)(phase, model="segment")

for cycle in range(2):
    path = os.path.join(os.environ["MEMREL_SHM_DIR"], f"{tag}-{os.getpid()}-{cycle}")
    edge("begin", "load")
    with open(path, "wb") as f:
        f.write(b"\x01" * (8 << 20))
    edge("end", "load")
    edge("begin", "unload")
    if mode != "leak":
        os.unlink(path)
    edge("end", "unload")
"#;

/// Runs the program under `memrel exec` in `mode`, with its shared memory
/// in a directory of its own (`MEMREL_SHM_DIR`: the machine's /dev/shm is
/// every test's); the results directory.
fn exec_program(tmp: &Path, mode: &str, args: &[&str]) -> std::path::PathBuf {
    let shm = tmp.join("shm");
    std::fs::create_dir(&shm).expect("shm dir");
    let path = tmp.join("prog.py");
    std::fs::write(&path, SHM_PROGRAM).expect("write prog.py");
    let program_args = ["segment", mode].map(std::ffi::OsStr::new);
    let output = exec_python(tmp, ("MEMREL_SHM_DIR", &shm), args, &path, &program_args);
    assert!(output.status.success(), "{}", streams(&output));
    only_results_dir(tmp, "exec")
}

/// Resource `key` of the first strategy in summary.json.
fn resource_summary(dir: &Path, key: &str) -> serde_json::Value {
    let summary = read_json(&dir.join("summary.json"));
    summary["strategies"][0]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["resource"] == key)
        .unwrap_or_else(|| panic!("no {key} resource in {summary}"))
        .clone()
}

/// A program that leaves its segments behind retains them: the summary
/// says so and the header names the probe (each edge's reading is the
/// truth matrix's, `matrix::shm_*`).
#[test]
fn a_program_that_leaves_its_segments_retains_them() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = exec_program(tmp.path(), "leak", &[]);
    let shm = resource_summary(&dir, "shm");
    let retained = shm["retained_bytes"]["median"].as_f64().expect("retained");
    // Two 8 MiB segments left behind: 16 MiB after the second unload.
    assert!(retained == 16.0 * 1024.0 * 1024.0, "{shm}");
    let runs = read_json(&dir.join("runs.json"));
    assert_eq!(runs["header"]["probed"][0]["key"], "shm", "{runs}");
}

#[test]
fn a_program_that_unlinks_its_segments_retains_no_shared_memory() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = exec_program(tmp.path(), "clean", &[]);
    let shm = resource_summary(&dir, "shm");
    let retained = shm["retained_bytes"]["median"].as_f64().expect("retained");
    assert_eq!(retained, 0.0, "{shm}");
    // Loaded (an edge's reading, not a sample's) held the segment.
    let loaded = shm["loaded_bytes"]["median"].as_f64().expect("loaded");
    let baseline = shm["baseline_bytes"]["median"].as_f64().expect("baseline");
    assert_eq!(loaded - baseline, 8.0 * 1024.0 * 1024.0, "{shm}");
}

#[test]
fn a_budget_on_shared_memory_fails_the_leak_and_passes_the_clean_program() {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(tmp.path().join("prog.py"), SHM_PROGRAM).expect("write prog.py");
    let out = tmp.path().join("out");
    for (mode, regressed) in [("leak", true), ("clean", false)] {
        let shm = tmp.path().join(format!("shm-{mode}"));
        std::fs::create_dir(&shm).expect("shm dir");
        let name = format!("shm-{mode}");
        let scenario = write_scenario(
            tmp.path(),
            &name,
            &format!(
                "description = \"shm budget\"\ncycles = 2\nrepeat = 3\nstrategies = [\"drop\"]\n\
                 command = [\"python3\", \"prog.py\", \"segment\", \"{mode}\"]\n\
                 [thresholds]\nmax_retained_shm_mib = 12\n"
            ),
        );
        let output = memrel()
            .env("MEMREL_SHM_DIR", &shm)
            .arg("run")
            .arg("--scenario")
            .arg(&scenario)
            .arg("--out")
            .arg(&out)
            .args(["--save-baseline", &name])
            .output()
            .expect("memrel starts");
        assert!(output.status.success(), "{}", streams(&output));
        let dir = only_results_dir(&out, &name);
        let check = check_against(&name, &out, &dir);
        let said = String::from_utf8_lossy(&check.stdout).to_string();
        assert_eq!(
            check.status.code(),
            Some(if regressed { 1 } else { 0 }),
            "{mode}: {said}"
        );
        assert!(said.contains("max_retained_shm_mib"), "{mode}: {said}");
    }
}

/// `shmem`, the catalogue's second resource (`sampler::resources::shmem`):
/// what the measured process maps of shared memory while it runs. A real
/// python3 program maps a 16 MiB `multiprocessing.shared_memory` segment
/// and writes it whole right after each load's begin edge, and closes and
/// unlinks it right after each unload's begin edge: loaded holds the
/// segment to the page, and nothing is retained.
#[test]
fn shared_memory_a_program_maps_is_its_shmem_while_mapped() {
    const PROGRAM: &str = r#"
import memrel
from multiprocessing import shared_memory

for cycle in range(2):
    memrel.begin("load", model="segment")
    seg = shared_memory.SharedMemory(create=True, size=16 << 20)
    seg.buf[:] = b"\x01" * (16 << 20)
    memrel.end("load", model="segment")
    memrel.begin("unload", model="segment")
    seg.close()
    seg.unlink()
    memrel.end("unload", model="segment")
"#;
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = tmp.path().join("prog.py");
    std::fs::write(&path, PROGRAM).expect("write prog.py");
    let output = memrel()
        .arg("exec")
        .arg("--out")
        .arg(tmp.path())
        .arg("--")
        .arg("python3")
        .arg(&path)
        .output()
        .expect("memrel starts");
    assert!(output.status.success(), "{}", streams(&output));
    let dir = only_results_dir(tmp.path(), "exec");
    let shmem = resource_summary(&dir, "shmem");
    let median = |key: &str| shmem[key]["median"].as_f64().expect(key);
    let held = median("loaded_bytes") - median("baseline_bytes");
    let mib = 1024.0 * 1024.0;
    assert!(
        (held - 16.0 * mib).abs() <= 0.25 * mib,
        "held {held}: {shmem}"
    );
    assert!(median("retained_bytes").abs() <= 0.25 * mib, "{shmem}");
    let runs = read_json(&dir.join("runs.json"));
    let probed = runs["header"]["probed"].as_array().expect("probed");
    assert!(probed.iter().any(|p| p["key"] == "shmem"), "{runs}");
}
