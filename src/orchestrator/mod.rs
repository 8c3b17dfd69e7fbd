//! Runs one worker process and turns what happened into a [`RunRecord`]:
//! spawns the child with the strategy's environment, samples it, reads its
//! phase events and drains its stderr on their own threads, enforces the
//! timeout, and joins samples and events on one monotonic clock.
//!
//! Whatever happens to the child (error, crash, OOM kill, timeout), the
//! samples and events taken so far are returned: a run is never lost.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::protocol::{Envelope, Message, PhaseEdge};
use crate::record::{Event, RunMeta, RunRecord, RunStatus};
use crate::sampler::{Sampler, VramProbe};
use crate::strategy::{Strategy, ALLOCATOR_ENV_VARS};
use crate::worker::WorkerSpec;

/// Everything needed to execute one run.
pub struct RunPlan<'a> {
    pub run: u32,
    pub repetition: u32,
    pub strategy: &'static Strategy,
    pub spec: &'a WorkerSpec,
    pub interval: Duration,
    pub timeout: Duration,
}

/// Keeps this much of a worker's stderr (its tail) in the record.
const STDERR_TAIL_BYTES: usize = 8 * 1024;

/// Executes `plan` with `exe` as the worker binary; `on_event` sees each
/// phase edge as it arrives (for progress display).
pub fn execute(
    exe: &Path,
    plan: &RunPlan,
    vram: Option<Box<dyn VramProbe>>,
    on_event: &mut dyn FnMut(&PhaseEdge),
) -> (RunRecord, &'static str) {
    let mut meta = RunMeta {
        run: plan.run,
        strategy: plan.strategy.name.to_string(),
        repetition: plan.repetition,
        pid: 0,
        status: RunStatus::Failed,
        error: None,
        checks: Vec::new(),
        vm_hwm_bytes: None,
        duration_s: 0.0,
        vram_floor_bytes: None,
        stderr_tail: String::new(),
    };
    let spec_json = match serde_json::to_string(plan.spec) {
        Ok(json) => json,
        Err(e) => {
            meta.error = Some(format!("cannot encode the worker spec: {e}"));
            return (empty_record(meta), "none");
        }
    };
    let mut command = Command::new(exe);
    command
        .arg("worker")
        .arg("--spec")
        .arg(spec_json)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for var in ALLOCATOR_ENV_VARS {
        command.env_remove(var);
    }
    command.envs(plan.strategy.env.iter().copied());

    let clock_zero = Instant::now();
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            meta.error = Some(format!("cannot start worker {}: {e}", exe.display()));
            return (empty_record(meta), "none");
        }
    };
    meta.pid = child.id();
    let sampler = Sampler::start(child.id(), plan.interval, clock_zero, vram);
    let probe_name = sampler.probe_name;

    let (tx, rx) = mpsc::channel::<(f64, Option<Result<Envelope, String>>)>();
    let stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        if let Some(stdout) = stdout {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let t_s = clock_zero.elapsed().as_secs_f64();
                if tx.send((t_s, Envelope::parse_line(&line))).is_err() {
                    break;
                }
            }
        }
    });
    let stderr = child.stderr.take();
    let drain = std::thread::spawn(move || {
        let mut all = Vec::new();
        if let Some(mut stderr) = stderr {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                all.extend_from_slice(&buf[..n]);
                if all.len() > 4 * STDERR_TAIL_BYTES {
                    all.drain(..all.len() - STDERR_TAIL_BYTES);
                }
            }
        }
        let start = all.len().saturating_sub(STDERR_TAIL_BYTES);
        String::from_utf8_lossy(&all[start..]).into_owned()
    });

    let mut events = Vec::new();
    let mut done = false;
    let mut worker_error: Option<String> = None;
    let mut timed_out = false;
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok((t_s, Some(Ok(envelope)))) => match envelope.message {
                Message::Hello(hello) => {
                    meta.vram_floor_bytes = hello.vram_floor_bytes;
                    meta.checks.extend(hello.checks);
                }
                Message::Phase(edge) => {
                    on_event(&edge);
                    events.push(Event { t_s, edge });
                }
                Message::Done(d) => {
                    meta.vm_hwm_bytes = Some(d.vm_hwm_bytes);
                    meta.checks.extend(d.checks);
                    done = true;
                }
                Message::Error(e) => worker_error = Some(e.message),
            },
            Ok((_, Some(Err(protocol_error)))) => worker_error = Some(protocol_error),
            Ok((_, None)) => {}
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if clock_zero.elapsed() > plan.timeout {
            timed_out = true;
            let _ = child.kill();
            break;
        }
    }
    let status = wait(&mut child);
    let (samples, vram_checks) = sampler.stop_with_checks();
    meta.checks.extend(vram_checks);
    let _ = reader.join();
    meta.stderr_tail = drain.join().unwrap_or_default();
    meta.duration_s = clock_zero.elapsed().as_secs_f64();

    match (timed_out, status, done) {
        (true, _, _) => {
            meta.status = RunStatus::TimedOut;
            meta.error = Some(format!(
                "worker ran past the scenario's timeout_s ({:.0} s) and was killed",
                plan.timeout.as_secs_f64()
            ));
        }
        (false, Some(s), true) if s.success() => meta.status = RunStatus::Completed,
        (false, status, _) => {
            meta.status = RunStatus::Failed;
            meta.error = Some(worker_error.unwrap_or_else(|| describe_exit(status)));
        }
    }
    (
        RunRecord {
            meta,
            samples,
            events,
        },
        probe_name,
    )
}

fn wait(child: &mut Child) -> Option<ExitStatus> {
    child.wait().ok()
}

fn empty_record(meta: RunMeta) -> RunRecord {
    RunRecord {
        meta,
        samples: Vec::new(),
        events: Vec::new(),
    }
}

fn describe_exit(status: Option<ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        None => "lost track of the worker process".to_string(),
        Some(s) => match (s.code(), s.signal()) {
            (_, Some(9)) => "worker was killed by SIGKILL (out of memory?)".to_string(),
            (_, Some(sig)) => format!("worker was killed by signal {sig}"),
            (Some(code), _) => format!("worker exited with code {code} without finishing"),
            _ => "worker ended without finishing".to_string(),
        },
    }
}
