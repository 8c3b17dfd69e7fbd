//! The OpenMetrics exposition (issue 50, item 3) end to end: a real record
//! (`memrel exec` of a Python program marking load, sleep, wake and unload),
//! served by `memrel report DIR --metrics 127.0.0.1:0` (the stepping stone
//! to `memrel watch --metrics`), fetched over HTTP and parsed by
//! `prometheus_client`'s own parser, every value checked against the files
//! on disk (summary.json, samples.csv, events.csv); `watch_servers::` runs
//! the same check on a live `memrel watch --metrics`. The parser's test needs
//! a python with prometheus_client: `MEMREL_TEST_PYTHON=<python> cargo test
//! --release --test it openmetrics_ -- --ignored` (.ci/run makes one).
//! `--metrics-once` is checked on a results directory of each command
//! (run, exec, attach, drive) without it.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::common::*;

/// Two cycles of a 64 MiB blob, each with a sleep and a wake.
const PROGRAM: &str = r#"
import memrel
memrel.baseline(0.2)
for cycle in range(memrel.cycles()):
    with memrel.phase("load", model="blob"):
        blob = bytearray(64 << 20)
        for i in range(0, len(blob), 4096):
            blob[i] = 1
    with memrel.phase("sleep", model="blob"):
        pass
    with memrel.phase("wake", model="blob"):
        pass
    with memrel.phase("unload", model="blob"):
        del blob
    memrel.release()
    memrel.settle(0.1)
"#;

/// prometheus_client's parser on memrel's OpenMetrics (argv: MODE SOURCE
/// TARGET [EXPECT]). `record URL DIR EXPECT`: fetches URL, parses it and
/// checks every series against the results directory DIR, and that the run
/// had what EXPECT says (JSON: `cycles`, `sleeps`, `wakes`, the `asleep`
/// values sorted, `host_cycle_series` at least); prints `checked N`.
/// `scrape URL FILE`:
/// fetches and parses URL, keeps the text in FILE (a live watch's endpoint,
/// scraped while it runs); prints `scraped N`. `live FILE DIR EXPECT`: FILE's
/// series against DIR, the record the watch left once it ended, as
/// `record` does but for what moved after the scrape (the current bytes,
/// the samples' count); prints `checked N`.
const CHECK: &str = r#"
import csv, gzip, json, os, sys, urllib.request
from prometheus_client.openmetrics.parser import text_string_to_metric_families

mode, src, d = sys.argv[1:4]
assert mode in ("record", "scrape", "live"), mode
if mode == "live":
    with open(src) as f:
        body = f.read()
else:
    with urllib.request.urlopen(src) as r:
        ctype, body = r.headers["Content-Type"], r.read().decode()
    assert ctype == "application/openmetrics-text; version=1.0.0; charset=utf-8", ctype
got = {}
for fam in text_string_to_metric_families(body):
    for s in fam.samples:
        key = (s.name, tuple(sorted(s.labels.items())))
        assert key not in got, key
        got[key] = s.value
if mode == "scrape":
    with open(d, "w") as f:
        f.write(body)
    print("scraped", len(got))
    sys.exit(0)

def rows(name):
    p = os.path.join(d, name)
    f = open(p, newline="") if os.path.exists(p) else gzip.open(p + ".gz", "rt", newline="")
    with f:
        return list(csv.DictReader(f))

summary = json.load(open(os.path.join(d, "summary.json")))
runs = json.load(open(os.path.join(d, "runs.json")))["runs"]
run = summary["runs"][-1]
pid = str(runs[-1]["pid"])
samples = [r for r in rows("samples.csv") if int(r["run"]) == run["run"]]
events = [e for e in rows("events.csv") if int(e["run"]) == run["run"]]
want = {}

def put(name, value, **labels):
    if value is None or value == "":
        return
    want[(name, tuple(sorted((k, v) for k, v in labels.items() if v)))] = float(value)

assert run["samples"] == len(samples), (run["samples"], len(samples))
# A live scrape showed the latest sample then: the samples_total-th on disk
# (the watch went on sampling until it ended); a record shows its last.
samples_total = got.get(("memrel_samples_total", ()), 0) if mode == "live" else run["samples"]
assert 0 < samples_total <= len(samples), (samples_total, len(samples))
last = samples[int(samples_total) - 1]
columns = {
    ("host", ""): "rss_bytes", ("host", "anon"): "anon_bytes", ("host", "file"): "file_bytes",
    ("container", ""): "container_bytes", ("container", "usage"): "container_usage_bytes",
    ("container", "anon"): "container_anon_bytes", ("container", "file"): "container_file_bytes",
    ("page_cache", ""): "page_cache_bytes",
}
for (resource, part), column in columns.items():
    put("memrel_memory_bytes", last[column], resource=resource, part=part, pid=pid)
gpus = [e for e in last["gpu_vram"].split() if e != "-"]
for e in gpus:
    gpu, b = e.split(":")
    put("memrel_memory_bytes", b, resource="cuda:" + gpu, pid=pid)
if not gpus and last["gpu_vram"] != "-":
    put("memrel_memory_bytes", last["vram_bytes"], resource="cuda:0", pid=pid)
for e in last["readings"].split():
    k, b = e.split("=")
    resource, _, part = k.partition(".")
    put("memrel_memory_bytes", b, resource=resource, part=part, pid=pid)

def model_of(cycle):
    return next((e["model"] for e in events if int(e["cycle"]) == cycle and e["model"]), "")

for r in run["resources"]:
    if not r.get("cycles"):
        continue
    c = r["cycles"][-1]
    at = dict(model=model_of(c["cycle"]), resource=r["resource"])
    put("memrel_cycle_retained_bytes", c["retained_bytes"], **at)
    put("memrel_cycle_released_ratio", c.get("released_fraction"), **at)
    put("memrel_cycle_settle_seconds", c.get("settle_s"), **at)
    put("memrel_cycle_late_bytes", c.get("late_bytes"), **at)
    put("memrel_cycle_number", c["cycle"], **at)
put("memrel_cycles_total", len(run["cycles"]))
put("memrel_sleeps_total", sum(1 for s in run.get("sleeps", []) if s["sleep_s"] is not None))
put("memrel_wakes_total", sum(1 for s in run.get("sleeps", []) if s["wake_s"] is not None))
put("memrel_samples_total", samples_total)
# The counters are the edges of events.csv: each cycle's, each sleep's and
# wake's end.
ends = [e for e in events if e["edge"] == "end"]
assert want[("memrel_cycles_total", ())] == len({e["cycle"] for e in ends if int(e["cycle"]) > 0}), ends
for phase in ("sleep", "wake"):
    assert want[(f"memrel_{phase}s_total", ())] == sum(1 for e in ends if e["phase"] == phase), ends
asleep = {}
for e in events:
    if e["edge"] == "end" and e["phase"] in ("sleep", "wake"):
        asleep[e["model"]] = 1 if e["phase"] == "sleep" else 0
for model, v in asleep.items():
    put("memrel_asleep", v, model=model)

# memrel's own cost is the serving process's: present and plausible.
own = [("memrel_process_cpu_seconds_total", ()), ("memrel_process_resident_memory_bytes", ())]
for key in own:
    assert key in got, key
assert got[own[0]] >= 0 and got[own[1]] > (1 << 20), got
for key in own:
    del got[key]

assert got == want, "\n".join(
    [f"served, not on disk: {k} {v}" for k, v in got.items() if want.get(k) != v]
    + [f"on disk, not served: {k} {v}" for k, v in want.items() if got.get(k) != v])
# What the run had (argv[4], JSON): its counters, its models' sleep states
# (sorted) and at least these cycle series of host memory.
expect = json.loads(sys.argv[4])
for name in ("cycles", "sleeps", "wakes"):
    assert want[(f"memrel_{name}_total", ())] == expect[name], (name, want)
assert sorted(v for k, v in want.items() if k[0] == "memrel_asleep") == expect["asleep"], want
host = {k[0] for k in want if k[0].startswith("memrel_cycle_") and ("resource", "host") in k[1]}
assert set(expect["host_cycle_series"]) <= host, (host, want)
print("checked", len(want) + len(own))
"#;

/// `memrel exec --cycles 2 -- python3 PROGRAM`: the temp dir and the results
/// directory (also the record `examples::` checks the examples' names against).
pub(super) fn exec_record() -> (tempfile::TempDir, PathBuf) {
    let out = tempfile::tempdir().expect("tempdir");
    let path = out.path().join("prog.py");
    std::fs::write(&path, PROGRAM).expect("write prog.py");
    let output = memrel()
        .args(["exec", "--cycles", "2", "--out"])
        .arg(out.path())
        .arg("--")
        .arg("python3")
        .arg(&path)
        .output()
        .expect("memrel starts");
    assert!(output.status.success(), "{}", streams(&output));
    let dir = only_results_dir(out.path(), "exec");
    (out, dir)
}

/// A child killed when dropped (the server runs until killed).
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The python with prometheus_client the parser's tests need
/// (`MEMREL_TEST_PYTHON`).
pub(super) fn prometheus_python() -> String {
    std::env::var("MEMREL_TEST_PYTHON").unwrap_or_else(|_| {
        panic!("this test needs a python3 with prometheus_client: MEMREL_TEST_PYTHON=/path/to/venv/bin/python")
    })
}

/// [`CHECK`] run by `python` as `MODE SOURCE TARGET [EXPECT]` (no EXPECT
/// for `scrape`); it must succeed.
pub(super) fn prometheus_check(
    python: &str,
    mode: &str,
    (source, target): (&OsStr, &Path),
    expect: Option<&str>,
) {
    let check = Command::new(python)
        .arg("-c")
        .arg(CHECK)
        .args([OsStr::new(mode), source, target.as_os_str()])
        .args(expect)
        .output()
        .expect("python starts");
    assert!(check.status.success(), "{}", streams(&check));
    let said = if mode == "scrape" {
        "scraped "
    } else {
        "checked "
    };
    assert!(text(&check.stdout).starts_with(said), "{}", streams(&check));
}

#[test]
#[ignore = "needs prometheus_client: MEMREL_TEST_PYTHON=<python> cargo test --release --test it openmetrics_ -- --ignored (CI runs it)"]
fn openmetrics_served_parses_with_prometheus_client_and_equals_the_record() {
    let python = prometheus_python();
    let (_tmp, dir) = exec_record();
    let mut server = Killed(
        memrel()
            .arg("report")
            .arg(&dir)
            .args(["--metrics", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("memrel starts"),
    );
    let stdout = server.0.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).expect("a line");
    let url = line
        .trim()
        .strip_prefix("serving ")
        .unwrap_or_else(|| panic!("no address: {line:?}"))
        .to_string();
    assert!(url.ends_with("/metrics"), "{url}");
    let expect = r#"{"cycles": 2, "sleeps": 2, "wakes": 2, "asleep": [0],
        "host_cycle_series": ["memrel_cycle_retained_bytes", "memrel_cycle_number"]}"#;
    prometheus_check(&python, "record", (url.as_ref(), &dir), Some(expect));
    // Elsewhere: 404, and the server still answers after it.
    let other = Command::new(&python)
        .arg("-c")
        .arg("import sys, urllib.request, urllib.error\ntry:\n    urllib.request.urlopen(sys.argv[1])\nexcept urllib.error.HTTPError as e:\n    print(e.code)\n")
        .arg(url.replace("/metrics", "/other"))
        .output()
        .expect("python starts");
    assert_eq!(text(&other.stdout).trim(), "404", "{}", streams(&other));
}

/// The exposition's lines are well formed: the header lines, `NAME{…} VALUE`
/// samples, `# EOF` once and last.
fn assert_exposition(text: &str, dir: &Path) {
    assert!(text.ends_with("# EOF\n"), "{}: {text}", dir.display());
    assert_eq!(text.matches("# EOF").count(), 1, "{text}");
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (name, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        assert!(name.starts_with("memrel_"), "{line}");
        assert!(value.parse::<f64>().is_ok(), "{line}");
    }
    assert!(
        text.contains("\nmemrel_memory_bytes{resource=\"host\",pid=\""),
        "{}: {text}",
        dir.display()
    );
    assert!(text.contains("\nmemrel_samples_total "), "{text}");
}

#[test]
fn metrics_once_renders_a_results_directory_of_each_command() {
    let reference = Path::new(env!("CARGO_MANIFEST_DIR")).join("results/reference");
    let (_tmp, exec_dir) = exec_record();
    let dirs = [
        reference.join("cpu-trim"),
        reference.join("sleep/attach-server"),
        reference.join("drive-pinned/drive"),
        reference.join("multi-gpu/tp-attach/tp-attach/20261126-093806"),
        exec_dir.clone(),
    ];
    for dir in &dirs {
        let before = std::fs::read_dir(dir).expect("dir").count();
        let output = memrel()
            .arg("report")
            .arg(dir)
            .arg("--metrics-once")
            .output()
            .expect("memrel starts");
        assert!(output.status.success(), "{}", streams(&output));
        assert_exposition(&text(&output.stdout), dir);
        assert_eq!(std::fs::read_dir(dir).expect("dir").count(), before);
    }
    let output = memrel()
        .arg("report")
        .arg(&exec_dir)
        .arg("--metrics-once")
        .output()
        .expect("memrel starts");
    let text = text(&output.stdout);
    for series in [
        "memrel_cycles_total 2\n",
        "memrel_sleeps_total 2\n",
        "memrel_wakes_total 2\n",
        "memrel_asleep{model=\"blob\"} 0\n",
        "memrel_cycle_retained_bytes{model=\"blob\",resource=\"host\"} ",
    ] {
        assert!(text.contains(series), "{series} not in {text}");
    }
}
