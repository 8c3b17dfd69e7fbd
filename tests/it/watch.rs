//! `memrel watch`: a server measured until SIGTERM, its OpenMetrics served
//! while it runs and equal to the record it leaves.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

use super::common::*;
use super::drive::{start_server, stop, VLLM_LIKE};

/// `memrel watch --dir DIR --interval-ms 20 ARGS…` started, with the
/// address of its /metrics once it says it (stderr keeps being drained).
fn start_watch(dir: &Path, args: &[&str]) -> (Child, String) {
    let mut watch = memrel()
        .arg("watch")
        .arg("--dir")
        .arg(dir)
        .args(["--interval-ms", "20", "--metrics", "127.0.0.1:0"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("memrel starts");
    let stderr = watch.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut addr = None;
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(at) = line.strip_prefix("memrel: OpenMetrics at http://") {
                addr = Some(at.trim_end_matches("/metrics").to_string());
            }
            // Said once the directory is live: marks are taken from then on.
            if line.contains("mark phases with") {
                let _ = tx.send(addr.take());
            }
        }
    });
    let addr = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("memrel watch says it measures")
        .expect("memrel watch says where its /metrics is first");
    (watch, addr)
}

/// One scrape: each sample line's `name{labels}` and value.
fn scrape(addr: &str) -> HashMap<String, f64> {
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

fn mark(dir: &Path, phase: &str) {
    let output = memrel()
        .arg("mark")
        .arg(dir)
        .arg(phase)
        .output()
        .expect("memrel mark starts");
    assert!(output.status.success(), "{}", streams(&output));
}

fn post(port: u16, path: &str) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer");
    assert!(answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.0 200"), "{answer}");
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

    let kill = Command::new("kill")
        .arg("-TERM")
        .arg(watch.id().to_string())
        .status()
        .expect("kill starts");
    assert!(kill.success());
    let output = watch.wait_with_output().expect("memrel watch ends");
    assert!(output.status.success(), "{}", streams(&output));
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
