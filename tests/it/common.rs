//! Helpers shared by every module of the test binary: the memrel binary with
//! the shared model cache and every worker test hook cleared, runs into a
//! temp dir, results directories and the files in them, small scenarios, and
//! processes found through /proc.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use memrel::record::Record;
use serde_json::Value;

pub const MIB: f64 = 1024.0 * 1024.0;

/// The worker's test hooks (src/worker/hooks.rs); inert unless set.
pub const NOISE_ENV: &str = "MEMREL_WORKER_STDOUT_NOISE";
pub const HANG_ENV: &str = "MEMREL_WORKER_HANG_AFTER";
pub const AS_LIMIT_ENV: &str = "MEMREL_WORKER_AS_LIMIT_AFTER";
pub const LAZY_CONTEXT_ENV: &str = "MEMREL_WORKER_LAZY_CONTEXT";

/// The memrel binary built for these tests, with the model cache `cache`,
/// the hub offline, no test hook inherited from the environment, and an
/// empty shared-memory directory of the tests' own as its /dev/shm
/// (`MEMREL_SHM_DIR`): the machine's /dev/shm moves with whatever else runs
/// (another test suite, a browser), and a baseline saved while it was still
/// would not cover a later run that saw it move. A test of shared memory
/// sets a directory of its own after this.
pub fn memrel_with_cache(cache: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_memrel"));
    let quiet_shm = Path::new(env!("CARGO_TARGET_TMPDIR")).join("quiet-shm");
    std::fs::create_dir_all(&quiet_shm).expect("the tests' shared-memory directory");
    command.env("MEMREL_SHM_DIR", quiet_shm);
    command.env("MEMREL_CACHE_DIR", cache);
    command.env("HF_HUB_OFFLINE", "1");
    for hook in [NOISE_ENV, HANG_ENV, AS_LIMIT_ENV, LAZY_CONTEXT_ENV] {
        command.env_remove(hook);
    }
    command
}

/// The memrel binary with the one model cache of all tests (generation is
/// atomic, so parallel tests are safe).
pub fn memrel() -> Command {
    memrel_with_cache(&Path::new(env!("CARGO_TARGET_TMPDIR")).join("memrel-cache"))
}

/// Output bytes as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub fn stderr(output: &Output) -> String {
    text(&output.stderr)
}

/// Both streams, labelled, for a failure message.
pub fn streams(output: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        text(&output.stdout),
        text(&output.stderr)
    )
}

pub fn run_ok(command: &mut Command) -> Output {
    let output = command.output().expect("memrel starts");
    assert!(
        output.status.success(),
        "memrel failed: {}\n{}",
        output.status,
        streams(&output)
    );
    output
}

/// `memrel run --scenario SCENARIO --strategy S… --out <new temp dir>` with
/// `command` (memrel(), maybe with extra environment); it must succeed.
/// Returns the temp dir (keep it alive), the run's results directory and the output.
pub fn run_scenario(
    command: Command,
    scenario: &str,
    strategies: &[&str],
) -> (tempfile::TempDir, PathBuf, Output) {
    let mut run = Run::with(command, "run", scenario);
    for strategy in strategies {
        run = run.strategy(strategy);
    }
    run.in_temp_dir(scenario)
}

/// `memrel run --scenario SCENARIO`: a [`Run`] of the test binary.
pub fn run(scenario: impl AsRef<OsStr>) -> Run {
    Run::with(memrel(), "run", scenario)
}

/// `memrel compare --scenario SCENARIO`.
pub fn compare_scenario(scenario: impl AsRef<OsStr>) -> Run {
    Run::with(memrel(), "compare", scenario)
}

/// One memrel command line on a scenario, built up flag by flag (ripgrep's
/// `TestCommand`): `run("ci-smoke").strategy("drop").cycles(1).out(dir).ok()`.
/// The flags follow `--scenario` in the order they are given.
pub struct Run {
    command: Command,
}

impl Run {
    /// `command` (memrel() or memrel_with_cache(), maybe with environment)
    /// with `SUBCOMMAND --scenario SCENARIO`.
    pub fn with(mut command: Command, subcommand: &str, scenario: impl AsRef<OsStr>) -> Run {
        command.args([subcommand, "--scenario"]).arg(scenario);
        Run { command }
    }

    pub fn strategy(self, strategy: &str) -> Run {
        self.args(["--strategy", strategy])
    }

    pub fn cycles(self, cycles: u32) -> Run {
        self.arg("--cycles").arg(cycles.to_string())
    }

    pub fn repeat(self, times: u32) -> Run {
        self.arg("--repeat").arg(times.to_string())
    }

    pub fn out(self, dir: impl AsRef<OsStr>) -> Run {
        self.arg("--out").arg(dir)
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Run {
        self.command.arg(arg);
        self
    }

    pub fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(mut self, args: I) -> Run {
        self.command.args(args);
        self
    }

    pub fn env(mut self, key: &str, value: impl AsRef<OsStr>) -> Run {
        self.command.env(key, value);
        self
    }

    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Run {
        self.command.current_dir(dir);
        self
    }

    /// Runs it; it must succeed.
    pub fn ok(mut self) -> Output {
        run_ok(&mut self.command)
    }

    /// Runs it, whatever its exit status.
    pub fn output(mut self) -> Output {
        self.command.output().expect("memrel starts")
    }

    /// Starts it with no stdin and no stdout, and stderr piped when
    /// `keep_stderr` (read it with [`stderr_of`]), else dropped.
    pub fn spawn(mut self, keep_stderr: bool) -> Child {
        self.command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(if keep_stderr {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .spawn()
            .expect("memrel starts")
    }

    /// Runs it with `--out` a new temp dir; it must succeed. Returns the temp
    /// dir (keep it alive), the only results directory of `name` in it and the output.
    pub fn in_temp_dir(self, name: &str) -> (tempfile::TempDir, PathBuf, Output) {
        let out = tempfile::tempdir().expect("tempdir");
        let output = self.out(out.path()).ok();
        let dir = only_results_dir(out.path(), name);
        (out, dir, output)
    }

    /// The command as built, for what the builder does not do.
    pub fn command(self) -> Command {
        self.command
    }
}

/// The results directories under `out/<scenario>/`, sorted.
pub fn results_dirs(out: &Path, scenario: &str) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(out.join(scenario))
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    dirs.sort();
    dirs
}

/// Whether a results directory under `out/<scenario>/` has its first run
/// ended and saved (runs.json lists a run from its start: `record::live`).
pub fn first_run_saved(out: &Path, scenario: &str) -> bool {
    results_dirs(out, scenario).iter().any(|d| {
        std::fs::read(d.join("runs.json"))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
            .is_some_and(|v| v["runs"][0]["status"] == "completed")
    })
}

/// The only results directory under `out/<scenario>/`.
pub fn only_results_dir(out: &Path, scenario: &str) -> PathBuf {
    let mut dirs = results_dirs(out, scenario);
    assert_eq!(dirs.len(), 1, "one results directory: {dirs:?}");
    dirs.remove(0)
}

/// A JSON file.
/// `memrel check --baseline NAME --out OUT DIR`: judges the run in `dir`
/// against the baseline `name` kept under `out`.
pub fn check_against(name: &str, out: &Path, dir: &Path) -> Output {
    memrel()
        .args(["check", "--baseline", name, "--out"])
        .arg(out)
        .arg(dir)
        .output()
        .expect("memrel starts")
}

/// `memrel exec --out TMP ARGS… -- python3 PROGRAM PROGRAM_ARGS…`, with
/// `env` (a variable naming a fixture directory) in memrel's environment.
pub fn exec_python(
    tmp: &Path,
    env: (&str, &Path),
    args: &[&str],
    program: &Path,
    program_args: &[&OsStr],
) -> Output {
    memrel()
        .env(env.0, env.1)
        .arg("exec")
        .arg("--out")
        .arg(tmp)
        .args(args)
        .arg("--")
        .arg("python3")
        .arg(program)
        .args(program_args)
        .output()
        .expect("memrel starts")
}

/// A summary's resources but the container, whose view is one only where
/// the cgroup can be read (so a test's list holds on every machine).
pub fn resources_but_container(summary: &Value) -> Vec<&str> {
    summary["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r.as_str())
        .filter(|r| *r != "container")
        .collect()
}

pub fn read_json(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{} reads: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is JSON: {e}", path.display()))
}

/// A results directory's runs.json.
pub fn runs_json(dir: &Path) -> Value {
    read_json(&dir.join("runs.json"))
}

/// The `runs` of a results directory's runs.json.
pub fn runs(dir: &Path) -> Vec<Value> {
    runs_json(dir)["runs"].as_array().expect("runs").clone()
}

/// Edits a results directory's runs.json in place (written back pretty).
pub fn edit_runs_json(dir: &Path, edit: impl FnOnce(&mut Value)) {
    let path = dir.join("runs.json");
    let mut value = read_json(&path);
    edit(&mut value);
    std::fs::write(&path, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
}

pub fn summary(dir: &Path) -> Value {
    read_json(&dir.join("summary.json"))
}

/// Reads a CSV into header-keyed rows.
pub fn csv_rows(path: &Path) -> Vec<HashMap<String, String>> {
    let mut reader = csv::Reader::from_path(path).expect("csv opens");
    let headers = reader.headers().expect("header").clone();
    reader
        .records()
        .map(|r| {
            let r = r.expect("row");
            headers
                .iter()
                .zip(r.iter())
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

/// A scenario file `dir/NAME.toml` with the given text.
pub fn write_scenario(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).expect("scenario written");
    path
}

/// A tiny scenario: bert-tiny, `cycles` of load → forward → drop → release →
/// settle, then `extra_steps` (e.g. `, "idle 1000"`).
pub fn scenario(
    dir: &Path,
    name: &str,
    cycles: u32,
    timeout_s: f64,
    settle_ms: u32,
    extra_steps: &str,
) -> PathBuf {
    let toml = format!(
        r#"description = "fault test"
device = "cpu"
cycles = {cycles}
strategies = ["drop"]
interval_ms = 5
timeout_s = {timeout_s}

[models.tiny]
preset = "bert-tiny"

[workload]
steps = ["load tiny", "forward tiny", "unload tiny", "release", "settle"{extra_steps}]
batch_size = 1
seq_len = 8
settle_ms = {settle_ms}
baseline_ms = 60
"#
    );
    write_scenario(dir, name, &toml)
}

/// `memrel report DIR` re-renders the directory (exit 0).
pub fn assert_rerenders(dir: &Path) {
    let output = memrel().arg("report").arg(dir).output().expect("report");
    assert!(
        output.status.success(),
        "memrel report {} failed: {}",
        dir.display(),
        stderr(&output)
    );
}

/// Every result file complete and parseable, and `memrel report DIR` re-renders it.
pub fn assert_intact(dir: &Path, want_runs: usize) -> Record {
    let record =
        Record::load(dir).unwrap_or_else(|e| panic!("{} does not read back: {e:#}", dir.display()));
    assert_eq!(record.runs.len(), want_runs, "{}", dir.display());
    assert_eq!(runs(dir).len(), want_runs);
    summary(dir);
    let png = std::fs::read(dir.join("timeline.png")).expect("timeline.png");
    assert!(png.starts_with(b"\x89PNG"), "timeline.png is a PNG");
    assert_rerenders(dir);
    record
}

/// Alive and not a zombie.
pub fn alive(pid: i64) -> bool {
    u32::try_from(pid).is_ok_and(memrel::sampler::procfs::is_running)
}

pub fn assert_gone(pid: i64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!alive(pid), "{what} (pid {pid}) is still running");
}

/// The live processes whose parent is `parent` (memrel's workers).
pub fn children_of(parent: u32) -> Vec<i64> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i64>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(parent) && alive(pid) {
            pids.push(pid);
        }
    }
    pids
}

pub fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

pub fn wait_with_limit(child: &mut Child, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("memrel did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub fn stderr_of(child: &mut Child) -> String {
    let mut s = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut s);
    }
    s
}

/// The interpreter with torch and transformers for the `torch` tests
/// (`#[ignore]`d; .ci/run makes one from PyPI and runs them).
pub fn torch_python() -> String {
    std::env::var("MEMREL_TEST_PYTHON").unwrap_or_else(|_| {
        panic!(
            "this test needs a python3 with torch and transformers: \
             MEMREL_TEST_PYTHON=/path/to/venv/bin/python cargo test --release --test it torch -- --ignored \
             (.ci/run makes one from PyPI)"
        )
    })
}

/// Copies `files` of the record in `from` into `to` (made), each as a plain
/// file the test can edit: a committed `samples.csv` may be kept as
/// `samples.csv.gz` (results/reference/README.md), which is unpacked.
pub fn copy_record(from: &Path, to: &Path, files: &[&str]) {
    std::fs::create_dir_all(to).unwrap();
    for file in files {
        let plain = from.join(file);
        if plain.exists() {
            std::fs::copy(&plain, to.join(file)).unwrap();
            continue;
        }
        let gz = from.join(format!("{file}.gz"));
        let mut reader = flate2::read::GzDecoder::new(
            std::fs::File::open(&gz).unwrap_or_else(|e| panic!("{}: {e}", gz.display())),
        );
        let mut out = std::fs::File::create(to.join(file)).unwrap();
        std::io::copy(&mut reader, &mut out).unwrap();
    }
}

/// Each edge of an events.csv as `(phase edge, held_s)`: how long the
/// program waited for memrel's reading of it (empty: it did not wait).
pub fn held_by_edge(events: &Path) -> Vec<(String, Option<f64>)> {
    csv_rows(events)
        .iter()
        .map(|e| {
            let held = e["held_s"].as_str();
            let held = (!held.is_empty()).then(|| held.parse::<f64>().expect("held_s"));
            (format!("{} {}", e["phase"], e["edge"]), held)
        })
        .collect()
}

/// A sender that takes the handshake waited at every edge but its first
/// (where nothing is known yet), each wait a reading's time: above 0,
/// and over before the sender's next edge (it sends that one only once
/// the acknowledgement came).
pub fn assert_waited_at_every_edge_but_the_first(events: &Path) {
    let held = held_by_edge(events);
    let t_s: Vec<f64> = csv_rows(events)
        .iter()
        .map(|e| e["t_s"].parse().expect("t_s"))
        .collect();
    assert!(held.len() > 2, "{held:?}");
    assert_eq!(held[0].1, None, "the first edge: {held:?}");
    for (i, (edge, held_s)) in held.iter().enumerate().skip(1) {
        let next_s = t_s.get(i + 1).map_or(f64::INFINITY, |next| next - t_s[i]);
        // The file's times are rounded to the microsecond.
        assert!(
            held_s.is_some_and(|s| s > 0.0 && s <= next_s + 2e-6),
            "{edge} at {} s waited {held_s:?}, the next edge {next_s} s later: {held:?}",
            t_s[i]
        );
    }
}
