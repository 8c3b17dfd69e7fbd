//! A program started by a launcher that closes inherited descriptors
//! (torchrun, accelerate launch): memrel's channel is not open in it, so the
//! `memrel` module of rank 0 finds the pipe again in an ancestor
//! (`MEMREL_EVENT_PIPE`) and marks the phases; other ranks stay silent. The
//! launcher here is a real process that starts two ranks with
//! `subprocess.run(..., close_fds=True)`, as torchrun's agent does.

use super::common::*;

const LAUNCHER: &str = r#"
import os, subprocess, sys
codes = []
for rank in ("0", "1"):
    env = dict(os.environ, RANK=rank)
    codes.append(subprocess.run([sys.executable, "rank.py"], env=env, close_fds=True).returncode)
sys.exit(max(codes))
"#;

const RANK: &str = r#"
import os
fd = int(os.environ["MEMREL_EVENT_FD"])
try:
    os.fstat(fd)
    raise SystemExit("the launcher left memrel's descriptor open: this test tests nothing")
except OSError:
    pass
import memrel
with memrel.phase("load", model="m"):
    block = bytearray(32 << 20)
with memrel.phase("unload", model="m"):
    del block
memrel.release()
"#;

#[test]
fn rank_zero_behind_a_launcher_that_closes_descriptors_marks_the_phases() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("launcher.py"), LAUNCHER).unwrap();
    std::fs::write(tmp.path().join("rank.py"), RANK).unwrap();
    let out = tmp.path().join("out");
    let output = memrel()
        .current_dir(tmp.path())
        .args(["exec", "--tree", "--out"])
        .arg(&out)
        .args(["--", "python3", "launcher.py"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", streams(&output));
    assert!(
        !stderr(&output).contains("phases are not reported"),
        "{}",
        streams(&output)
    );
    let dir = only_results_dir(&out, "exec");
    let events = csv_rows(&dir.join("events.csv"));
    let loads: Vec<_> = events
        .iter()
        .filter(|e| e["phase"] == "load" && e["edge"] == "begin")
        .collect();
    assert_eq!(
        loads.len(),
        1,
        "rank 0 marked its load once; rank 1 none: {events:?}"
    );
    let releases = events
        .iter()
        .filter(|e| e["phase"] == "release" && e["edge"] == "end")
        .count();
    assert_eq!(releases, 1);
}
