//! One `memrel drive`, measured: for each strategy (none: the server as it
//! is) and each repeat, the server started (or the running one taken), an
//! attach session driven by the [`Driver`], its requests printed as the run
//! ends (`console`); the runs then joined into one record
//! (`record::join`), each repeat's files kept in `repeat-K/` (or
//! `STRATEGY/repeat-K/`). Returns the [`Measured`] the command prints and
//! saves. The options come typed from the command; nothing here reads a
//! flag.
//!
//! It stops after a run that failed, or at SIGINT/SIGTERM: what was
//! measured so far is joined and returned all the same.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::console;
use super::driver::{Driver, Options};
use super::rows::REQUESTS_CSV;
use super::server::{host_port, listener_pid, listening, Started, SERVER_LOG};
use crate::attach::header::{Setup, STRATEGY};
use crate::attach::session::{self, Job};
use crate::attach::target::Target;
use crate::metrics::measured::Measured;
use crate::record::Record;
use crate::scenario::DeviceSpec;
use crate::signals;
use crate::strategy::Strategy;

/// A strategy a server is started under, and the allocator library it
/// preloads (found before anything starts).
pub type Under = (&'static Strategy, Option<PathBuf>);

/// Which server is measured.
pub enum Server {
    /// A process that runs already (`--pid`, or the port's listener).
    Running(u32),
    /// A command memrel starts for each run (`-- CMD`), and stops.
    Start(Vec<String>),
}

/// Everything one drive needs, checked.
pub struct DriveOptions {
    /// What the driver does in each run (its `dir`: the drive's, unused;
    /// each run's is set as it starts).
    pub driving: Options,
    pub server: Server,
    /// The strategies to start the server under, in turn; empty: as it is.
    pub strategies: Vec<Under>,
    /// Runs of each strategy.
    pub repeat: u32,
    /// The results name (`<OUT>/<NAME>/<timestamp>`).
    pub name: String,
    /// The results directory (made, empty).
    pub dir: PathBuf,
    pub device: DeviceSpec,
    pub interval_ms: f64,
    pub model_files: Vec<PathBuf>,
    /// `[thresholds]` keys and amounts (budgets).
    pub thresholds: Vec<(String, f64)>,
    /// memrel's own command line, as runs.json keeps it.
    pub command_line: Vec<String>,
}

impl DriveOptions {
    /// The strategies' names as the record keeps them (none: `drop`).
    fn names(&self) -> Vec<String> {
        match self.strategies.is_empty() {
            true => vec![STRATEGY.to_string()],
            false => self
                .strategies
                .iter()
                .map(|(s, _)| s.name.to_string())
                .collect(),
        }
    }

    /// Where each run's requests are, as the last line names them.
    pub fn requests(&self) -> String {
        let names = self.names().len();
        match (names as u32 * self.repeat, names) {
            (1, _) => REQUESTS_CSV.to_string(),
            (_, 1) => format!("repeat-K/{REQUESTS_CSV}"),
            _ => format!("STRATEGY/repeat-K/{REQUESTS_CSV}"),
        }
    }
}

/// Drives and measures every run, printing each run's requests to `out`;
/// the drive's results directory, its record and summary.
pub fn run(options: &DriveOptions, out: &mut dyn Write) -> Result<Measured> {
    let names = options.names();
    let runs = names.len() as u32 * options.repeat;
    let mut made: Vec<Measured> = Vec::new();
    // Each strategy's runs in turn (none given: the server as it is, `drop`).
    'runs: for (i, name) in names.iter().enumerate() {
        for k in 1..=options.repeat {
            let one = One {
                strategy: options.strategies.get(i),
                name,
                k,
                names: &names,
            };
            let (measured, driver) = one.measure(options)?;
            if runs > 1 {
                let strategy = (names.len() > 1).then_some(name.as_str());
                console::repeat_title(out, made.is_empty(), strategy, k, options.repeat)?;
            }
            console::requests(
                out,
                &driver.rows,
                options.driving.warmup_cycles,
                driver.server_exit.as_deref(),
            )?;
            let failed = measured.summary.runs.iter().any(|r| r.error.is_some());
            made.push(measured);
            if failed || signals::received().is_some() {
                break 'runs;
            }
        }
    }
    match made.len() {
        1 if runs == 1 => Ok(made.remove(0)),
        _ => joined(&options.dir, made),
    }
}

/// One run of a drive: repeat `k` of the strategy `name` (`strategy`:
/// the one the server is started under; `None`: as it is), one of `names`.
struct One<'a> {
    strategy: Option<&'a Under>,
    name: &'a str,
    k: u32,
    names: &'a [String],
}

impl One<'_> {
    /// Where this run's files go: the drive's directory itself when it is
    /// the only run; else repeat-K/ (STRATEGY/repeat-K/ with several
    /// strategies), joined once they are over.
    fn dir(&self, options: &DriveOptions) -> Result<PathBuf> {
        if self.names.len() as u32 * options.repeat == 1 {
            return Ok(options.dir.clone());
        }
        let sub = if self.names.len() == 1 {
            repeat_dir(&options.dir, self.k)
        } else {
            repeat_dir(&options.dir.join(self.name), self.k)
        };
        std::fs::create_dir_all(&sub)
            .with_context(|| format!("cannot create {}", sub.display()))?;
        Ok(sub)
    }

    /// The server started (or the running one taken) and driven through
    /// an attach session; the run as measured and the driver (its rows).
    fn measure(&self, options: &DriveOptions) -> Result<(Measured, Driver)> {
        let run_dir = self.dir(options)?;
        let (started, pid) = match &options.server {
            Server::Running(pid) => (None, *pid),
            Server::Start(command) => {
                let under = self.strategy.map(|(s, preload)| (*s, preload.as_deref()));
                let started = Started::spawn_under(command, &run_dir.join(SERVER_LOG), under)?;
                let pid = started.pid();
                (Some(started), pid)
            }
        };
        let target = Target::open(pid)?;
        let d = &options.driving;
        let mut driver = Driver::new(
            Options {
                url: d.url.clone(),
                cycle: d.cycle.clone(),
                cycles: d.cycles,
                warmup_cycles: d.warmup_cycles,
                settle_s: d.settle_s,
                ready_timeout_s: d.ready_timeout_s,
                request_timeout_s: d.request_timeout_s,
                grace: d.grace,
                dir: run_dir.clone(),
            },
            pid,
            started,
        );
        let of = match (self.names.len(), options.repeat) {
            (1, 1) => String::new(),
            (1, n) => format!(", repeat {} of {n}", self.k),
            (_, n) => format!(", strategy {}, repeat {} of {n}", self.name, self.k),
        };
        eprintln!(
            "memrel: driving {} (pid {pid}: {}), its process tree measured every {} ms{of}",
            d.url,
            target.argv.join(" "),
            options.interval_ms
        );
        let job = Job {
            sample_part_bytes: None,
            setup: Setup {
                // The same text every drive of the server (no pid), so a
                // check against a baseline of it does not warn that its
                // scenario differs.
                description: Some(format!(
                    "memrel drive {} ({})",
                    d.url,
                    target.argv.join(" ")
                )),
                strategy: self.name,
                strategies: self.names.to_vec(),
                ..Setup::new(
                    &options.name,
                    &target,
                    options.device,
                    options.interval_ms,
                    options.model_files.clone(),
                    options.thresholds.clone(),
                    options.command_line.clone(),
                )
            },
            duration: None,
            rules: Vec::new(),
            log: None,
            dir: run_dir,
            driver: Some(&mut driver),
            metrics: None,
        };
        let measured = session::measure(job)?;
        Ok((measured, driver))
    }
}

/// The directory of repeat `k` (1-based) inside the drive's `dir`.
pub fn repeat_dir(dir: &Path, k: u32) -> PathBuf {
    dir.join(format!("repeat-{k}"))
}

/// The runs `made` (each one run, in the order made) joined into `dir` as
/// one record of runs 1..N, with its derived outputs (summary, charts):
/// run K's repetition is its place among the runs of its strategy.
fn joined(dir: &Path, made: Vec<Measured>) -> Result<Measured> {
    let Some(first) = made.first() else {
        bail!("no run was measured: nothing to join");
    };
    let header = first.record.header.clone();
    let strategy_of = |record: &Record| {
        record
            .runs
            .first()
            .map(|r| r.meta.strategy.clone())
            .unwrap_or_default()
    };
    let strategies: Vec<String> = made.iter().map(|m| strategy_of(&m.record)).collect();
    let repetitions: Vec<u32> = (0..made.len())
        .map(|i| {
            strategies[..=i]
                .iter()
                .filter(|s| **s == strategies[i])
                .count() as u32
        })
        .collect();
    let parts = made.into_iter().map(|m| (m.dir, m.record)).collect();
    let record = crate::record::join::join(dir, header, parts, |i, meta| {
        let mut meta = meta.clone();
        meta.run = i as u32 + 1;
        meta.repetition = repetitions.get(i).copied().unwrap_or(meta.run);
        meta
    })
    .with_context(|| format!("cannot join the repeats into {}", dir.display()))?;
    let measured = Measured::new(dir.to_path_buf(), record);
    crate::export::write_derived_run_outputs(dir, &measured.record, &measured.summary)
        .with_context(|| format!("cannot join the repeats into {}", dir.display()))?;
    Ok(measured)
}

/// The server memrel measures: `command` started for each run, else the
/// process `pid` names, else the one listening on `url`'s port; a running
/// one is checked before anything is written.
pub fn server(pid: Option<u32>, url: &str, command: &[String]) -> Result<Server> {
    let (_, port) = host_port(url)?;
    if !command.is_empty() {
        return Ok(Server::Start(command.to_vec()));
    }
    let pid = match pid {
        // Its API must be there: a port nothing listens on would only
        // be found out after --ready-timeout.
        Some(pid) => {
            if !listening(port) {
                bail!(
                    "--pid {pid}: nothing listens on port {port} of --url {url} \
                     (checked /proc/net/tcp and tcp6): start the server, or fix --url"
                );
            }
            pid
        }
        None => listener_pid(port).with_context(|| format!("--url {url}"))?,
    };
    Target::open(pid)?;
    Ok(Server::Running(pid))
}

/// The strategies of `--strategy` (`names`; those `--strategy-file`
/// defines first), each with the allocator library it preloads, found
/// before anything starts; empty without `--strategy`. Only a strategy
/// that works from outside a process applies to a server: its environment
/// and its preload; it needs the server's `command` to start it under.
pub fn strategies(names: &[String], file: Option<&Path>, command: &[String]) -> Result<Vec<Under>> {
    if let Some(file) = file {
        crate::strategy::custom::read_file(file)
            .map_err(|e| anyhow::anyhow!("--strategy-file {e}"))?;
        if names.is_empty() {
            bail!(
                "--strategy-file {}: name the strategies to drive with --strategy NAME                  (repeatable)",
                file.display()
            );
        }
    }
    if !names.is_empty() && command.is_empty() {
        bail!(
            "--strategy needs the server's command after --: memrel applies a strategy by              starting the server under it (e.g. memrel drive --strategy {} … -- CMD)",
            names[0]
        );
    }
    let mut out: Vec<Under> = Vec::new();
    for name in names {
        let strategy =
            crate::strategy::lookup(name).map_err(|e| anyhow::anyhow!("--strategy {e}"))?;
        if strategy.name != STRATEGY && !strategy.works_from_outside() {
            let outside: Vec<&str> = crate::strategy::all()
                .filter(|s| s.works_from_outside())
                .map(|s| s.name)
                .collect();
            bail!(
                "--strategy {name}: it needs steps inside the process ({}), which a server                  memrel only starts cannot take; drive applies what works from outside: drop,                  {}, or one --strategy-file defines",
                strategy.setting(),
                outside.join(", ")
            );
        }
        if out.iter().any(|(s, _)| s.name == strategy.name) {
            bail!("--strategy {name} is given twice: name each strategy once");
        }
        let preload = crate::strategy::find_library(strategy)?;
        out.push((strategy, preload));
    }
    Ok(out)
}
