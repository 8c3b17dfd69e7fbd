//! `memrel drive`: checks the options, finds or starts the server, makes the
//! results directory, drives and measures it (`drive`, an attach session
//! whose marks come from the driver) and prints one line per request and
//! where the results went. A request that fails ends the drive: its message
//! names the request, what was measured is kept, exit 2. `--repeat N` drives
//! N runs (a server memrel starts is started again for each), joined into
//! one record (`drive::repeats`); budgets (`--budget`, the cycle file's
//! `[thresholds]`) go into the record's scenario for `memrel check`.
//! SIGINT or SIGTERM stops the drive at once: the run is kept as stopped
//! early, no baseline is saved, and memrel exits 130 or 143.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::{output, ExitStatus};
use crate::attach::header::{budgets, Setup, STRATEGY};
use crate::attach::session::{self, Job};
use crate::attach::target::Target;
use crate::cli::DriveArgs;
use crate::drive::cycle::{self, Cycle, PresetArgs};
use crate::drive::driver::{Driver, Options};
use crate::drive::repeats;
use crate::drive::rows::{RequestRow, REQUESTS_CSV, TOLERANCE_BYTES};
use crate::drive::server::{host_port, listener_pid, listening, Started, SERVER_LOG};
use crate::record::Record;
use crate::results::{check_output_args, results_dir};
use crate::scenario::DeviceSpec;
use crate::signals;
use crate::strategy::Strategy;

pub fn run(args: &DriveArgs, out: &mut dyn Write) -> Result<ExitStatus> {
    if !(1.0..=10_000.0).contains(&args.interval_ms) {
        bail!(
            "--interval-ms {} is out of range: use 1 to 10000",
            args.interval_ms
        );
    }
    if args.cycles == 0 {
        bail!("--cycles 0: drive at least one cycle");
    }
    if args.repeat == 0 {
        bail!("--repeat 0: make at least one run");
    }
    for (flag, s) in [
        ("--settle", args.settle_s),
        ("--ready-timeout", args.ready_timeout_s),
        ("--request-timeout", args.request_timeout_s),
        ("--grace", args.grace_s),
    ] {
        if !(s.is_finite() && s >= 0.0) {
            bail!("{flag} {s} must be a number of seconds, 0 or more");
        }
    }
    let device = DeviceSpec::parse(&args.device).with_context(|| {
        format!(
            "--device {:?} is not valid: use cpu, cuda or cuda:N",
            args.device
        )
    })?;
    let preset_args = PresetArgs {
        sleep_level: Some(args.sleep_level),
        model: args.model.clone(),
    };
    let cycle = match (&args.server, &args.cycle) {
        (Some(name), None) => cycle::preset(name, &preset_args)?,
        (None, Some(path)) => Cycle::read(path, &preset_args)?,
        _ => bail!("pass one of --server NAME and --cycle FILE"),
    };
    let thresholds = budgets(&args.budgets, args.cycle.as_deref(), device)?;
    let strategies = strategies(args)?;
    let (_, port) = host_port(&args.url)?;
    check_output_args(&args.output)?;
    // A running server is checked before anything is written; one memrel
    // starts logs into the results directory, made first.
    let running = if args.command.is_empty() {
        let pid = match args.pid {
            // Its API must be there: a port nothing listens on would only
            // be found out after --ready-timeout.
            Some(pid) => {
                if !listening(port) {
                    bail!(
                        "--pid {pid}: nothing listens on port {port} of --url {} \
                         (checked /proc/net/tcp and tcp6): start the server, or fix --url",
                        args.url
                    );
                }
                pid
            }
            None => listener_pid(port).with_context(|| format!("--url {}", args.url))?,
        };
        Target::open(pid)?;
        Some(pid)
    } else {
        None
    };
    let model_files = crate::attach::model_files(&args.model_files)?;
    let names: Vec<String> = match strategies.is_empty() {
        true => vec![STRATEGY.to_string()],
        false => strategies.iter().map(|(s, _)| s.name.to_string()).collect(),
    };
    let dir = results_dir(args.dir.as_deref(), &args.output.out, &args.name)?;
    signals::install()?;
    let runs = names.len() as u32 * args.repeat;
    let mut repeats = Vec::new();
    // Each strategy's runs in turn (none given: the server as it is, `drop`).
    let plan: Vec<(Option<&Under>, &str, u32)> = names
        .iter()
        .enumerate()
        .flat_map(|(i, name)| (1..=args.repeat).map(move |k| (i, name.as_str(), k)))
        .map(|(i, name, k)| (strategies.get(i), name, k))
        .collect();
    for (strategy, name, k) in plan {
        // One run: the drive's directory itself; several: repeat-K/ each
        // (STRATEGY/repeat-K/ with several strategies), joined once they
        // are over.
        let run_dir = if runs == 1 {
            dir.clone()
        } else {
            let sub = if names.len() == 1 {
                repeats::repeat_dir(&dir, k)
            } else {
                repeats::repeat_dir(&dir.join(name), k)
            };
            std::fs::create_dir_all(&sub)
                .with_context(|| format!("cannot create {}", sub.display()))?;
            sub
        };
        let (started, pid) = match running {
            Some(pid) => (None, pid),
            None => {
                let under = strategy.map(|(s, preload)| (*s, preload.as_deref()));
                let started =
                    Started::spawn_under(&args.command, &run_dir.join(SERVER_LOG), under)?;
                let pid = started.pid();
                (Some(started), pid)
            }
        };
        let target = Target::open(pid)?;
        let mut driver = Driver::new(
            Options {
                url: args.url.clone(),
                cycle: cycle.clone(),
                cycles: args.cycles,
                warmup_cycles: args.warmup_cycles,
                settle_s: args.settle_s,
                ready_timeout_s: args.ready_timeout_s,
                request_timeout_s: args.request_timeout_s,
                grace: Duration::from_secs_f64(args.grace_s),
                dir: run_dir.clone(),
            },
            pid,
            started,
        );
        let of = match (names.len(), args.repeat) {
            (1, 1) => String::new(),
            (1, n) => format!(", repeat {k} of {n}"),
            (_, n) => format!(", strategy {name}, repeat {k} of {n}"),
        };
        eprintln!(
            "memrel: driving {} (pid {pid}: {}), its process tree measured every {} ms{of}",
            args.url,
            target.argv.join(" "),
            args.interval_ms
        );
        let job = Job {
            setup: Setup {
                name: &args.name,
                target: &target,
                device,
                interval_ms: args.interval_ms,
                duration_s: None,
                tree: true,
                log: None,
                command_line: crate::plan::command_line(),
                model_files: model_files.clone(),
                // The same text every drive of the server (no pid), so a
                // check against a baseline of it does not warn that its
                // scenario differs.
                description: Some(format!(
                    "memrel drive {} ({})",
                    args.url,
                    target.argv.join(" ")
                )),
                thresholds: thresholds.clone(),
                strategy: name,
                strategies: names.clone(),
            },
            duration: None,
            rules: Vec::new(),
            log: None,
            dir: run_dir.clone(),
            driver: Some(&mut driver),
        };
        let (record, summary) = session::measure(job)?;
        if runs > 1 {
            let first = repeats.is_empty();
            match names.len() {
                1 => writeln!(
                    out,
                    "{}repeat {k} of {}:",
                    if first { "" } else { "\n" },
                    args.repeat
                )?,
                _ => writeln!(
                    out,
                    "{}strategy {name}, repeat {k} of {}:",
                    if first { "" } else { "\n" },
                    args.repeat
                )?,
            }
        }
        write!(out, "{}", table(&driver.rows))?;
        for row in &driver.rows {
            if let Some(line) = late_line(row) {
                writeln!(out, "{line}")?;
            }
            if let Some(line) = crate::drive::rows::left_after_wake(row) {
                writeln!(out, "request {} ({}): {line}", row.index, row.request)?;
            }
        }
        if args.warmup_cycles > 0 && driver.rows.iter().any(|r| r.cycle == 0) {
            writeln!(
                out,
                "cycle 0 is the warm-up (--warmup-cycles {}): reported, not judged; `back` \
                 compares with the level before cycle 1",
                args.warmup_cycles
            )?;
        }
        if let Some(exit) = &driver.server_exit {
            writeln!(out, "server: {exit}")?;
        }
        let failed = summary.runs.iter().any(|r| r.error.is_some());
        repeats.push((run_dir, record, summary));
        if failed || signals::received().is_some() {
            break;
        }
    }
    let (record, summary) = match repeats.len() {
        1 if runs == 1 => {
            let (_, record, summary) = repeats.remove(0);
            (record, summary)
        }
        _ => {
            let made: Vec<(PathBuf, Record)> =
                repeats.into_iter().map(|(d, r, _)| (d, r)).collect();
            repeats::join(&dir, &made)?
        }
    };
    let requests = match (runs, names.len()) {
        (1, _) => REQUESTS_CSV.to_string(),
        (_, 1) => format!("repeat-K/{REQUESTS_CSV}"),
        _ => format!("STRATEGY/repeat-K/{REQUESTS_CSV}"),
    };
    // Stopped by SIGINT/SIGTERM: kept as stopped early, no baseline, 130/143.
    if signals::received().is_some() {
        writeln!(
            out,
            "\nresults: {} ({requests}: every request)",
            dir.display()
        )?;
        if let Some(status) = super::interrupted(&dir) {
            return Ok(status);
        }
    }
    output::finish_measured(
        out,
        &dir,
        (&record, &summary),
        &args.output,
        output::Measured::Driven(&requests),
    )
}

/// A strategy a server is started under, and the allocator library it
/// preloads (found before anything starts).
type Under = (&'static Strategy, Option<PathBuf>);

/// The strategies of `--strategy` (those `--strategy-file` defines first),
/// each with the allocator library it preloads, found before anything
/// starts; empty without `--strategy`. Only a strategy that works from
/// outside a process applies to a server: its environment and its preload.
fn strategies(args: &DriveArgs) -> Result<Vec<Under>> {
    if let Some(file) = &args.strategy_file {
        crate::strategy::custom::read_file(file)
            .map_err(|e| anyhow::anyhow!("--strategy-file {e}"))?;
        if args.strategies.is_empty() {
            bail!(
                "--strategy-file {}: name the strategies to drive with --strategy NAME                  (repeatable)",
                file.display()
            );
        }
    }
    if !args.strategies.is_empty() && args.command.is_empty() {
        bail!(
            "--strategy needs the server's command after --: memrel applies a strategy by              starting the server under it (e.g. memrel drive --strategy {} … -- CMD)",
            args.strategies[0]
        );
    }
    let mut out: Vec<Under> = Vec::new();
    for name in &args.strategies {
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

fn mib(bytes: u64) -> String {
    format!("{:.0}", bytes as f64 / f64::from(1u32 << 20))
}

fn mib_signed(bytes: i64) -> String {
    format!("{:+.0}", bytes as f64 / f64::from(1u32 << 20))
}

/// One line per request: latency, host (and VRAM) at send → answer →
/// settled in MiB, and whether it is back to the level before the load.
fn table(rows: &[RequestRow]) -> String {
    let mut text = format!(
        "{:>3} {:>5} {:<8} {:<34} {:>6} {:>9}  {:<26} {:<22} {}\n",
        "#",
        "cycle",
        "phase",
        "request",
        "status",
        "latency",
        "host MiB send>answer>settled",
        "vram MiB",
        "back"
    );
    for r in rows {
        let host = format!(
            "{}>{}>{}",
            mib(r.at_send.host_bytes),
            r.at_response.map_or("-".into(), |l| mib(l.host_bytes)),
            r.settled.map_or("-".into(), |l| mib(l.host_bytes))
        );
        let vram = match r.at_send.vram_bytes {
            Some(send) => format!(
                "{}>{}>{}",
                mib(send),
                r.at_response
                    .and_then(|l| l.vram_bytes)
                    .map_or("-".into(), mib),
                r.settled.and_then(|l| l.vram_bytes).map_or("-".into(), mib)
            ),
            None => "-".into(),
        };
        let back = verdict(r);
        let request: String = r.request.chars().take(34).collect();
        text.push_str(&format!(
            "{:>3} {:>5} {:<8} {:<34} {:>6} {:>9}  {:<29} {:<22} {}\n",
            r.index,
            r.cycle,
            r.phase,
            request,
            r.status.map_or("-".into(), |s| s.to_string()),
            r.latency_s.map_or("-".into(), |s| format!("{s:.3} s")),
            host,
            vram,
            if r.error.is_some() {
                "failed".to_string()
            } else {
                back
            }
        ));
    }
    text
}

/// A request's verdict: for a sleep, what it freed of what was held just
/// before it (per layer); for a cycle's end (an unload, a wake), whether
/// memory is back to the level before the first judged cycle (the drive's
/// baseline; requests.csv also has the same cycle's); empty otherwise.
fn verdict(r: &RequestRow) -> String {
    let yes = |b: i64| {
        if b <= TOLERANCE_BYTES as i64 {
            "yes"
        } else {
            "no"
        }
    };
    if let Some(freed) = &r.freed {
        let of = |freed: i64, before: u64| {
            format!(
                "{:.0} of {} MiB",
                freed as f64 / f64::from(1u32 << 20),
                mib(before)
            )
        };
        // A sleep that copies the weights into host memory grows the host.
        let grew = freed.host_bytes < -(TOLERANCE_BYTES as i64);
        let mut text = if grew {
            format!("host grew {} MiB", mib(freed.host_bytes.unsigned_abs()))
        } else {
            format!("freed host {}", of(freed.host_bytes, r.at_send.host_bytes))
        };
        if let (Some(f), Some(b)) = (freed.vram_bytes, r.at_send.vram_bytes) {
            let vram = if grew { "; freed vram" } else { ", vram" };
            text.push_str(&format!("{vram} {}", of(f, b)));
        }
        return text;
    }
    let Some(h) = &r.held_first else {
        return match (&r.held, r.cycle) {
            (Some(_), 0) => "warm-up".to_string(),
            _ => String::new(),
        };
    };
    match h.vram_bytes {
        Some(v) => format!("host {} vram {}", yes(h.host_bytes), yes(v)),
        None => format!(
            "host {} ({} MiB)",
            yes(h.host_bytes),
            mib_signed(h.host_bytes)
        ),
    }
}

/// Said where memory still left after the answer (the release gap).
fn late_line(r: &RequestRow) -> Option<String> {
    let late = r.late?;
    let gap = TOLERANCE_BYTES as i64;
    let host = (late.host_bytes > gap).then(|| format!("{} MiB host", mib(late.host_bytes as u64)));
    let vram = late
        .vram_bytes
        .filter(|v| *v > gap)
        .map(|v| format!("{} MiB VRAM", mib(v as u64)));
    let what: Vec<String> = host.into_iter().chain(vram).collect();
    (!what.is_empty()).then(|| {
        format!(
            "request {} ({}): {} still left after the answer (late bytes); {}",
            r.index,
            r.request,
            what.join(" and "),
            crate::drive::driver::settle_words(r)
        )
    })
}
