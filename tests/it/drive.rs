//! `memrel drive` against real servers of the shapes it drives, written in
//! the tests (`tests/fixtures/servers/`, plain python3 on the CPU): a
//! vLLM-shaped one whose engine child process holds the memory (sleep level
//! 1 and 2, wake), one whose sleep answers before its memory is freed, an
//! Ollama-shaped one with a runner process per model; and servers that
//! misbehave (nothing listening, refused, 500, a hang, a body that is not
//! JSON, death mid-cycle): each a message naming the request, the data so
//! far kept, exit 2.
//!
//! Every number asserted is a reading memrel took at an edge or once a
//! request settled, never a periodic sample, so a loaded machine only makes
//! the runs slower.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use super::common::*;

const VLLM_LIKE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/servers/vllm_like.py"
);
const OLLAMA_LIKE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/servers/ollama_like.py"
);

/// A port nothing listens on (bound, then let go).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    listener.local_addr().expect("local addr").port()
}

/// `memrel drive --dir DIR --interval-ms 20 ARGS…`; its results directory.
fn drive(work: &Path, args: &[&str]) -> (PathBuf, Output) {
    let dir = work.join("results");
    let output = memrel()
        .arg("drive")
        .arg("--dir")
        .arg(&dir)
        .args(["--interval-ms", "20", "--grace", "5"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("memrel starts");
    (dir, output)
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
fn start_server(script: &str, args: &[&str]) -> (Child, u16) {
    let mut child = Command::new("python3")
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
    (child, port)
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
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

#[test]
fn a_vllm_shaped_server_is_started_driven_through_sleep_levels_and_stopped() {
    for level in ["1", "2"] {
        let work = tempfile::tempdir().expect("tempdir");
        let port = free_port().to_string();
        let url = format!("http://127.0.0.1:{port}");
        let (dir, output) = drive(
            work.path(),
            &[
                "--server",
                "vllm",
                "--sleep-level",
                level,
                "--cycles",
                "2",
                "--settle",
                "0.5",
                "--url",
                &url,
                "--",
                "python3",
                VLLM_LIKE,
                "--port",
                &port,
                "--weights-mib",
                "96",
                "--kv-mib",
                "64",
            ],
        );
        assert!(output.status.success(), "{}", streams(&output));
        let rows = requests(&dir);
        let shape: Vec<String> = rows
            .iter()
            .map(|r| format!("{} {} {}", r["cycle"], r["phase"], r["request"]))
            .collect();
        let sleep = format!("POST /sleep?level={level}");
        assert_eq!(
            shape,
            [
                "0 load (server start) GET /health".to_string(),
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
        let out = text(&output.stdout);
        assert!(out.contains("server: killed by signal 15"), "{out}");
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
    let port = free_port().to_string();
    let url = format!("http://127.0.0.1:{port}");
    let (dir, output) = drive(
        work.path(),
        &[
            "--server",
            "ollama",
            "--model",
            "tiny",
            "--cycles",
            "2",
            "--settle",
            "0.5",
            "--url",
            &url,
            "--",
            "python3",
            OLLAMA_LIKE,
            "--port",
            &port,
            "--model-mib",
            "128",
        ],
    );
    assert!(output.status.success(), "{}", streams(&output));
    let rows = requests(&dir);
    let phases: Vec<&str> = rows.iter().map(|r| r["phase"].as_str()).collect();
    assert_eq!(phases, ["warmup", "load", "unload", "load", "unload"]);
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
        assert_eq!(u["host_back"], "yes", "{u:?}");
        assert!(mib(u, "host_held_bytes") < 16.0, "{u:?}");
    }
    assert_ne!(runners[0], runners[1], "each load starts its own runner");
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
fn a_server_that_refuses_the_connection_fails_naming_the_request() {
    let work = tempfile::tempdir().expect("tempdir");
    // A process that listens nowhere, named by --pid.
    let mut idle = Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("sleep starts");
    let url = format!("http://127.0.0.1:{}", free_port());
    let cycle = one_request(work.path(), "");
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
    let _ = idle.kill();
    let _ = idle.wait();
    assert_failed_keeping_data(
        &dir,
        &output,
        &["request 1 (sleep: POST /sleep?level=1, cycle 1): connection refused"],
    );
}

#[test]
fn a_misbehaving_server_fails_the_drive_naming_the_request_and_keeping_the_data() {
    let cases: [(&str, &str, &[&str]); 4] = [
        (
            "status500",
            "",
            &[
                "request 1 (sleep: POST /sleep?level=1, cycle 1): the server answered 500 where 200 was expected",
                "engine failed to sleep",
            ],
        ),
        ("hang", "timeout_s = 1", &["request 1 (sleep: POST /sleep?level=1, cycle 1): timed out after 1 s"]),
        ("notjson", "json = true", &["request 1 (sleep: POST /sleep?level=1, cycle 1): the answer is not json", "sleeping now"]),
        ("die", "", &["request 1 (sleep: POST /sleep?level=1, cycle 1): the server exited 3 during the request"]),
    ];
    for (mode, extra, says) in cases {
        let work = tempfile::tempdir().expect("tempdir");
        let cycle = one_request(work.path(), extra);
        let text = std::fs::read_to_string(&cycle).expect("cycle");
        std::fs::write(&cycle, format!("ready = \"GET /health\"\n{text}")).expect("write");
        let port = free_port().to_string();
        let url = format!("http://127.0.0.1:{port}");
        let (dir, output) = drive(
            work.path(),
            &[
                "--cycle",
                cycle.to_str().expect("utf-8"),
                "--url",
                &url,
                "--",
                "python3",
                VLLM_LIKE,
                "--port",
                &port,
                "--weights-mib",
                "8",
                "--kv-mib",
                "8",
                "--misbehave",
                mode,
            ],
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
    assert_eq!(
        lines,
        [
            "POST /release_memory_occupation",
            "POST /resume_memory_occupation"
        ]
    );
    let released = mib(&rows[0], "host_send_bytes") - mib(&rows[0], "host_settled_bytes");
    assert!(
        (140.0..180.0).contains(&released),
        "released {released:.0} MiB"
    );
    // Attached, not started: the level before the load is not known.
    assert_eq!(rows[0]["host_back"], "", "{:?}", rows[0]);
    let resumed = mib(&rows[1], "host_settled_bytes") - mib(&rows[1], "host_send_bytes");
    assert!(
        (140.0..180.0).contains(&resumed),
        "resumed {resumed:.0} MiB"
    );
}
