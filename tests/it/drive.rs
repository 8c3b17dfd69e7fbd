//! `memrel drive` against real servers of the shapes it drives, written in
//! the tests (`tests/fixtures/servers/`, plain python3 on the CPU): a
//! vLLM-shaped one whose engine child process holds the memory (sleep level
//! 1 and 2, wake), one whose sleep answers before its memory is freed, an
//! Ollama-shaped one with a runner process per model; and servers that
//! misbehave (nothing listening, refused, 500, a hang, a body that is not
//! JSON, death mid-cycle): each a message naming the request, the data so
//! far kept, exit 2. An Open-Inference-Protocol-shaped one (`--server v2`)
//! whose models live in a worker subprocess: driven end to end, its page
//! cache judged by a budget, its leader killed (no process of its tree left),
//! and a hung load stopped by SIGINT or SIGTERM (exit 130, 143).
//!
//! Every number asserted is a reading memrel took at an edge or once a
//! request settled, never a periodic sample, so a loaded machine only makes
//! the runs slower.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use super::alone::PrivatePython;
use super::common::*;

pub(super) const VLLM_LIKE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/servers/vllm_like.py"
);
pub(super) const OLLAMA_LIKE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/servers/ollama_like.py"
);
const V2_LIKE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/servers/v2_like.py"
);

/// A port nothing listens on (bound, then let go).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    listener.local_addr().expect("local addr").port()
}

/// `memrel drive --dir DIR [--out ROOT] --interval-ms 20 --grace 5 ARGS…`,
/// stdin closed.
fn drive_command<S: AsRef<OsStr>>(dir: &Path, out: Option<&Path>, args: &[S]) -> Command {
    let mut command = memrel();
    command.arg("drive").arg("--dir").arg(dir);
    if let Some(out) = out {
        command.arg("--out").arg(out);
    }
    command
        .args(["--interval-ms", "20", "--grace", "5"])
        .args(args)
        .stdin(Stdio::null());
    command
}

/// [`drive_command`] run to its end, its results under ROOT (`out`); DIR.
fn drive_into<S: AsRef<OsStr>>(dir: PathBuf, out: Option<&Path>, args: &[S]) -> (PathBuf, Output) {
    let output = drive_command(&dir, out, args)
        .output()
        .expect("memrel starts");
    (dir, output)
}

/// `memrel drive --dir DIR --interval-ms 20 ARGS…`; its results directory.
fn drive<S: AsRef<OsStr>>(work: &Path, args: &[S]) -> (PathBuf, Output) {
    drive_into(work.join("results"), None, args)
}

/// `--url URL ARGS…` of a server memrel starts on a free port, then
/// `-- python3 SCRIPT --port PORT SERVER_ARGS…`.
fn started(args: &[&str], script: &str, server_args: &[&str]) -> Vec<String> {
    let port = free_port().to_string();
    let url = format!("http://127.0.0.1:{port}");
    let flag = ["--url", url.as_str()];
    let server = ["--", "python3", script, "--port", &port];
    let all = flag.iter().chain(args).chain(&server).chain(server_args);
    all.map(|a| a.to_string()).collect()
}

/// The results directory of a drive that succeeded.
fn drove((dir, output): (PathBuf, Output)) -> PathBuf {
    assert!(output.status.success(), "{}", streams(&output));
    dir
}

/// What `memrel advise DIR` says (it must succeed).
pub(super) fn advice(dir: &Path) -> String {
    let advised = memrel()
        .arg("advise")
        .arg(dir)
        .output()
        .expect("memrel starts");
    assert!(advised.status.success(), "{}", streams(&advised));
    String::from_utf8_lossy(&advised.stdout).into_owned()
}

fn requests(dir: &Path) -> Vec<HashMap<String, String>> {
    csv_rows(&dir.join("requests.csv"))
}

fn mib(row: &HashMap<String, String>, column: &str) -> f64 {
    row[column]
        .parse::<f64>()
        .unwrap_or_else(|_| panic!("{column} is a number: {row:?}"))
        / MIB
}

/// A server the test starts (python3 SCRIPT --port 0 ARGS…), and its port.
pub(super) fn start_server(script: &str, args: &[&str]) -> (Server, u16) {
    start_server_with(&mut Command::new("python3"), script, args)
}

/// [`start_server`] with `python` (a python3 command) in place of python3.
pub(super) fn start_server_with(
    python: &mut Command,
    script: &str,
    args: &[&str],
) -> (Server, u16) {
    let mut child = python
        .arg(script)
        .args(["--port", "0"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 starts (the drive tests need python3 on PATH)");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the server says its port");
    let port = line
        .trim()
        .strip_prefix("PORT ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("not a port line: {line:?}"));
    (Server(child), port)
}

/// A server the test started: killed (SIGKILL) and reaped when dropped, so
/// a test that fails leaves none behind (holding the test's stderr, which
/// would keep a pipeline reading it open).
pub(super) struct Server(Child);

impl Server {
    pub(super) fn id(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(super) fn stop(server: Server) {
    drop(server);
}

/// Asserts memrel failed as a bad server should make it: exit 2, the
/// message naming the request, the run kept as failed with the rows so far.
fn assert_failed_keeping_data(dir: &Path, output: &Output, says: &[&str]) {
    assert_eq!(output.status.code(), Some(2), "{}", streams(output));
    let err = stderr(output);
    for s in says {
        assert!(err.contains(s), "stderr lacks {s:?}: {}", streams(output));
    }
    assert!(err.contains("what was measured so far is kept in"), "{err}");
    let run = &runs(dir)[0];
    assert_eq!(run["status"], "failed", "{run}");
    let error = run["error"].as_str().expect("the run's error");
    assert!(error.contains(says[0]), "{error}");
    let rows = requests(dir);
    let last = rows.last().expect("the failed request's row");
    assert!(last["error"].contains(says[0]), "{last:?}");
    assert_rerenders(dir);
}

/// The console's requests table as the one table writer lays it out: the
/// header, a rule as wide as the table, then one row per request, each
/// column starting where its header does (the host readings under "host
/// MiB", the VRAM column's `-` of a server without VRAM under "vram MiB").
fn assert_requests_table(out: &str, requests: usize) {
    let lines: Vec<&str> = out.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("host MiB send>answer>settled"))
        .unwrap_or_else(|| panic!("the requests table's header: {out}"));
    let header = lines[at];
    let rule = lines[at + 1];
    assert!(
        rule.len() >= header.len() && rule.chars().all(|c| c == '-'),
        "a rule under the header:\n{out}"
    );
    let host = header.find("host MiB").expect("the host column");
    let vram = header.find("vram MiB").expect("the VRAM column");
    for row in &lines[at + 2..at + 2 + requests] {
        assert!(
            row[host..].starts_with(|c: char| c.is_ascii_digit()) && &row[host - 2..host] == "  ",
            "host readings under their header:\n{out}"
        );
        assert_eq!(
            &row[vram - 2..=vram],
            "  -",
            "the VRAM column under its header:\n{out}"
        );
    }
}

#[test]
fn a_vllm_shaped_server_is_started_driven_through_sleep_levels_and_stopped() {
    for level in ["1", "2"] {
        let work = tempfile::tempdir().expect("tempdir");
        let (dir, output) = drive(
            work.path(),
            &started(
                &[
                    "--server",
                    "vllm",
                    "--sleep-level",
                    level,
                    "--cycles",
                    "2",
                    "--settle",
                    "0.5",
                ],
                VLLM_LIKE,
                &["--weights-mib", "96", "--kv-mib", "64"],
            ),
        );
        assert!(output.status.success(), "{}", streams(&output));
        let rows = requests(&dir);
        let shape: Vec<String> = rows
            .iter()
            .map(|r| format!("{} {} {}", r["cycle"], r["phase"], r["request"]))
            .collect();
        let sleep = format!("POST /sleep?level={level}");
        // The first cycle is a warm-up (cycle 0, with the server's start),
        // then the two judged cycles.
        assert_eq!(
            shape,
            [
                "0 warmup (server start) GET /health".to_string(),
                format!("0 sleep {sleep}"),
                "0 wake POST /wake_up".into(),
                format!("1 sleep {sleep}"),
                "1 wake POST /wake_up".into(),
                format!("2 sleep {sleep}"),
                "2 wake POST /wake_up".into(),
            ]
        );
        for r in &rows[1..] {
            assert_eq!(r["status"], "200", "{r:?}");
            assert!(r["latency_s"].parse::<f64>().expect("latency") > 0.0);
            // The engine frees before it answers: nothing is left late.
            assert!(mib(r, "host_late_bytes").abs() < 16.0, "{r:?}");
        }
        // Level 1 drops the KV cache (64 MiB), level 2 the weights too (160).
        let freed = mib(&rows[1], "host_send_bytes") - mib(&rows[1], "host_settled_bytes");
        // The sleep's verdict is what it freed against the reading before it.
        assert!(
            (mib(&rows[1], "host_freed_bytes") - freed).abs() < 0.01,
            "{:?}",
            rows[1]
        );
        let (low, high) = if level == "1" {
            (48.0, 90.0)
        } else {
            (140.0, 180.0)
        };
        assert!(
            (low..high).contains(&freed),
            "level {level} freed {freed:.0} MiB"
        );
        // The wake makes it again.
        let woke = mib(&rows[2], "host_settled_bytes") - mib(&rows[2], "host_send_bytes");
        assert!((low..high).contains(&woke), "the wake took {woke:.0} MiB");
        // Which process holds it: the engine child, not the API server.
        let root = runs(&dir)[0]["pid"].as_u64().expect("pid").to_string();
        let processes = csv_rows(&dir.join("processes.csv"));
        let engine_awake = processes
            .iter()
            .find(|p| p["index"] == "2" && p["pid"] != root)
            .expect("the engine after the wake");
        assert!(mib(engine_awake, "pss_bytes") > 140.0, "{engine_awake:?}");
        let server_awake = processes
            .iter()
            .find(|p| p["index"] == "2" && p["pid"] == root)
            .expect("the API server after the wake");
        assert!(mib(server_awake, "pss_bytes") < 60.0, "{server_awake:?}");
        // Phases on the record as for any run; the server stopped by SIGTERM.
        let phases: Vec<String> = csv_rows(&dir.join("events.csv"))
            .iter()
            .map(|r| format!("{} {}", r["phase"], r["edge"]))
            .collect();
        for want in [
            "sleep begin",
            "sleep end",
            "asleep begin",
            "wake begin",
            "wake end",
        ] {
            assert!(phases.iter().any(|p| p == want), "{want}: {phases:?}");
        }
        // A request waits for its begin edge's reading, nothing else does.
        for (edge, held_s) in held_by_edge(&dir.join("events.csv")) {
            let sends = ["sleep begin", "wake begin", "load begin", "unload begin"];
            if sends.contains(&edge.as_str()) {
                assert!(held_s.is_some_and(|s| s > 0.0), "{edge}: {held_s:?}");
            } else {
                assert_eq!(held_s, None, "{edge}");
            }
        }
        let out = text(&output.stdout);
        assert!(out.contains("server: killed by signal 15"), "{out}");
        assert_requests_table(&out, rows.len());
        assert!(std::fs::read_to_string(dir.join("server.log"))
            .expect("server.log")
            .contains("PORT"));
        assert_gone(root.parse().expect("pid"), "the vLLM-shaped server");
        assert_intact(&dir, 1);
    }
}

#[test]
fn a_sleep_that_frees_after_its_answer_is_reported_with_its_late_bytes() {
    let work = tempfile::tempdir().expect("tempdir");
    // A custom shape: a TOML file, no code; the server found by its port.
    let cycle = work.path().join("cycle.toml");
    std::fs::write(
        &cycle,
        r#"
ready = "GET /health"
[[request]]
phase = "sleep"
path = "/sleep?level=2"
until = { path = "/is_sleeping", pointer = "/is_sleeping", equals = true }
settle_s = 4
[[request]]
phase = "wake"
path = "/wake_up"
settle_s = 0.2
"#,
    )
    .expect("write cycle.toml");
    let (server, port) = start_server(VLLM_LIKE, &["--late-free-s", "0.5"]);
    let url = format!("http://127.0.0.1:{port}");
    let cycle_arg = cycle.to_str().expect("utf-8");
    let (dir, output) = drive(work.path(), &["--cycle", cycle_arg, "--url", &url]);
    let pid = server.id();
    let still_running = alive(i64::from(pid));
    stop(server);
    assert!(output.status.success(), "{}", streams(&output));
    assert!(still_running, "memrel stopped a server it did not start");
    assert_eq!(runs(&dir)[0]["pid"].as_u64(), Some(u64::from(pid)));
    let rows = requests(&dir);
    let sleep = &rows[0];
    assert_eq!(sleep["request"], "POST /sleep?level=2");
    // 160 MiB were still held when 200 OK came, gone once settled.
    assert!(mib(sleep, "host_late_bytes") > 140.0, "{sleep:?}");
    assert!(
        mib(sleep, "host_response_bytes") - mib(sleep, "host_send_bytes") > -16.0,
        "{sleep:?}"
    );
    let settle_s: f64 = sleep["settle_s"].parse().expect("settle_s");
    // Freed 0.5 s after the answer (later on a loaded machine), within the 4 s.
    assert!((0.3..4.0).contains(&settle_s), "settle_s {settle_s}");
    let out = text(&output.stdout);
    assert!(
        out.contains("request 1 (POST /sleep?level=2): 1")
            && out.contains("MiB host still left after the answer (late bytes)"),
        "{out}"
    );
    let checks = runs(&dir)[0]["checks"].to_string();
    assert!(checks.contains("memory left after the answer"), "{checks}");
}

#[test]
fn an_ollama_shaped_server_gets_a_runner_process_per_load_and_memory_back_after_unload() {
    let work = tempfile::tempdir().expect("tempdir");
    let dir = drove(drive(
        work.path(),
        &started(
            &[
                "--server", "ollama", "--model", "tiny", "--cycles", "2", "--settle", "0.5",
            ],
            OLLAMA_LIKE,
            &["--model-mib", "128"],
        ),
    ));
    let rows = requests(&dir);
    let phases: Vec<&str> = rows.iter().map(|r| r["phase"].as_str()).collect();
    assert_eq!(
        phases,
        ["warmup", "load", "unload", "load", "unload", "load", "unload"]
    );
    let root = runs(&dir)[0]["pid"].as_u64().expect("pid").to_string();
    let processes = csv_rows(&dir.join("processes.csv"));
    let mut runners = Vec::new();
    for (load, unload) in [(1, 2), (3, 4)] {
        let l = &rows[load];
        assert!(
            mib(l, "host_settled_bytes") - mib(l, "host_send_bytes") > 100.0,
            "{l:?}"
        );
        let runner = processes
            .iter()
            .find(|p| p["index"] == load.to_string() && p["pid"] != root)
            .expect("the runner after the load");
        assert!(mib(runner, "pss_bytes") > 100.0, "{runner:?}");
        runners.push(runner["pid"].clone());
        // After the unload the runner has exited and the host is back.
        let u = &rows[unload];
        assert!(
            !processes
                .iter()
                .any(|p| p["index"] == unload.to_string() && p["pid"] == runner["pid"]),
            "the runner {} is still there after the unload",
            runner["pid"]
        );
        assert_eq!(u["host_back_cycle"], "yes", "{u:?}");
        assert!(mib(u, "host_held_bytes") < 16.0, "{u:?}");
        // Back to the level before the first judged load (the warm-up's own
        // unload, row 2, has no such level yet).
        let first = if unload == 2 { "" } else { "yes" };
        assert_eq!(u["host_back"], first, "{u:?}");
    }
    assert_ne!(runners[0], runners[1], "each load starts its own runner");
}

/// Every resource the session reads reaches requests.csv: the shared
/// memory a server writes into /dev/shm (here `MEMREL_SHM_DIR`, kept apart
/// from the machine's) at each load and removes at each unload is in its
/// `shm` columns, after the columns requests.csv has always had.
#[test]
fn shared_memory_a_server_writes_at_its_load_reaches_requests_csv() {
    let work = tempfile::tempdir().expect("tempdir");
    let shm = work.path().join("shm");
    std::fs::create_dir(&shm).expect("the shm directory");
    let dir = work.path().join("results");
    let args = started(
        &["--server", "ollama", "--model", "tiny", "--settle", "0.3"],
        OLLAMA_LIKE,
        &["--model-mib", "16", "--shm-mib", "48"],
    );
    let output = drive_command(&dir, None, &args)
        .env("MEMREL_SHM_DIR", &shm)
        .output()
        .expect("memrel starts");
    assert!(output.status.success(), "{}", streams(&output));
    let text = std::fs::read_to_string(dir.join("requests.csv")).expect("requests.csv");
    let header: Vec<&str> = text.lines().next().expect("a header").split(',').collect();
    let at = |column: &str| {
        header
            .iter()
            .position(|c| *c == column)
            .unwrap_or_else(|| panic!("no {column} in {header:?}"))
    };
    // The columns requests.csv always had keep their places; the others
    // (host memory's parts, /dev/shm) come after `error`.
    assert_eq!(&header[12..14], ["host_send_bytes", "host_response_bytes"]);
    assert_eq!(header[at("error") - 1], "shmem_back_cycle");
    assert!(at("anon_send_bytes") > at("error"), "{header:?}");
    assert!(at("shm_send_bytes") > at("anon_send_bytes"), "{header:?}");
    assert!(at("shm_back_cycle") > at("shm_freed_bytes"), "{header:?}");
    // Issue 49, item 1: host memory's split by mapping, at every edge (the
    // runner the unload ends may exit between the whole's read and the
    // split's: no sum to compare there).
    assert!(at("mapped_heap_send_bytes") > at("error"), "{header:?}");
    assert!(
        at("mapped_pinned_response_bytes") > at("error"),
        "{header:?}"
    );
    crate::mappings::assert_each_edge_is_split(&dir.join("events.csv"), false);
    let rows = requests(&dir);
    let row = |phase: &str| {
        rows.iter()
            .find(|r| r["phase"] == phase && r["cycle"] == "1")
            .unwrap_or_else(|| panic!("cycle 1's {phase}: {rows:?}"))
    };
    let load = row("load");
    let grew = mib(load, "shm_response_bytes") - mib(load, "shm_send_bytes");
    assert!((44.0..56.0).contains(&grew), "48 MiB written: {load:?}");
    let unload = row("unload");
    assert!(mib(unload, "shm_held_bytes").abs() < 16.0, "{unload:?}");
    assert_eq!(unload["shm_back_cycle"], "yes", "{unload:?}");
}

#[test]
fn nothing_listening_on_the_port_is_an_error_before_anything_is_written() {
    let work = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let (dir, output) = drive(work.path(), &["--server", "vllm", "--url", &url]);
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    let err = stderr(&output);
    assert!(
        err.contains(&format!(
            "memrel: error: --url {url}: no process listens on port {port}"
        )) && err.contains("-- CMD"),
        "{err}"
    );
    assert!(!dir.exists());
}

/// A cycle of one request, no readiness GET.
fn one_request(work: &Path, extra: &str) -> PathBuf {
    let path = work.join("cycle.toml");
    let text = format!("[[request]]\nphase = \"sleep\"\npath = \"/sleep?level=1\"\n{extra}\n");
    std::fs::write(&path, text).expect("write cycle.toml");
    path
}

#[test]
fn a_pid_whose_port_nothing_listens_on_fails_at_once_before_anything_is_written() {
    let work = tempfile::tempdir().expect("tempdir");
    // A process that listens nowhere, named by --pid: its readiness GET
    // would be refused until --ready-timeout (600 s).
    let mut idle = Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("sleep starts");
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let cycle = one_request(work.path(), "");
    let text = std::fs::read_to_string(&cycle).expect("cycle");
    std::fs::write(&cycle, format!("ready = \"GET /health\"\n{text}")).expect("write");
    let started = std::time::Instant::now();
    let (dir, output) = drive(
        work.path(),
        &[
            "--cycle",
            cycle.to_str().expect("utf-8"),
            "--url",
            &url,
            "--pid",
            &idle.id().to_string(),
        ],
    );
    let took_s = started.elapsed().as_secs_f64();
    let _ = idle.kill();
    let _ = idle.wait();
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    let err = stderr(&output);
    assert!(
        err.contains(&format!(
            "memrel: error: --pid {}: nothing listens on port {port} of --url {url}",
            idle.id()
        )),
        "{err}"
    );
    assert!(!dir.exists(), "nothing is written");
    assert!(took_s < 60.0, "failed after {took_s:.1} s");
}

#[test]
fn a_misbehaving_server_fails_the_drive_naming_the_request_and_keeping_the_data() {
    let cases: [(&str, &str, &[&str]); 4] = [
        (
            "status500",
            "",
            &[
                "request 1 (sleep: POST /sleep?level=1, cycle 0, warm-up): the server answered 500 where 200 was expected",
                "engine failed to sleep",
            ],
        ),
        ("hang", "timeout_s = 1", &["request 1 (sleep: POST /sleep?level=1, cycle 0, warm-up): timed out after 1 s"]),
        ("notjson", "json = true", &["request 1 (sleep: POST /sleep?level=1, cycle 0, warm-up): the answer is not json", "sleeping now"]),
        ("die", "", &["request 1 (sleep: POST /sleep?level=1, cycle 0, warm-up): the server exited 3 during the request"]),
    ];
    for (mode, extra, says) in cases {
        let work = tempfile::tempdir().expect("tempdir");
        let cycle = one_request(work.path(), extra);
        let text = std::fs::read_to_string(&cycle).expect("cycle");
        std::fs::write(&cycle, format!("ready = \"GET /health\"\n{text}")).expect("write");
        let (dir, output) = drive(
            work.path(),
            &started(
                &["--cycle", cycle.to_str().expect("utf-8")],
                VLLM_LIKE,
                &["--weights-mib", "8", "--kv-mib", "8", "--misbehave", mode],
            ),
        );
        assert_failed_keeping_data(&dir, &output, says);
        // The server start was measured before it failed.
        assert_eq!(requests(&dir)[0]["status"], "200", "{mode}");
        let root = runs(&dir)[0]["pid"].as_i64().expect("pid");
        assert_gone(root, "the misbehaving server");
    }
}

#[test]
fn an_sglang_shaped_server_found_by_its_port_releases_and_resumes_its_memory() {
    let work = tempfile::tempdir().expect("tempdir");
    let (server, port) = start_server(VLLM_LIKE, &["--weights-mib", "96", "--kv-mib", "64"]);
    let url = format!("http://127.0.0.1:{port}");
    let (dir, output) = drive(
        work.path(),
        &["--server", "sglang", "--settle", "0.3", "--url", &url],
    );
    let pid = server.id();
    stop(server);
    assert!(output.status.success(), "{}", streams(&output));
    assert_eq!(runs(&dir)[0]["pid"].as_u64(), Some(u64::from(pid)));
    let rows = requests(&dir);
    let lines: Vec<&str> = rows.iter().map(|r| r["request"].as_str()).collect();
    // A warm-up cycle, then the judged one.
    assert_eq!(
        lines,
        [
            "POST /release_memory_occupation",
            "POST /resume_memory_occupation",
            "POST /release_memory_occupation",
            "POST /resume_memory_occupation"
        ]
    );
    let released = mib(&rows[0], "host_send_bytes") - mib(&rows[0], "host_settled_bytes");
    assert!(
        (140.0..180.0).contains(&released),
        "released {released:.0} MiB"
    );
    // A sleep is judged by what it freed; the judged cycle's resume is
    // back to the level before the judged cycle's release.
    assert_eq!(rows[0]["host_back"], "", "{:?}", rows[0]);
    assert!(mib(&rows[2], "host_freed_bytes") > 140.0, "{:?}", rows[2]);
    assert_eq!(rows[3]["host_back"], "yes", "{:?}", rows[3]);
    let resumed = mib(&rows[1], "host_settled_bytes") - mib(&rows[1], "host_send_bytes");
    assert!(
        (140.0..180.0).contains(&resumed),
        "resumed {resumed:.0} MiB"
    );
}

/// The Ollama preset of one model, `tiny`.
const TINY_OLLAMA: [&str; 4] = ["--server", "ollama", "--model", "tiny"];

/// `memrel drive --dir DIR --interval-ms 20 --out ROOT ARGS…` (DIR under
/// `work`), driving the Ollama-shaped server memrel starts (`model_mib` a
/// runner, `leak_mib` left in the server by each unload), one cycle.
fn drive_ollama(
    work: &Path,
    name: &str,
    (model_mib, leak_mib): (u32, u32),
    args: &[&str],
) -> (PathBuf, Output) {
    drive_ollama_on(None, work, name, (model_mib, leak_mib), args)
}

/// [`drive_ollama`], the server on `python` where given (its path in place
/// of python3 after `--`, its environment on memrel, which the server
/// inherits).
fn drive_ollama_on(
    python: Option<&PrivatePython>,
    work: &Path,
    name: &str,
    (model_mib, leak_mib): (u32, u32),
    args: &[&str],
) -> (PathBuf, Output) {
    let (model, leak) = (model_mib.to_string(), leak_mib.to_string());
    let args: Vec<&str> = ["--settle", "0.3"].iter().chain(args).copied().collect();
    let server = ["--model-mib", &model, "--leak-mib", &leak];
    let mut args = started(&args, OLLAMA_LIKE, &server);
    let dir = work.join(name);
    let mut command = match python {
        Some(python) => {
            let at = args.iter().position(|a| a == "--").expect("-- CMD") + 1;
            args[at] = python.path().display().to_string();
            let mut command = drive_command(&dir, Some(work), &args);
            python.env_on(&mut command);
            command
        }
        None => drive_command(&dir, Some(work), &args),
    };
    let output = command.output().expect("memrel starts");
    (dir, output)
}

/// `memrel check --baseline NAME --out ROOT ARGS… DIR`, which must exit
/// `code`.
fn check(work: &Path, baseline: &str, args: &[&str], dir: &Path, code: i32) -> Output {
    let checked = memrel()
        .args(["check", "--baseline", baseline, "--out"])
        .arg(work)
        .args(args)
        .arg(dir)
        .output()
        .expect("memrel starts");
    assert_eq!(checked.status.code(), Some(code), "{}", streams(&checked));
    checked
}

/// Asserts `verdict.json` of `dir` holds a verdict `verdict` of the metric
/// or budget key `what`.
fn assert_verdict(dir: &Path, what: &str, verdict: &str) {
    let rows = verdicts(dir);
    assert!(
        rows.iter().any(|v| (v["metric"] == what || v["budget"]["key"] == what)
            && v["verdict"] == verdict),
        "no {what} {verdict}: {rows:?}"
    );
}

/// The Ollama-shaped server's cycle as a file, with `extra` after it.
fn ollama_cycle_file(work: &Path, extra: &str) -> PathBuf {
    let path = work.join("ollama-cycle.toml");
    std::fs::write(
        &path,
        format!(
            "ready = \"GET /api/version\"\n\
             [[request]]\nphase = \"load\"\npath = \"/api/generate\"\nbody = {{ model = \"tiny\" }}\n\
             [[request]]\nphase = \"unload\"\npath = \"/api/generate\"\n\
             body = {{ model = \"tiny\", keep_alive = 0 }}\n\
             until = {{ path = \"/api/ps\", absent = \"tiny\" }}\n{extra}"
        ),
    )
    .expect("write the cycle file");
    path
}

/// The verdict rows of a checked directory.
fn verdicts(dir: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(dir.join("verdict.json")).expect("verdict.json");
    let json: serde_json::Value = serde_json::from_str(&text).expect("verdict.json is json");
    json["verdicts"].as_array().cloned().unwrap_or_default()
}

#[test]
fn a_drive_over_its_budget_fails_the_check_and_one_within_it_passes() {
    let work = tempfile::tempdir().expect("tempdir");
    // Each unload leaves 64 MiB in the server, written before it answers:
    // the retained host memory is 64 MiB at every reading after it.
    let (over, output) = drive_ollama(
        work.path(),
        "over",
        (128, 64),
        &[&TINY_OLLAMA[..], &["--budget", "max_retained_mib=32"]].concat(),
    );
    assert!(output.status.success(), "{}", streams(&output));
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        out.contains("budget (host): max_retained_mib = 32") && out.contains("over-budget"),
        "the drive says its budget row: {out}"
    );
    let checked = check(work.path(), "srv", &["--lenient"], &over, 1);
    // No baseline entry: judged on the budgets, the warning naming the
    // drive that would make one.
    assert!(
        stderr(&checked).contains(
            "create it with `memrel drive <its flags> --name drive --repeat 3 --save-baseline srv`"
        ),
        "{}",
        streams(&checked)
    );
    let md = String::from_utf8_lossy(&checked.stdout).into_owned();
    assert!(md.contains("max_retained_mib = 32"), "{md}");
    let rows = verdicts(&over);
    let row = rows
        .iter()
        .find(|v| v["budget"]["key"] == "max_retained_mib")
        .unwrap_or_else(|| panic!("a max_retained_mib row: {rows:?}"));
    assert_eq!(row["verdict"], "over-budget", "{row}");
    let worst = row["budget"]["worst"].as_f64().expect("its worst") / MIB;
    // The 64 MiB each unload leaves, less what the server gives back of the
    // warm-up's (PSS of a Python heap).
    assert!((48.0..100.0).contains(&worst), "retained {worst:.1} MiB");

    // The same server within a budget its cycle file's [thresholds] gives.
    let file = ollama_cycle_file(work.path(), "[thresholds]\nmax_retained_mib = 512\n");
    let file = file.to_str().expect("utf-8 path");
    let within = drove(drive_ollama(
        work.path(),
        "within",
        (128, 64),
        &["--cycle", file],
    ));
    check(work.path(), "srv", &["--lenient"], &within, 0);
    assert_verdict(&within, "max_retained_mib", "no-change");
    // A flag wins over the file's same key.
    let flagged = drove(drive_ollama(
        work.path(),
        "flagged",
        (128, 64),
        &["--cycle", file, "--budget", "max_retained_mib=16"],
    ));
    check(work.path(), "srv", &["--lenient"], &flagged, 1);
}

#[test]
fn a_budget_of_a_layer_the_drive_did_not_read_is_an_error_not_a_pass() {
    let work = tempfile::tempdir().expect("tempdir");
    // No --model-files: the page cache of the model's files was not read.
    let (dir, output) = drive_ollama(
        work.path(),
        "drive",
        (128, 0),
        &[
            &TINY_OLLAMA[..],
            &["--budget", "max_retained_page_cache_mib=64"],
        ]
        .concat(),
    );
    // The drive itself fails: a budget it cannot judge is not a pass.
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    let err = stderr(&output);
    assert!(
        err.contains("1 of the budgets could not be judged")
            && err.contains("max_retained_page_cache_mib"),
        "{err}"
    );
    let checked = check(work.path(), "srv", &["--lenient"], &dir, 2);
    let err = stderr(&checked);
    assert!(err.contains("max_retained_page_cache_mib"), "{err}");
}

#[test]
fn a_bad_budget_is_an_error_naming_the_flag_or_file_before_anything_is_written() {
    let work = tempfile::tempdir().expect("tempdir");
    let dir = work.path().join("results");
    let url = format!("http://127.0.0.1:{}", free_port());
    let file = ollama_cycle_file(work.path(), "[thresholds]\nmax_retaned_mib = 64\n");
    let cases: [(&[&str], &str); 5] = [
        (
            &["--server", "vllm", "--budget", "max_retaned_mib=64"],
            "--budget \"max_retaned_mib=64\": unknown field `max_retaned_mib`, expected one of",
        ),
        (
            &["--server", "vllm", "--budget", "max_retained_mib=lots"],
            "--budget \"max_retained_mib=lots\": \"lots\" is not a number: write it as KEY=VALUE",
        ),
        (
            &["--server", "vllm", "--budget", "max_retained_mib"],
            "--budget \"max_retained_mib\": no `=`: write it as KEY=VALUE",
        ),
        (
            &["--server", "vllm", "--budget", "max_retained_vram_mib=64"],
            "max_retained_vram_mib is a VRAM budget, but memrel reads host memory only: remove it, or pass --device cuda",
        ),
        (
            &["--cycle", file.to_str().expect("utf-8 path")],
            ":12:1: unknown field `max_retaned_mib`",
        ),
    ];
    for (args, says) in cases {
        let output = memrel()
            .arg("drive")
            .arg("--dir")
            .arg(&dir)
            .args(["--url", &url])
            .args(args)
            .output()
            .expect("memrel starts");
        assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
        let err = stderr(&output);
        assert!(err.contains(says), "{args:?}: stderr lacks {says:?}: {err}");
        assert!(err.starts_with("memrel: error: "), "{err}");
        assert!(!dir.exists(), "nothing is written for {args:?}");
    }
}

#[test]
fn a_baseline_of_three_driven_runs_judges_later_drives_of_the_server() {
    let work = tempfile::tempdir().expect("tempdir");
    // A runner of 1 MiB (some 14 MiB with its interpreter) and a retention
    // threshold of 32 MiB: what a load and an unload move is no release to
    // time, so no timing of a loaded machine is judged; what is judged is
    // the level the server is left at (and its peak).
    let file = ollama_cycle_file(work.path(), "[thresholds]\nretention_mib = 32\n");
    // The server on a private python (`alone`): the Pss of libpython's pages
    // moves with the machine's other pythons by megabytes, which spread
    // the three runs' retained bytes past the gate's noise band on a busy
    // machine (retained inconclusive where the same server is no change).
    let private = PrivatePython::for_server(
        &work.path().join("python"),
        OLLAMA_LIKE,
        &["--model-mib", "1"],
    );
    let python = Some(&private);
    let suggested = format!(
        "--repeat 3 --save-baseline srv -- {}",
        private.path().display()
    );
    let ollama = ["--cycle", file.to_str().expect("utf-8 path")];
    let three = [&ollama[..], &["--repeat", "3"]].concat();
    // One run and no budgets cannot show a regression: refused, naming the
    // drive that would make one.
    let (one, output) = drive_ollama_on(
        python,
        work.path(),
        "one",
        (1, 0),
        &[&ollama[..], &["--save-baseline", "srv"]].concat(),
    );
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    let err = stderr(&output);
    assert!(
        err.contains("cannot save baseline srv: a baseline needs 3 runs")
            // Its own flags but --dir, which must name a new directory (issue 47).
            && err.contains("memrel drive --out")
            && !err.contains("memrel drive --dir")
            && err.contains(&suggested),
        "{err}"
    );
    assert_eq!(runs(&one).len(), 1);

    // --repeat 3: the server started three times, three runs in one record.
    let (base, output) = drive_ollama_on(
        python,
        work.path(),
        "base",
        (1, 0),
        &[&three[..], &["--save-baseline", "srv"]].concat(),
    );
    assert!(output.status.success(), "{}", streams(&output));
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        out.contains("repeat 3 of 3:") && out.contains("baseline srv: "),
        "{out}"
    );
    let made = runs(&base);
    let numbers: Vec<(u64, u64)> = made
        .iter()
        .map(|r| {
            (
                r["run"].as_u64().unwrap(),
                r["repetition"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(numbers, [(1, 1), (2, 2), (3, 3)]);
    let pids: std::collections::BTreeSet<u64> =
        made.iter().map(|r| r["pid"].as_u64().unwrap()).collect();
    assert_eq!(pids.len(), 3, "a server started for each repeat: {pids:?}");
    for k in 1..=3 {
        let rows = requests(&base.join(format!("repeat-{k}")));
        let phases: Vec<&str> = rows.iter().map(|r| r["phase"].as_str()).collect();
        assert_eq!(
            phases,
            ["warmup", "load", "unload", "load", "unload"],
            "repeat {k}"
        );
    }
    assert!(
        base.join("timeline.png").exists(),
        "the joined record's chart"
    );
    assert_rerenders(&base);
    // The scenario names the server, not its pid (a later drive's is the same).
    let scenario = runs_json(&base)["header"]["scenario_toml"].to_string();
    assert!(
        scenario.contains("memrel drive http://127.0.0.1:"),
        "{scenario}"
    );

    // The same server again: no regression.
    let same = drove(drive_ollama_on(python, work.path(), "same", (1, 0), &three));
    check(work.path(), "srv", &[], &same, 0);
    assert_verdict(&same, "retained_bytes", "no-change");

    // A server that now leaks 64 MiB an unload: the retained host memory regressed.
    let leaks = drove(drive_ollama_on(
        python,
        work.path(),
        "leaks",
        (1, 64),
        &three,
    ));
    check(work.path(), "srv", &[], &leaks, 1);
    assert_verdict(&leaks, "retained_bytes", "regressed");
}

#[test]
fn a_running_server_is_driven_again_for_each_repeat_and_left_running() {
    let work = tempfile::tempdir().expect("tempdir");
    let (server, port) = start_server(OLLAMA_LIKE, &["--model-mib", "64"]);
    let url = format!("http://127.0.0.1:{port}");
    let (dir, output) = drive(
        work.path(),
        &[
            "--server", "ollama", "--model", "tiny", "--settle", "0.3", "--repeat", "2", "--url",
            &url,
        ],
    );
    let pid = server.id();
    let alive = std::path::Path::new(&format!("/proc/{pid}")).exists();
    stop(server);
    assert!(output.status.success(), "{}", streams(&output));
    assert!(alive, "memrel left the server it did not start running");
    let made = runs(&dir);
    assert_eq!(made.len(), 2);
    assert!(made
        .iter()
        .all(|r| r["pid"].as_u64() == Some(u64::from(pid))));
    for k in 1..=2 {
        let rows = requests(&dir.join(format!("repeat-{k}")));
        let phases: Vec<&str> = rows.iter().map(|r| r["phase"].as_str()).collect();
        assert_eq!(phases, ["load", "unload", "load", "unload"], "repeat {k}");
    }
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        out.contains("(repeat-K/requests.csv: every request)"),
        "{out}"
    );
}

/// The v2-shaped server's load and unload of model `iris` as a cycle file
/// (no `until`; `extra` in the load's table): the shape without the
/// preset, driven as any server.
fn v2_cycle_file(work: &Path, extra: &str) -> String {
    let path = work.join("v2-cycle.toml");
    std::fs::write(
        &path,
        format!(
            "ready = \"GET /v2/health/ready\"\n\
             [[request]]\nphase = \"load\"\npath = \"/v2/repository/models/iris/load\"\n\
             model = \"iris\"\n{extra}\n\
             [[request]]\nphase = \"unload\"\npath = \"/v2/repository/models/iris/unload\"\n\
             model = \"iris\"\n"
        ),
    )
    .expect("write the cycle file");
    path.to_str().expect("utf-8 path").to_string()
}

/// `memrel drive ARGS…` of the v2-shaped server memrel starts, with the
/// server's `server_args`; `--settle 0.5` unless ARGS say.
fn drive_v2(work: &Path, name: &str, args: &[&str], server_args: &[&str]) -> (PathBuf, Output) {
    let settle: &[&str] = if args.contains(&"--settle") {
        &[]
    } else {
        &["--settle", "0.5"]
    };
    let args: Vec<&str> = settle.iter().chain(args).copied().collect();
    let args = started(&args, V2_LIKE, server_args);
    drive_into(work.join(name), Some(work), &args)
}

#[test]
fn a_v2_server_is_loaded_and_unloaded_through_its_model_repository_api() {
    let work = tempfile::tempdir().expect("tempdir");
    // The unload answers at once and frees 0.4 s later (state UNLOADING):
    // the index is polled until the model is UNAVAILABLE.
    let dir = drove(drive_v2(
        work.path(),
        "v2",
        // The warm-up cycle, then one judged.
        &["--server", "v2", "--model", "iris", "--cycles", "1"],
        &["--model-mib", "64", "--unload-late-s", "0.4"],
    ));
    let rows = requests(&dir);
    let lines: Vec<String> = rows
        .iter()
        .map(|r| format!("{} {}", r["phase"], r["request"]))
        .collect();
    assert_eq!(
        lines,
        [
            "warmup (server start) GET /v2/health/ready",
            "load POST /v2/repository/models/iris/load",
            "unload POST /v2/repository/models/iris/unload",
            "load POST /v2/repository/models/iris/load",
            "unload POST /v2/repository/models/iris/unload",
        ]
    );
    for load in [&rows[1], &rows[3]] {
        assert_eq!(load["model"], "iris");
        let grew = mib(load, "host_settled_bytes") - mib(load, "host_send_bytes");
        assert!(
            (60.0..80.0).contains(&grew),
            "a load grew {grew:.0} MiB: {load:?}"
        );
    }
    for unload in [&rows[2], &rows[4]] {
        let until_s: f64 = unload["until_s"].parse().expect("the index was polled");
        assert!(until_s >= 0.3, "until the model was UNAVAILABLE: {until_s}");
        // The model is 64 MiB of anonymous memory: its anonymous part is
        // what the unload frees (file pages of code the worker first ran
        // during the load stay mapped: 4 MiB of them in one CI run took the
        // whole's fall to 59.96 MiB).
        let freed = mib(unload, "anon_send_bytes") - mib(unload, "anon_settled_bytes");
        assert!(
            (60.0..80.0).contains(&freed),
            "an unload freed {freed:.0} MiB: {unload:?}"
        );
    }
    // The worker is named by its command line, not only `python3`.
    let processes = csv_rows(&dir.join("processes.csv"));
    assert!(
        processes.iter().any(
            |p| p["comm"].starts_with("python") && p["command"].contains("v2_like.py --worker")
        ),
        "{processes:?}"
    );
    assert_rerenders(&dir);
}

#[test]
fn a_vllm_server_woken_by_tags_wakes_its_weights_then_its_kv_cache() {
    let work = tempfile::tempdir().expect("tempdir");
    let dir = drove(drive(
        work.path(),
        &started(
            &[
                "--server",
                "vllm-tags",
                "--warmup-cycles",
                "0",
                "--sleep-level",
                "2",
                "--settle",
                "0.3",
            ],
            VLLM_LIKE,
            &["--weights-mib", "96", "--kv-mib", "48"],
        ),
    ));
    let rows = requests(&dir);
    let lines: Vec<&str> = rows.iter().map(|r| r["request"].as_str()).collect();
    assert_eq!(
        lines[1..],
        [
            "POST /sleep?level=2",
            "POST /wake_up?tags=weights",
            "POST /wake_up?tags=kv_cache"
        ]
    );
    let grew =
        |r: &HashMap<String, String>| mib(r, "host_settled_bytes") - mib(r, "host_send_bytes");
    assert!(
        (90.0..110.0).contains(&grew(&rows[2])),
        "weights: {:?}",
        rows[2]
    );
    assert!(
        (44.0..60.0).contains(&grew(&rows[3])),
        "kv cache: {:?}",
        rows[3]
    );
}

#[test]
fn a_presets_request_times_out_after_request_timeout() {
    let work = tempfile::tempdir().expect("tempdir");
    // The sleep hangs 30 s; the preset's requests may take 1 s.
    let (dir, output) = drive(
        work.path(),
        &started(
            &["--server", "vllm", "--request-timeout", "1"],
            VLLM_LIKE,
            &["--weights-mib", "8", "--kv-mib", "8", "--misbehave", "hang"],
        ),
    );
    assert_failed_keeping_data(
        &dir,
        &output,
        &["request 1 (sleep: POST /sleep?level=1, cycle 0, warm-up): timed out after 1 s"],
    );
}

#[test]
fn the_model_files_page_cache_is_a_resource_its_budget_judges() {
    let work = tempfile::tempdir().expect("tempdir");
    let file = work.path().join("model.safetensors");
    std::fs::write(&file, vec![7u8; 24 << 20]).expect("write the model file");
    // Written pages are cached: dropped (clean after the sync) so the load
    // is what caches them.
    let evicted = Command::new("python3")
        .arg("-c")
        .arg("import os,sys; f=os.open(sys.argv[1], os.O_RDONLY); os.fsync(f); os.posix_fadvise(f, 0, 0, os.POSIX_FADV_DONTNEED)")
        .arg(&file)
        .status()
        .expect("python3 starts");
    assert!(evicted.success());
    let path = file.to_str().expect("utf-8 path");
    let cycle = v2_cycle_file(work.path(), "");
    let over = drove(drive_v2(
        work.path(),
        "over",
        &[
            "--cycle",
            &cycle,
            // The file's pages the first load caches are what is judged.
            "--warmup-cycles",
            "0",
            "--model-files",
            path,
            "--budget",
            "max_retained_page_cache_mib=4",
        ],
        &["--model-mib", "8", "--model-file", path],
    ));
    let rows = requests(&over);
    let cached = mib(&rows[1], "page_cache_settled_bytes") - mib(&rows[1], "page_cache_send_bytes");
    assert!(
        cached >= 20.0,
        "the load cached the file: {cached:.1} MiB {:?}",
        rows[1]
    );
    check(work.path(), "srv", &["--lenient"], &over, 1);
    let verdict = verdicts(&over);
    let row = verdict
        .iter()
        .find(|v| v["budget"]["key"] == "max_retained_page_cache_mib")
        .unwrap_or_else(|| panic!("a page cache budget row: {verdict:?}"));
    assert_eq!(row["verdict"], "over-budget", "{row}");

    // The same drive within a budget passes (the file stays cached).
    let within = drove(drive_v2(
        work.path(),
        "within",
        &[
            "--cycle",
            &cycle,
            "--model-files",
            path,
            "--budget",
            "max_retained_page_cache_mib=64",
        ],
        &["--model-mib", "8", "--model-file", path],
    ));
    check(work.path(), "srv", &["--lenient"], &within, 0);
}

/// The worker's pid the v2-shaped server wrote into server.log.
fn worker_pid(dir: &Path) -> i64 {
    let log = std::fs::read_to_string(dir.join("server.log")).expect("server.log");
    log.lines()
        .find_map(|l| l.strip_prefix("WORKER PID "))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no worker pid in server.log: {log}"))
}

#[test]
fn a_server_whose_leader_dies_has_its_tree_stopped_and_a_death_recorded() {
    let work = tempfile::tempdir().expect("tempdir");
    // The leader exits 0.3 s after answering the load; its worker (and the
    // 64 MiB model it holds) would run on. The settle window is longer, and
    // a second cycle follows: the death is met whichever comes first.
    let cycle = v2_cycle_file(work.path(), "");
    let (dir, output) = drive_v2(
        work.path(),
        "died",
        &["--cycle", &cycle, "--settle", "3", "--cycles", "2"],
        &["--model-mib", "64", "--die-after-load-s", "0.3"],
    );
    let worker = worker_pid(&dir);
    assert_gone(worker, "the dead server's worker");
    let root = runs(&dir)[0]["pid"].as_i64().expect("pid");
    assert_gone(root, "the dead server");
    assert_failed_keeping_data(
        &dir,
        &output,
        &["the server exited 3", "a death, not a release"],
    );
    let err = stderr(&output);
    assert!(
        err.contains(&format!(
            "memrel stopped the rest of its tree (pid {worker})"
        )),
        "{err}"
    );
    // No request counts the memory that left with the server as its own.
    for row in requests(&dir) {
        let late = row["host_late_bytes"].parse::<f64>().unwrap_or(0.0) / MIB;
        assert!(late < 16.0, "late bytes of a death: {row:?}");
    }
}

#[test]
fn a_signal_stops_a_drive_whose_request_hangs_and_records_it_stopped_early() {
    for (signal, code, name) in [("-INT", 130, "SIGINT"), ("-TERM", 143, "SIGTERM")] {
        let work = tempfile::tempdir().expect("tempdir");
        let dir = work.path().join("results");
        // The load may take 60 s: a drive that waits for it is far too late.
        let cycle = v2_cycle_file(work.path(), "timeout_s = 60");
        let args = started(&["--cycle", &cycle], V2_LIKE, &["--hang-load"]);
        let child = drive_command(&dir, None, &args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("memrel starts");
        // The load hangs for good (its answer never comes).
        let log = dir.join("server.log");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while !std::fs::read_to_string(&log).is_ok_and(|t| t.contains("hanging")) {
            assert!(std::time::Instant::now() < deadline, "the load never hung");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let signalled = std::time::Instant::now();
        let kill = Command::new("kill")
            .arg(signal)
            .arg(child.id().to_string())
            .status()
            .expect("kill starts");
        assert!(kill.success());
        let output = child.wait_with_output().expect("memrel ends");
        let took_s = signalled.elapsed().as_secs_f64();
        assert_eq!(output.status.code(), Some(code), "{}", streams(&output));
        // Far sooner than the request's 60 s timeout; the request itself
        // is let go within 20 ms (the rest is stopping the server and
        // writing the results).
        assert!(took_s < 30.0, "{name}: memrel took {took_s:.1} s to stop");
        let run = &runs(&dir)[0];
        assert_eq!(run["status"], "killed", "{run}");
        let error = run["error"].as_str().expect("the run's error");
        assert!(
            error.contains(&format!("stopped early: memrel received {name}")),
            "{error}"
        );
        let rows = requests(&dir);
        let load = rows.last().expect("the load's row");
        assert!(
            load["error"].contains(&format!(
                "request 1 (load: POST /v2/repository/models/iris/load, cycle 0, warm-up): stopped: memrel received {name}"
            )),
            "{load:?}"
        );
        let root = run["pid"].as_i64().expect("pid");
        assert_gone(root, "the server");
        assert_gone(worker_pid(&dir), "the server's worker");
    }
}

/// `memrel drive --dir DIR --interval-ms 20 --out ROOT ARGS…` (DIR under
/// `work`) of the vLLM-shaped server memrel starts with `--backup backup`
/// (64 MiB of weights, 32 of KV cache): sleep level 1, two judged cycles
/// after the warm-up.
fn drive_vllm(work: &Path, name: &str, backup: &str, args: &[&str]) -> (PathBuf, Output) {
    let cycles = ["--settle", "0.3", "--server", "vllm", "--cycles", "2"];
    let args: Vec<&str> = cycles.iter().chain(args).copied().collect();
    let server = ["--weights-mib", "64", "--kv-mib", "32", "--backup", backup];
    let args = started(&args, VLLM_LIKE, &server);
    drive_into(work.join(name), Some(work), &args)
}

#[test]
fn a_sleep_and_wake_drive_is_measured_gated_and_budgeted_like_a_load_and_unload() {
    let work = tempfile::tempdir().expect("tempdir");
    // The wake keeps the weights' backup mapped (PyTorch's cached pinned
    // buffer): the warm-up's wake says so; the judged cycles reuse it.
    let three = ["--repeat", "3"];
    let (base, output) = drive_vllm(
        work.path(),
        "base",
        "kept",
        &[&three[..], &["--save-baseline", "sleepy"]].concat(),
    );
    assert!(output.status.success(), "{}", streams(&output));
    let out = text(&output.stdout);
    assert!(
        out.contains("the wake left") && out.contains("MiB of shared memory mapped (RssShmem"),
        "{out}"
    );
    assert!(out.contains("cycle 0 is the warm-up"), "{out}");
    assert!(out.contains("baseline sleepy: "), "{out}");
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(base.join("summary.json")).expect("summary.json"),
    )
    .expect("summary.json is JSON");
    for run in summary["runs"].as_array().expect("runs") {
        let host = &run["resources"][0];
        assert_eq!(host["resource"], "host", "{host}");
        let cycles = host["cycles"].as_array().expect("cycles");
        assert_eq!(cycles.len(), 2, "two judged sleep/wake cycles: {host}");
        for c in cycles {
            let retained = c["retained_bytes"].as_f64().expect("retained") / MIB;
            assert!(retained.abs() < 16.0, "the backup is reused: {c}");
        }
    }

    // The same server again: no regression.
    let same = drove(drive_vllm(work.path(), "same", "kept", &three));
    check(work.path(), "sleepy", &[], &same, 0);

    // A server that maps a new backup at every sleep: the host memory its
    // wakes leave behind grows, the check fails, and so does a budget of it.
    let (leaks, output) = drive_vllm(
        work.path(),
        "leaks",
        "leaked",
        &[&three[..], &["--budget", "max_wake_held_mib=32"]].concat(),
    );
    assert!(output.status.success(), "{}", streams(&output));
    let out = text(&output.stdout);
    assert!(
        out.contains("max_wake_held_mib = 32") && out.contains("over-budget"),
        "{out}"
    );
    check(work.path(), "sleepy", &[], &leaks, 1);
    assert_verdict(&leaks, "retained_bytes", "regressed");
    assert_verdict(&leaks, "max_wake_held_mib", "over-budget");
}

#[test]
fn drive_strategies_start_the_server_under_each_and_keep_their_runs_apart() {
    let work = tempfile::tempdir().expect("tempdir");
    let file = work.path().join("strategies.toml");
    std::fs::write(
        &file,
        "[[strategy]]\nname = \"knob\"\nenv = { MEMREL_TEST_KNOB = \"1\" }\n",
    )
    .expect("write strategies.toml");
    let file = file.to_str().expect("utf-8 path");
    let (dir, output) = drive_ollama(
        work.path(),
        "strategies",
        (64, 64),
        &[
            &TINY_OLLAMA[..],
            &["--repeat", "3", "--strategy", "drop", "--strategy"],
            &[
                "trim-threshold-env",
                "--strategy",
                "knob",
                "--strategy-file",
                file,
            ],
        ]
        .concat(),
    );
    assert!(output.status.success(), "{}", streams(&output));
    // One record: each strategy's runs, numbered 1..2 within it.
    let made: Vec<(String, u64)> = runs(&dir)
        .iter()
        .map(|r| {
            (
                r["strategy"].as_str().expect("strategy").to_string(),
                r["repetition"].as_u64().expect("repetition"),
            )
        })
        .collect();
    let want: Vec<(String, u64)> = ["drop", "trim-threshold-env", "knob"]
        .iter()
        .flat_map(|s| (1..=3).map(move |k| (s.to_string(), k)))
        .collect();
    assert_eq!(made, want);
    // Each server started under its strategy's environment, nothing else.
    let log = |s: &str, k: u32| {
        std::fs::read_to_string(dir.join(s).join(format!("repeat-{k}")).join("server.log"))
            .unwrap_or_else(|e| panic!("{s} repeat {k}: {e}"))
    };
    for k in 1..=3 {
        assert!(!log("drop", k).contains("ENV "), "{}", log("drop", k));
        assert!(
            log("trim-threshold-env", k).contains("ENV MALLOC_TRIM_THRESHOLD_="),
            "{}",
            log("trim-threshold-env", k)
        );
        let knob = log("knob", k);
        assert!(
            knob.contains("ENV MEMREL_TEST_KNOB=1") && !knob.contains("MALLOC_TRIM"),
            "{knob}"
        );
    }
    // The user's strategy travels with the record: compare and advise read
    // the directory in a process that never saw the file.
    let scenario = runs_json(&dir)["header"]["scenario_toml"].to_string();
    assert!(scenario.contains("knob"), "{scenario}");
    let compared = memrel()
        .args(["compare", "--out"])
        .arg(work.path())
        .arg(&dir)
        .output()
        .expect("memrel starts");
    assert!(compared.status.success(), "{}", streams(&compared));
    let text = String::from_utf8_lossy(&compared.stdout).into_owned();
    assert!(
        text.contains("knob") && text.contains("trim-threshold-env"),
        "{text}"
    );
    // Every strategy keeps the 64 MiB each unload leaves: the advice names
    // the best as it goes on the server's command line, no in-process call.
    let advice = advice(&dir);
    assert!(
        advice.contains(&format!("python3 {OLLAMA_LIKE}"))
            && !advice.contains("(in the environment at start)"),
        "{advice}"
    );

    // A strategy that needs steps inside the process, or one without the
    // server's command: refused before anything runs.
    let url = format!("http://127.0.0.1:{}", free_port());
    let (inside, output) = drive(
        work.path(),
        &[
            &TINY_OLLAMA[..],
            &[
                "--url",
                &url,
                "--strategy",
                "malloc-trim",
                "--",
                "python3",
                OLLAMA_LIKE,
            ],
        ]
        .concat(),
    );
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    assert!(
        stderr(&output).contains("--strategy malloc-trim: it needs steps inside the process"),
        "{}",
        streams(&output)
    );
    assert!(!inside.exists());
    let (_, output) = drive(
        work.path(),
        &[&TINY_OLLAMA[..], &["--url", &url, "--strategy", "jemalloc"]].concat(),
    );
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    assert!(
        stderr(&output).contains("--strategy needs the server's command after --"),
        "{}",
        streams(&output)
    );
}

#[test]
fn a_wake_that_keeps_the_sleeps_backup_is_advised_against_with_the_servers_own_knob() {
    // The server's own switch as two user-defined strategies: its default
    // (the wake keeps the sleep's backup mapped, as PyTorch's pinned host
    // cache does) and the knob that unmaps it after each wake. Every wake of
    // the first keeps 64 MiB over the level before the first sleep.
    let work = tempfile::tempdir().expect("tempdir");
    let file = work.path().join("strategies.toml");
    std::fs::write(
        &file,
        "[[strategy]]\nname = \"cache-kept\"\nenv = { VLLM_LIKE_EMPTY_HOST_CACHE = \"0\" }\n\n\
         [[strategy]]\nname = \"cache-emptied\"\nenv = { VLLM_LIKE_EMPTY_HOST_CACHE = \"1\" }\n",
    )
    .expect("write strategies.toml");
    let file = file.to_str().expect("utf-8 path");
    let (dir, output) = drive_vllm(
        work.path(),
        "backup",
        "kept",
        &[
            "--warmup-cycles",
            "0",
            "--repeat",
            "3",
            "--strategy-file",
            file,
            "--strategy",
            "cache-kept",
            "--strategy",
            "cache-emptied",
        ],
    );
    assert!(output.status.success(), "{}", streams(&output));
    for k in 1..=3 {
        let kept = requests(&dir.join("cache-kept").join(format!("repeat-{k}")));
        let emptied = requests(&dir.join("cache-emptied").join(format!("repeat-{k}")));
        for (rows, lo, hi) in [(&kept, 48.0, 80.0), (&emptied, -16.0, 16.0)] {
            for wake in rows.iter().filter(|r| r["phase"] == "wake") {
                let held = mib(wake, "shmem_held_first_bytes");
                assert!(held >= lo && held <= hi, "{held} MiB: {wake:?}");
            }
        }
    }
    // Read back in a process that never saw the file: the knob that gives
    // the backup back, as it goes on the server's command line.
    let advice = advice(&dir);
    assert!(
        advice.contains("use cache-emptied (gives back in 3 of 3 runs")
            && advice.contains(&format!("VLLM_LIKE_EMPTY_HOST_CACHE=1 python3 {VLLM_LIKE}"))
            && !advice.contains("unknown to this memrel"),
        "{advice}"
    );
    // compare's advice line says the same.
    let compared = memrel()
        .args(["compare", "--out"])
        .arg(work.path())
        .arg(&dir)
        .output()
        .expect("memrel starts");
    assert!(compared.status.success(), "{}", streams(&compared));
    let table = String::from_utf8_lossy(&compared.stdout).into_owned();
    assert!(
        table.contains(&format!(
            "use cache-emptied (gives back in 3 of 3 runs; no release step): \
             VLLM_LIKE_EMPTY_HOST_CACHE=1 python3 {VLLM_LIKE}"
        )),
        "{table}"
    );
}
