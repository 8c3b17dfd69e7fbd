//! `memrel watch` against every server shape the tests have (issue 50,
//! items 3 and 5). The SGLang- and v2-shaped servers of
//! `tests/fixtures/servers/` driven by `memrel drive` through the watch's
//! proxy: the watch sees the client's requests as edges, and what it
//! records of each cycle is what drive reports of it, within 1 MiB (the
//! vLLM- and Ollama-shaped ones are in `watch::`, the real MLServer in
//! `mlserver::`, which drives it through a watch with this module's
//! [`drive_through_watch`]). And the live `/metrics` of a watch, scraped
//! while it runs, parsed by prometheus_client's own parser and checked
//! value by value against the record the watch leaves at SIGTERM (needs a
//! python with prometheus_client: `MEMREL_TEST_PYTHON=<python> cargo test
//! --release --test it openmetrics_ -- --ignored`, as .ci/run does).

use std::path::{Path, PathBuf};
use std::process::Stdio;

use super::alone::PrivatePython;
use super::common::*;
use super::drive::{stop, VLLM_LIKE};
use super::openmetrics::{prometheus_check, prometheus_python};
use super::watch::{
    end_watch, host_retained, scrape, start_watch_proxy, watch_with_proxy_equals_drive,
};

const V2_LIKE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/servers/v2_like.py"
);

#[test]
fn a_watch_with_proxy_sees_an_sglang_clients_releases_and_resumes_and_equals_drive() {
    // vllm_like.py also serves SGLang's /release_memory_occupation and
    // /resume_memory_occupation (as `drive::` drives it).
    watch_with_proxy_equals_drive(
        VLLM_LIKE,
        &["--weights-mib", "96", "--kv-mib", "64"],
        &["--server", "sglang"],
        &[],
    );
}

#[test]
fn a_watch_with_proxy_sees_a_v2_clients_loads_and_unloads_and_equals_drive() {
    let work = tempfile::tempdir().expect("tempdir");
    let args = ["--model-mib", "128"];
    let python = PrivatePython::for_server(&work.path().join("python"), V2_LIKE, &args);
    let (server, port) = python.start_server(V2_LIKE, &args);
    // The model lives in the server's worker subprocess, which outlives the
    // server by design (as MLServer's did): stopped by its pid here.
    let workers = Killed(children_of(server.id()));
    assert_eq!(workers.0.len(), 1, "the v2-shaped server's worker");
    let url = format!("http://127.0.0.1:{port}");
    let run = drive_through_watch(
        work.path(),
        (&url, server.id()),
        &["--server", "v2", "--model", "iris"],
        (2, "0.5"),
        |_| {},
    );
    stop(server);
    drop(workers);
    run.assert_equals_drive_alone(2, 96.0 * MIB, &[]);
}

/// Processes killed (SIGKILL) when dropped, a failed test's too.
pub(crate) struct Killed(pub(crate) Vec<i64>);

impl Drop for Killed {
    fn drop(&mut self) {
        for pid in &self.0 {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// The results directories of a watch and of a drive through its proxy.
pub(crate) struct Watched {
    pub(crate) watched: PathBuf,
    pub(crate) driven: PathBuf,
}

/// `memrel watch --pid PID --url URL --proxy … --settle SETTLE PRESET…`
/// of a running server, while `memrel drive --cycles CYCLES
/// --warmup-cycles 0 --settle SETTLE PRESET…` drives it through the proxy;
/// once the watch serves the cycles closed, `while_running` gets its
/// /metrics address, then the watch gets SIGTERM. Both directories under
/// `work`.
pub(crate) fn drive_through_watch(
    work: &Path,
    (url, pid): (&str, u32),
    preset: &[&str],
    (cycles, settle): (u32, &str),
    while_running: impl FnOnce(&str),
) -> Watched {
    let pid = pid.to_string();
    let watched = work.join("watch");
    let mut args = vec!["--pid", &pid, "--url", url, "--proxy", "127.0.0.1:0"];
    args.extend_from_slice(&["--settle", settle]);
    args.extend_from_slice(preset);
    let (watch, metrics, proxy) = start_watch_proxy(&watched, &args);
    let proxy_url = format!(
        "http://{}",
        proxy.expect("memrel watch says where its proxy is")
    );
    let driven = work.join("drive");
    let cycles_arg = cycles.to_string();
    let output = memrel()
        .arg("drive")
        .arg("--dir")
        .arg(&driven)
        .args(["--url", &proxy_url, "--pid", &pid, "--cycles", &cycles_arg])
        .args([
            "--warmup-cycles",
            "0",
            "--settle",
            settle,
            "--interval-ms",
            "20",
        ])
        .args(preset)
        .stdin(Stdio::null())
        .output()
        .expect("memrel drive starts");
    assert!(output.status.success(), "{}", streams(&output));
    wait_for("the watch serves the cycles drive drove", || {
        scrape(&metrics).get("memrel_cycles_total") == Some(&f64::from(cycles))
    });
    while_running(&metrics);
    end_watch(watch);
    Watched { watched, driven }
}

impl Watched {
    /// Every edge of the watch came from a request its proxy forwarded, and
    /// each of its `cycles` is drive's within `tolerance_bytes` (retained
    /// and loaded host bytes); drive read more than `loaded_bytes` loaded.
    pub(crate) fn assert_equals_drive(
        &self,
        cycles: usize,
        loaded_bytes: f64,
        tolerance_bytes: f64,
    ) {
        for edge in csv_rows(&self.watched.join("events.csv")) {
            assert!(
                edge["note"].starts_with("memrel watch --proxy: "),
                "{edge:?}"
            );
        }
        let watched = host_retained(&self.watched);
        let driven = host_retained(&self.driven);
        assert_eq!(watched.len(), cycles, "{watched:?}");
        assert_eq!(driven.len(), cycles, "{driven:?}");
        for ((wc, w, wl), (dc, d, dl)) in watched.iter().zip(&driven) {
            assert_eq!(wc, dc, "the same cycle numbers");
            let what = format!("cycle {wc}: watch {w} B retained, {wl} B loaded; drive {d}, {dl}");
            assert!((w - d).abs() <= tolerance_bytes, "{what}");
            assert!((wl - dl).abs() <= tolerance_bytes, "{what}");
            assert!(*dl > loaded_bytes, "{what}");
        }
    }

    /// Drive's and the watch's readings of a server on a private python
    /// (`alone::PrivatePython`: no process outside its tree shares its
    /// pages) agree within 1 MiB: the whole host and its anonymous bytes at
    /// every edge but those in `moving` (`"cycle K PHASE EDGE"` less the
    /// cycle: an edge at which the server still moves after its answer,
    /// such as an Ollama unload's end, whose runner exits just after; its
    /// settle end is compared), and each cycle's retained and loaded bytes.
    pub(crate) fn assert_equals_drive_alone(
        &self,
        cycles: usize,
        loaded_bytes: f64,
        moving: &[&str],
    ) {
        self.assert_edges_equal_drive("rss_bytes", MIB, moving);
        self.assert_anon_equals_drive(MIB, moving);
        self.assert_equals_drive(cycles, loaded_bytes, MIB);
    }

    /// The watch read drive's edges, and `column` at each edge but those
    /// in `moving` is within `tolerance_bytes` of drive's.
    pub(crate) fn assert_edges_equal_drive(
        &self,
        column: &str,
        tolerance_bytes: f64,
        moving: &[&str],
    ) {
        let edges = |dir: &Path| -> Vec<(String, String, f64)> {
            csv_rows(&dir.join("events.csv"))
                .iter()
                .map(|e| {
                    let what = format!("{} {}", e["phase"], e["edge"]);
                    let edge = format!("cycle {} {what}", e["cycle"]);
                    (edge, what, e[column].parse().expect(column))
                })
                .collect()
        };
        let (watched, driven) = (edges(&self.watched), edges(&self.driven));
        let names = |e: &[(String, String, f64)]| e.iter().map(|e| e.0.clone()).collect::<Vec<_>>();
        assert_eq!(names(&watched), names(&driven), "the same edges");
        let mut largest = 0.0_f64;
        for ((edge, what, w), (.., d)) in watched.iter().zip(&driven) {
            if moving.contains(&what.as_str()) {
                continue;
            }
            largest = largest.max((w - d).abs());
            assert!(
                (w - d).abs() <= tolerance_bytes,
                "{edge}: {column}: watch {w} B, drive {d} B"
            );
        }
        eprintln!("{column}: watch and drive at most {largest} B apart at an edge");
    }

    /// The watch read drive's edges, and the host's anonymous bytes at
    /// each but those in `moving` (and each cycle's retained anonymous
    /// bytes) within `tolerance_bytes` of drive's: anonymous memory is the
    /// server's own, where the Pss of shared file pages also moves with
    /// processes outside it between the two readings of an edge.
    pub(crate) fn assert_anon_equals_drive(&self, tolerance_bytes: f64, moving: &[&str]) {
        self.assert_edges_equal_drive("anon_bytes", tolerance_bytes, moving);
        let retained = |dir: &Path| -> Vec<f64> {
            summary(dir)["runs"][0]["resources"][0]["cycles"]
                .as_array()
                .expect("cycles")
                .iter()
                .map(|c| c["retained_anon_bytes"].as_f64().expect("retained anon"))
                .collect()
        };
        let (watched, driven) = (retained(&self.watched), retained(&self.driven));
        assert_eq!(watched.len(), driven.len());
        for (w, d) in watched.iter().zip(&driven) {
            assert!(
                (w - d).abs() <= tolerance_bytes,
                "retained anon: watch {w} B, drive {d} B"
            );
        }
    }
}

/// The live endpoint of a watch of a server of `script`, scraped after
/// drive's two cycles closed while the watch still ran, parsed by
/// prometheus_client (`openmetrics::CHECK`, mode `live`) and checked
/// against the record the watch left at SIGTERM, and what `expect` says the
/// run had (CHECK's EXPECT). The record's truth is its summary.json (what
/// `memrel report --metrics` of the directory renders from): each cycle
/// series (retained, released fraction, settle seconds, late bytes, cycle
/// number) equals the last closed cycle's there, per model and resource;
/// the counters equal events.csv's end edges; the sleep states its last
/// sleep or wake. What moved after the scrape legitimately differs from the
/// final record: the current bytes are the sample the watch had then (the
/// samples_total-th of samples.csv, which the watch kept appending to
/// until it ended), samples_total ≤ the samples on disk, and memrel's own
/// cost is only checked present and plausible.
fn live_metrics_equal_the_record(
    (script, server_args): (&str, &[&str]),
    preset: &[&str],
    expect: &str,
) {
    let prometheus = prometheus_python();
    let work = tempfile::tempdir().expect("tempdir");
    let python = PrivatePython::for_server(&work.path().join("python"), script, server_args);
    let (server, port) = python.start_server(script, server_args);
    let children = Killed(children_of(server.id()));
    let url = format!("http://127.0.0.1:{port}");
    let scraped = work.path().join("scraped.txt");
    let run = drive_through_watch(work.path(), (&url, server.id()), preset, (2, "0.5"), |at| {
        let url = format!("http://{at}/metrics");
        prometheus_check(&prometheus, "scrape", (url.as_ref(), &scraped), None);
    });
    stop(server);
    drop(children);
    let source = (scraped.as_os_str(), run.watched.as_path());
    prometheus_check(&prometheus, "live", source, Some(expect));
    run.assert_equals_drive_alone(2, 96.0 * MIB, &[]);
}

/// Sleeps and wakes: the counters and the sleep state (a sleep/wake cycle
/// has no unload, so no settle or late bytes; its released fraction is
/// there only where the baseline was below the loaded server).
#[test]
#[ignore = "needs prometheus_client: MEMREL_TEST_PYTHON=<python> cargo test --release --test it openmetrics_ -- --ignored (CI runs it)"]
fn openmetrics_of_a_live_watch_of_a_vllm_server_parse_with_prometheus_client_and_equal_the_record()
{
    live_metrics_equal_the_record(
        (VLLM_LIKE, &["--weights-mib", "96", "--kv-mib", "64"]),
        &["--server", "vllm"],
        r#"{"cycles": 2, "sleeps": 2, "wakes": 2, "asleep": [0], "host_cycle_series":
            ["memrel_cycle_retained_bytes", "memrel_cycle_number"]}"#,
    );
}

/// Loads and unloads of a model (the v2-shaped server: the Ollama-shaped
/// one prints the MEMREL_TEST_ variables it starts with before its port):
/// each cycle series, settle seconds and late bytes too, with the model's
/// label.
#[test]
#[ignore = "needs prometheus_client: MEMREL_TEST_PYTHON=<python> cargo test --release --test it openmetrics_ -- --ignored (CI runs it)"]
fn openmetrics_of_a_live_watch_of_a_v2_server_parse_with_prometheus_client_and_equal_the_record() {
    live_metrics_equal_the_record(
        (V2_LIKE, &["--model-mib", "128"]),
        &["--server", "v2", "--model", "iris"],
        r#"{"cycles": 2, "sleeps": 0, "wakes": 0, "asleep": [], "host_cycle_series":
            ["memrel_cycle_retained_bytes", "memrel_cycle_released_ratio",
             "memrel_cycle_settle_seconds", "memrel_cycle_late_bytes", "memrel_cycle_number"]}"#,
    );
}
