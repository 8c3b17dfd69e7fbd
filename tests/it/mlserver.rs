//! A real model server, installed from PyPI (issue 46 line 6): Seldon
//! MLServer with its scikit-learn runtime, started by `memrel drive --server
//! v2` under `drop`, `trim-threshold-env` and `jemalloc`, 3 runs each, with
//! an independent /proc sampler beside memrel.
//!
//! Needs a venv with MLServer (`.ci/mlserver-requirements.txt`):
//! `MEMREL_TEST_MLSERVER=<venv> cargo test --release --test it mlserver_ --
//! --ignored` (.ci/run installs it and runs this).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;

const MIB: f64 = 1024.0 * 1024.0;
/// The settle window: memory is read this long after each answer, and the
/// independent sampler's readings of the quiet part of it are compared.
const SETTLE_S: f64 = 2.0;
/// Left out of each quiet window at its start and its end: the sampler's
/// clock and memrel's agree to the time memrel takes to print its first
/// line (milliseconds), far less than this.
const MARGIN_S: f64 = 0.4;

/// The venv with MLServer (`MEMREL_TEST_MLSERVER`).
fn venv() -> PathBuf {
    let dir = std::env::var("MEMREL_TEST_MLSERVER").unwrap_or_else(|_| {
        panic!(
            "this test needs a venv with MLServer: python3 -m venv V && V/bin/pip install -r \
             .ci/mlserver-requirements.txt, then MEMREL_TEST_MLSERVER=V cargo test --release \
             --test it mlserver_ -- --ignored"
        )
    });
    PathBuf::from(dir)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A model repository with one scikit-learn model `trees` (extra trees on
/// synthetic data, ~180 MiB in memory as thousands of node arrays: the
/// allocations a heap keeps), and MLServer's settings on free ports,
/// loading nothing at start. Returns the HTTP port.
fn model_repository(venv: &Path, repo: &Path) -> u16 {
    let model = repo.join("trees");
    std::fs::create_dir_all(&model).expect("mkdir");
    let train = "import sys, joblib\n\
                 from sklearn.datasets import make_classification\n\
                 from sklearn.ensemble import ExtraTreesClassifier\n\
                 X, y = make_classification(n_samples=20000, n_features=20, n_informative=10, random_state=0)\n\
                 m = ExtraTreesClassifier(n_estimators=100, max_features=1, random_state=0, n_jobs=1).fit(X, y)\n\
                 joblib.dump(m, sys.argv[1])\n";
    let status = std::process::Command::new(venv.join("bin/python"))
        .args(["-c", train])
        .arg(model.join("model.joblib"))
        .status()
        .expect("python starts");
    assert!(status.success(), "training the model failed");
    std::fs::write(
        model.join("model-settings.json"),
        r#"{"name":"trees","implementation":"mlserver_sklearn.SKLearnModel","parameters":{"uri":"./model.joblib"}}"#,
    )
    .expect("model-settings.json");
    let http = free_port();
    std::fs::write(
        repo.join("settings.json"),
        format!(
            r#"{{"http_port":{http},"grpc_port":{},"metrics_port":{},"load_models_at_startup":false}}"#,
            free_port(),
            free_port()
        ),
    )
    .expect("settings.json");
    http
}

/// Pss of every process below `root` (not `root` itself), from
/// /proc/PID/smaps_rollup: what memrel's host reading of a server's tree is,
/// read by this test on its own.
fn tree_pss_bytes(root: u32) -> Option<u64> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        if let Some(ppid) = after.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut todo = children.get(&root).cloned().unwrap_or_default();
    if todo.is_empty() {
        return None;
    }
    let mut kib = 0u64;
    while let Some(pid) = todo.pop() {
        todo.extend(children.get(&pid).cloned().unwrap_or_default());
        let rollup =
            std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
        kib += rollup
            .lines()
            .find_map(|l| l.strip_prefix("Pss:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Some(kib * 1024)
}

#[test]
#[ignore = "needs MLServer: MEMREL_TEST_MLSERVER=<venv> cargo test --release --test it mlserver_ -- --ignored (CI runs it)"]
fn mlserver_under_three_strategies_agrees_with_proc_and_is_advised_the_one_that_gives_back() {
    let venv = venv();
    let work = tempfile::tempdir().expect("tempdir");
    let repo = work.path().join("repository");
    let port = model_repository(&venv, &repo);
    let dir = work.path().join("drive");
    let path = format!(
        "{}:{}",
        venv.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let settle = SETTLE_S.to_string();
    // MLServer writes its metrics' files into .metrics/ of where it starts.
    let mut child = memrel()
        .current_dir(work.path())
        .env("PATH", &path)
        .arg("drive")
        .arg("--dir")
        .arg(&dir)
        .args(["--server", "v2", "--model", "trees", "--cycles", "2"])
        .args([
            "--settle",
            &settle,
            "--ready-timeout",
            "300",
            "--repeat",
            "3",
        ])
        .args(["--strategy", "drop", "--strategy", "trim-threshold-env"])
        .args(["--strategy", "jemalloc"])
        .arg("--url")
        .arg(format!("http://127.0.0.1:{port}"))
        .args(["--", "mlserver", "start"])
        .arg(&repo)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("memrel starts");
    let t0 = Instant::now();
    let root = child.id();

    // The independent sampler: every 20 ms, the Pss of memrel's children.
    let readings: Arc<Mutex<Vec<(f64, u64)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (readings, stop) = (readings.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let t = t0.elapsed().as_secs_f64();
                if let Some(bytes) = tree_pss_bytes(root) {
                    readings.lock().expect("lock").push((t, bytes));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    // Each run's clock zero on the test's clock: memrel says "driving … strategy
    // S, repeat K of N" as that run's clock starts.
    let stderr = child.stderr.take().expect("stderr");
    let starts = std::thread::spawn(move || {
        let mut starts: Vec<(String, u32, f64)> = Vec::new();
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let t = t0.elapsed().as_secs_f64();
            if let Some(rest) = line
                .strip_prefix("memrel: driving ")
                .and_then(|l| l.split(", strategy ").nth(1))
            {
                let (strategy, repeat) = rest.split_once(", repeat ").expect("strategy, repeat");
                let k = repeat
                    .split(' ')
                    .next()
                    .and_then(|k| k.parse().ok())
                    .expect("repeat K");
                starts.push((strategy.to_string(), k, t));
            }
            all.push_str(&line);
            all.push('\n');
        }
        (starts, all)
    });
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut stdout)
        .expect("read stdout");
    let status = child.wait().expect("memrel ends");
    stop.store(true, Ordering::Relaxed);
    sampler.join().expect("sampler");
    let (starts, stderr) = starts.join().expect("stderr reader");
    assert!(status.success(), "{stdout}\n{stderr}");
    assert_eq!(starts.len(), 9, "{stderr}");

    // Every settled reading within 2 MiB of the sampler's in the quiet part
    // of its settle window (from when memory stopped moving to the next send).
    let readings = readings.lock().expect("lock").clone();
    let mut checked = Vec::new();
    for (strategy, k, zero) in &starts {
        let rows = csv_rows(
            &dir.join(strategy)
                .join(format!("repeat-{k}"))
                .join("requests.csv"),
        );
        for (i, r) in rows.iter().enumerate() {
            let Ok(settled) = r["host_settled_bytes"].parse::<f64>() else {
                continue;
            };
            let num = |c: &str| r[c].parse::<f64>().unwrap_or(0.0);
            let answer = zero + num("response_t_s") + num("until_s");
            let start = answer + num("settle_s") + MARGIN_S;
            let end = match rows.get(i + 1) {
                Some(next) => zero + num_of(next, "send_t_s"),
                None => answer + num("settle_window_s"),
            } - MARGIN_S;
            let mut inside: Vec<u64> = readings
                .iter()
                .filter(|(t, _)| (start..=end).contains(t))
                .map(|(_, b)| *b)
                .collect();
            let what = format!("{strategy} repeat {k} request {}: {:?}", r["index"], r);
            if end - start < 0.2 {
                // Still moving when the next request went: no quiet part.
                checked.push(format!("{what}: no quiet window"));
                continue;
            }
            assert!(
                !inside.is_empty(),
                "no independent reading in {start:.2}..{end:.2} s: {what}"
            );
            inside.sort_unstable();
            let median = inside[inside.len() / 2] as f64;
            assert!(
                (median - settled).abs() <= 2.0 * MIB,
                "memrel settled {:.1} MiB, /proc {:.1} MiB (median of {}): {what}",
                settled / MIB,
                median / MIB,
                inside.len()
            );
            checked.push(format!(
                "{strategy} {k} #{}: memrel {:.1} MiB, /proc {:.1} MiB",
                r["index"],
                settled / MIB,
                median / MIB
            ));
        }
    }
    let quiet = checked
        .iter()
        .filter(|c| !c.ends_with("no quiet window"))
        .count();
    assert!(
        quiet >= 9 * 5,
        "{quiet} settled readings checked:\n{}",
        checked.join("\n")
    );
    eprintln!("{}", checked.join("\n"));

    // The advice: the strategy that gives back, ranked first, as it goes on
    // MLServer's command line.
    let advised = memrel()
        .arg("advise")
        .arg(&dir)
        .output()
        .expect("memrel starts");
    assert!(advised.status.success(), "{}", streams(&advised));
    let advice = String::from_utf8_lossy(&advised.stdout).into_owned();
    let first = advice.lines().next().unwrap_or_default();
    let compared = memrel()
        .args(["compare", "--out"])
        .arg(work.path())
        .arg(&dir)
        .output()
        .expect("memrel starts");
    let table = String::from_utf8_lossy(&compared.stdout).into_owned();
    assert!(
        first.starts_with("host")
            && first.contains(": use trim-threshold-env (gives back in 3 of 3 runs")
            && first.contains("MALLOC_TRIM_THRESHOLD_=-1 mlserver start"),
        "{advice}\n{table}\n{stdout}"
    );
    eprintln!("{table}\n{advice}");
}

fn num_of(row: &HashMap<String, String>, column: &str) -> f64 {
    row[column].parse().unwrap_or(0.0)
}
