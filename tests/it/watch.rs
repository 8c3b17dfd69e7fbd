//! `memrel watch`: a server measured until SIGTERM, its OpenMetrics served
//! while it runs and equal to the record it leaves.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

use super::alone::PrivatePython;
use super::common::*;
use super::drive::{start_server, stop, OLLAMA_LIKE, VLLM_LIKE};
use super::watch_servers::drive_through_watch;

/// A started `memrel watch`: killed (SIGKILL) and reaped when dropped
/// unless [`end_watch`] ended it, so a test that fails leaves no watch
/// running.
pub(crate) struct Watch(Option<Child>);

impl Watch {
    pub(crate) fn id(&self) -> u32 {
        self.0.as_ref().map_or(0, Child::id)
    }

    /// Waits for the watch to end by itself, its output kept.
    pub(crate) fn wait_with_output(mut self) -> std::io::Result<std::process::Output> {
        let child = self.0.take().expect("a watch not yet ended");
        child.wait_with_output()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `memrel watch --dir DIR --interval-ms 20 ARGS…` started, with the
/// address of its /metrics once it says it (stderr keeps being drained).
fn start_watch(dir: &Path, args: &[&str]) -> (Watch, String) {
    let (watch, metrics, _) = start_watch_proxy(dir, args);
    (watch, metrics)
}

/// [`start_watch`], and the address of its proxy where it has one.
pub(crate) fn start_watch_proxy(dir: &Path, args: &[&str]) -> (Watch, String, Option<String>) {
    let started = start_watch_in(&["--dir".as_ref(), dir.as_os_str()], args);
    (started.child, started.metrics, started.proxy)
}

/// A `memrel watch` started, once it said where it measures.
pub(crate) struct StartedWatch {
    pub(crate) child: Watch,
    /// Its /metrics address.
    pub(crate) metrics: String,
    pub(crate) proxy: Option<String>,
    /// The results directory it said.
    pub(crate) dir: std::path::PathBuf,
}

/// `memrel watch PLACE… --metrics 127.0.0.1:0 [--interval-ms 20] ARGS…`
/// (PLACE: `--dir DIR` or `--out OUT`; 20 ms unless ARGS give
/// --interval-ms), once it says it measures (stderr keeps being drained).
pub(crate) fn start_watch_in(place: &[&std::ffi::OsStr], args: &[&str]) -> StartedWatch {
    let interval: &[&str] = match args.contains(&"--interval-ms") {
        true => &[],
        false => &["--interval-ms", "20"],
    };
    let mut watch = memrel()
        .arg("watch")
        .args(place)
        .args(["--metrics", "127.0.0.1:0"])
        .args(interval)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("memrel starts");
    let stderr = watch.stderr.take().expect("stderr");
    let watch = Watch(Some(watch));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut addr, mut proxy) = (None, None);
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("{line}");
            if let Some(at) = line.strip_prefix("memrel: OpenMetrics at http://") {
                addr = Some(at.trim_end_matches("/metrics").to_string());
            }
            if let Some(at) = line.strip_prefix("memrel: proxy at http://") {
                proxy = at.split(' ').next().map(str::to_string);
            }
            // Said once the directory is live: marks are taken from then on.
            let dir = line
                .strip_prefix("memrel: results in ")
                .and_then(|rest| rest.split("; mark phases with").next());
            if let Some(dir) = dir {
                let _ = tx.send((addr.take(), proxy.take(), std::path::PathBuf::from(dir)));
            }
        }
    });
    let (addr, proxy, dir) = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("memrel watch says it measures");
    StartedWatch {
        child: watch,
        metrics: addr.expect("memrel watch says where its /metrics is first"),
        proxy,
        dir,
    }
}

/// One scrape: each sample line's `name{labels}` and value.
pub(crate) fn scrape(addr: &str) -> HashMap<String, f64> {
    let mut stream = std::net::TcpStream::connect(addr).expect("connect to /metrics");
    write!(stream, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\n\r\n").expect("send");
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("read");
    let body = text.split_once("\r\n\r\n").expect("a head and a body").1;
    assert!(body.ends_with("# EOF\n"), "{body}");
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(series, v)| (series.to_string(), v.parse().expect("a number")))
        .collect()
}

pub(crate) fn mark(dir: &Path, phase: &str) {
    let output = memrel()
        .arg("mark")
        .arg(dir)
        .arg(phase)
        .output()
        .expect("memrel mark starts");
    assert!(output.status.success(), "{}", streams(&output));
}

pub(crate) fn post(port: u16, path: &str) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer");
    assert!(
        answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.0 200"),
        "{answer}"
    );
}

#[test]
fn a_watch_serves_each_closed_cycle_and_the_record_it_leaves_says_the_same() {
    let work = tempfile::tempdir().expect("tempdir");
    let (server, port) = start_server(VLLM_LIKE, &["--weights-mib", "96", "--kv-mib", "64"]);
    let dir = work.path().join("watch");
    let url = format!("http://127.0.0.1:{port}");
    let (watch, addr) = start_watch(&dir, &["--url", &url]);
    // Two sleep/wake cycles, marked from outside as an operator would.
    for _ in 0..2 {
        mark(&dir, "sleep");
        post(port, "/sleep?level=1");
        mark(&dir, "asleep");
        mark(&dir, "wake");
        post(port, "/wake_up");
        mark(&dir, "settle");
    }
    mark(&dir, "end");
    // The edges are read as `mark` returns; the state follows within a tick.
    let mut served = scrape(&addr);
    wait_for("the watch serves two closed cycles", || {
        served = scrape(&addr);
        served.get("memrel_cycles_total") == Some(&2.0)
    });
    assert_eq!(served["memrel_sleeps_total"], 2.0, "{served:?}");
    assert_eq!(served["memrel_wakes_total"], 2.0, "{served:?}");
    assert_eq!(served["memrel_asleep"], 0.0, "{served:?}");
    let pid = server.id();
    let host = served[&format!("memrel_memory_bytes{{resource=\"host\",pid=\"{pid}\"}}")];
    assert!(host > 100.0 * MIB, "the server holds its weights: {host}");
    let retained = served["memrel_cycle_retained_bytes{resource=\"host\"}"];

    end_watch(watch);
    stop(server);
    // What was served is what the record says of the same cycle.
    let summary = summary(&dir);
    let host_run = &summary["runs"][0]["resources"][0];
    assert_eq!(host_run["resource"], "host");
    let cycles = host_run["cycles"].as_array().expect("cycles");
    assert_eq!(cycles.len(), 2, "{host_run}");
    let recorded = cycles[1]["retained_bytes"].as_f64().expect("retained");
    assert!(
        (retained - recorded).abs() <= MIB,
        "served {retained} B, recorded {recorded} B"
    );
}

/// SIGTERM to memrel watch; it must end with its results written.
pub(crate) fn end_watch(mut watch: Watch) {
    let watch = watch.0.take().expect("a watch not yet ended");
    let kill = Command::new("kill")
        .arg("-TERM")
        .arg(watch.id().to_string())
        .status()
        .expect("kill starts");
    assert!(kill.success());
    let output = watch.wait_with_output().expect("memrel watch ends");
    assert!(output.status.success(), "{}", streams(&output));
}

/// Host memory's (cycle, retained, loaded) bytes per cycle in a summary.json.
pub(crate) fn host_retained(dir: &Path) -> Vec<(u64, f64, f64)> {
    let summary = summary(dir);
    let host = &summary["runs"][0]["resources"][0];
    assert_eq!(host["resource"], "host");
    host["cycles"]
        .as_array()
        .expect("cycles")
        .iter()
        .map(|c| {
            let cycle = c["cycle"].as_u64().expect("cycle");
            let loaded = c["loaded_bytes"].as_f64().expect("loaded");
            (
                cycle,
                c["retained_bytes"].as_f64().expect("retained"),
                loaded,
            )
        })
        .collect()
}

/// A server of `script` watched with --proxy (--server PRESET) while
/// `memrel drive` drives it through the proxy
/// (`watch_servers::drive_through_watch`): the watch sees the client's
/// requests as edges, what it records of each cycle is what drive reports
/// of the same cycle within 1 MiB, the server on a private python
/// (`Watched::assert_equals_drive_alone`, which skips the edges in
/// `moving`), and what it served is what it recorded, within 1 MiB.
pub(crate) fn watch_with_proxy_equals_drive(
    script: &str,
    server_args: &[&str],
    preset: &[&str],
    moving: &[&str],
) {
    let work = tempfile::tempdir().expect("tempdir");
    let python = PrivatePython::for_server(&work.path().join("python"), script, server_args);
    let (server, port) = python.start_server(script, server_args);
    let url = format!("http://127.0.0.1:{port}");
    let mut served = HashMap::new();
    let run = drive_through_watch(work.path(), (&url, server.id()), preset, (2, "0.5"), |at| {
        served = scrape(at)
    });
    stop(server);
    // The loaded server: its weights at least (96 or 128 MiB).
    run.assert_equals_drive_alone(2, 96.0 * MIB, moving);
    let (_, recorded, _) = host_retained(&run.watched)[1];
    let series = served
        .iter()
        .find(|(k, _)| {
            k.starts_with("memrel_cycle_retained_bytes{") && k.contains("resource=\"host\"")
        })
        .map(|(_, v)| *v)
        .unwrap_or_else(|| panic!("no host retained series: {served:?}"));
    assert!(
        (series - recorded).abs() <= MIB,
        "served {series} B, recorded {recorded} B"
    );
}

#[test]
fn a_watch_with_proxy_sees_a_vllm_clients_sleeps_and_equals_drive() {
    watch_with_proxy_equals_drive(
        VLLM_LIKE,
        &["--weights-mib", "96", "--kv-mib", "64"],
        &["--server", "vllm"],
        &[],
    );
}

#[test]
fn a_watch_with_proxy_sees_an_ollama_clients_loads_and_unloads_and_equals_drive() {
    watch_with_proxy_equals_drive(
        OLLAMA_LIKE,
        &["--model-mib", "128"],
        &["--server", "ollama", "--model", "tiny"],
        // Ollama answers an unload at once and its runner exits just after.
        &["unload end"],
    );
}

/// SIGTERM stops a watch whose proxy has a request in flight to a server
/// that never answers it: the proxy waits half a second for it (the client
/// then gets its connection closed), never the request's own timeout.
#[test]
fn sigterm_stops_a_watch_whose_proxy_waits_on_a_hung_request() {
    let work = tempfile::tempdir().expect("tempdir");
    // An upstream that takes requests and never answers.
    let hung = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = hung.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in hung.incoming().map_while(Result::ok) {
            held.push(stream);
        }
    });
    let url = format!("http://127.0.0.1:{port}");
    let pid = std::process::id().to_string();
    let args = [
        "--url",
        &url,
        "--pid",
        &pid,
        "--proxy",
        "127.0.0.1:0",
        "--server",
        "vllm",
    ];
    let (watch, _, proxy) = start_watch_proxy(&work.path().join("watch"), &args);
    let proxy = proxy.expect("memrel watch says where its proxy is");
    let mut client = std::net::TcpStream::connect(&proxy).expect("connect to the proxy");
    write!(client, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n").expect("send");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let asked = std::time::Instant::now();
    end_watch(watch);
    let took_s = asked.elapsed().as_secs_f64();
    // 0.5 s of grace and the results written; the old 5 s grace fails here.
    assert!(took_s < 4.0, "memrel watch took {took_s:.2} s to stop");
}

/// A port nothing listens on (bound, then let go), for a server memrel starts.
fn unused_port() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    listener
        .local_addr()
        .expect("local addr")
        .port()
        .to_string()
}

/// The pid a live watch measures (its `live` file says it).
fn watched_pid(dir: &Path) -> u32 {
    let text = std::fs::read_to_string(dir.join("live")).expect("the live file");
    let live: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    live["pid"].as_u64().expect("pid") as u32
}

/// The running processes (zombies not counted) of process group `group`.
fn group_members(group: u32) -> Vec<i64> {
    let pids = std::fs::read_dir("/proc").expect("/proc").flatten();
    pids.filter_map(|e| e.file_name().to_str()?.parse::<i64>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let pgrp = stat
                .rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().nth(2));
            pgrp == Some(group.to_string().as_str()) && alive(*pid)
        })
        .collect()
}

/// `memrel watch --dir DIR --interval-ms 20 ARGS…` with its output kept,
/// once the measurement is live (its `live` file written).
fn start_live_watch(dir: &Path, args: &[&str]) -> Watch {
    let watch = memrel()
        .arg("watch")
        .arg("--dir")
        .arg(dir)
        .args(["--interval-ms", "20"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("memrel starts");
    let watch = Watch(Some(watch));
    wait_for("memrel watch measures", || dir.join("live").exists());
    watch
}

/// `memrel watch -- CMD`: memrel starts a vLLM-shaped server (its output in
/// server.log), waits for it to listen on --url before its proxy starts,
/// sees `memrel drive`'s two cycles through the proxy, and at SIGTERM stops
/// the server (no process of its group left) and writes the results, soon.
#[test]
fn a_watch_of_a_server_it_started_records_the_cycles_and_stops_it_at_sigterm() {
    let work = tempfile::tempdir().expect("tempdir");
    let port = unused_port();
    let url = format!("http://127.0.0.1:{port}");
    let dir = work.path().join("watch");
    let args = [
        "--url",
        &url,
        "--proxy",
        "127.0.0.1:0",
        "--server",
        "vllm",
        "--settle",
        "0.5",
        "--",
        "python3",
        VLLM_LIKE,
        "--port",
        &port,
        "--weights-mib",
        "96",
        "--kv-mib",
        "64",
    ];
    let (watch, metrics, proxy) = start_watch_proxy(&dir, &args);
    let server = watched_pid(&dir);
    let proxy_url = format!(
        "http://{}",
        proxy.expect("memrel watch says where its proxy is")
    );
    let driven = work.path().join("drive");
    let output = memrel()
        .arg("drive")
        .arg("--dir")
        .arg(&driven)
        .args(["--url", &proxy_url, "--pid", &server.to_string()])
        .args(["--cycles", "2", "--warmup-cycles", "0", "--settle", "0.5"])
        .args(["--interval-ms", "20", "--server", "vllm"])
        .stdin(Stdio::null())
        .output()
        .expect("memrel drive starts");
    assert!(output.status.success(), "{}", streams(&output));
    wait_for("the watch serves the two cycles drive drove", || {
        scrape(&metrics).get("memrel_cycles_total") == Some(&2.0)
    });
    assert!(!group_members(server).is_empty(), "the server runs");
    let asked = std::time::Instant::now();
    end_watch(watch);
    let took_s = asked.elapsed().as_secs_f64();
    eprintln!("memrel watch -- CMD stopped {took_s:.2} s after SIGTERM");
    // The server stops at once on SIGTERM: the rest is writing the results.
    assert!(took_s < 3.0, "memrel watch took {took_s:.2} s to stop");
    assert_eq!(
        group_members(server),
        Vec::<i64>::new(),
        "the server's group"
    );
    let header = &runs_json(&dir)["header"];
    assert_eq!(header["attached"]["ended"], "memrel received SIGTERM");
    assert_eq!(runs(&dir)[0]["pid"], server);
    let cycles = host_retained(&dir);
    assert_eq!(cycles.len(), 2, "{cycles:?}");
    assert!(cycles.iter().all(|(_, _, loaded)| *loaded > 96.0 * MIB));
    let log = std::fs::read_to_string(dir.join("server.log")).expect("server.log");
    assert!(log.contains(&format!("PORT {port}")), "{log}");
}

/// A server memrel started that exits on its own ends the watch: the
/// results written, its exit status in the header's `ended` and on stderr.
#[test]
fn a_started_server_that_exits_ends_the_watch_with_its_status() {
    let work = tempfile::tempdir().expect("tempdir");
    let dir = work.path().join("watch");
    let go = work.path().join("go");
    let script = format!(
        "import os, sys, time\nwhile not os.path.exists({:?}): time.sleep(0.02)\nsys.exit(3)",
        go.display().to_string()
    );
    let watch = start_live_watch(&dir, &["--", "python3", "-c", &script]);
    let pid = watched_pid(&dir);
    std::fs::write(&go, "").expect("write go");
    let output = watch.wait_with_output().expect("memrel watch ends");
    assert!(output.status.success(), "{}", streams(&output));
    let header = &runs_json(&dir)["header"];
    assert_eq!(
        header["attached"]["ended"],
        format!("process {pid} exited 3")
    );
    let err = stderr(&output);
    assert!(
        err.contains(&format!("ended: process {pid} exited 3")),
        "{err}"
    );
    assert!(
        err.contains(&format!("server (pid {pid}): exited 3")),
        "{err}"
    );
    assert!(dir.join("server.log").exists());
    assert_intact(&dir, 1);
}

/// At SIGTERM, a started server that ignores SIGTERM gets SIGKILL after half
/// a second: memrel still stops soon, and none of the server is left.
#[test]
fn a_started_server_that_ignores_sigterm_is_killed_within_the_grace() {
    let work = tempfile::tempdir().expect("tempdir");
    let dir = work.path().join("watch");
    let script = "trap '' TERM; while :; do sleep 0.1; done";
    let watch = start_live_watch(&dir, &["--", "sh", "-c", script]);
    let pid = watched_pid(&dir);
    let asked = std::time::Instant::now();
    let kill = Command::new("kill")
        .args(["-TERM", &watch.id().to_string()])
        .status()
        .expect("kill starts");
    assert!(kill.success());
    let output = watch.wait_with_output().expect("memrel watch ends");
    let took_s = asked.elapsed().as_secs_f64();
    assert!(output.status.success(), "{}", streams(&output));
    assert!(took_s < 4.0, "memrel watch took {took_s:.2} s to stop");
    let err = stderr(&output);
    assert!(
        err.contains(&format!(
            "server (pid {pid}): killed by signal 9 (SIGKILL after a 0.5 s grace)"
        )),
        "{err}"
    );
    assert_eq!(group_members(pid), Vec::<i64>::new(), "the server's group");
    assert!(dir.join("summary.json").exists());
}

/// The server is named one way; a server that never listens, or exits
/// first, is an error naming --ready-timeout or its exit, with server.log's
/// last lines, and none of it is left.
#[test]
fn watch_names_its_server_one_way_and_says_why_a_started_one_never_listened() {
    let work = tempfile::tempdir().expect("tempdir");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let taken_url = format!("http://{}", taken.local_addr().expect("addr"));
    let free_url = format!("http://127.0.0.1:{}", unused_port());
    let watch = |name: &str, args: &[&str]| {
        let output = memrel()
            .arg("watch")
            .arg("--dir")
            .arg(work.path().join(name))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("memrel starts");
        assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
        stderr(&output)
    };
    let cases: [(&str, Vec<&str>, &str); 3] = [
        (
            "pid",
            vec!["--pid", "1", "--", "true"],
            "--pid and -- CMD both name the server",
        ),
        (
            "proxy",
            vec!["--proxy", "127.0.0.1:0", "--server", "vllm", "--", "true"],
            "--proxy forwards to --url: name the URL the server -- CMD starts listens on",
        ),
        (
            "taken",
            vec!["--url", &taken_url, "--", "true"],
            "something listens on port",
        ),
    ];
    for (name, args, says) in cases {
        let err = watch(name, &args);
        assert!(err.contains(says), "{name}: {err}");
        assert!(!work.path().join(name).exists(), "{name}: nothing written");
    }
    let err = watch(
        "exits",
        &[
            "--url",
            &free_url,
            "--",
            "sh",
            "-c",
            "echo no model here; exit 1",
        ],
    );
    assert!(
        err.contains("the server exited 1 before it listened on port")
            && err.contains("server.log:\n  no model here"),
        "{err}"
    );
    let err = watch(
        "slow",
        &[
            "--url",
            &free_url,
            "--ready-timeout",
            "0.5",
            "--",
            "sleep",
            "60",
        ],
    );
    assert!(err.contains("within --ready-timeout 0.5 s"), "{err}");
    assert!(err.contains("server.log is empty"), "{err}");
    let pid_line = err
        .lines()
        .find_map(|l| l.strip_prefix("memrel: started the server (pid "));
    let pid: u32 = pid_line
        .and_then(|l| l.split(':').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("memrel says which server it started: {err}"));
    assert_eq!(
        group_members(pid),
        Vec::<i64>::new(),
        "the slow server's group"
    );
}
