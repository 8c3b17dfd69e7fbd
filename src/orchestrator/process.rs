//! One worker process of a run, from spawn to reap: the child started in
//! its own process group with the strategy's environment, its channel, edge
//! reader, sampler and output drains wired up, the watch loop (channel,
//! exit, a program's environment, signals, the deadline), and what is left
//! collected within bounded waits. A `respawn` run is several of these in
//! turn; the run's lifecycle and how it ended are `mod.rs`'s and
//! `outcome`'s.

use std::path::Path;
use std::process::{Child, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::channel::Channel;
use super::exit_stop::{ExitStop, Held};
use super::{child, drain, stdin, Stop, REAP_GRACE};
use crate::cgroup::setup::Prepared;
use crate::record::live::SampleTarget;
use crate::record::{Event, RunMeta};
use crate::sampler::hwm::KernelPeak;
use crate::sampler::VramProbe;
use crate::session::{Arrival, Collected, ProgramState, Scope, Session};
use crate::signals;
use crate::strategy::{self, Strategy};
use crate::worker::command::{environment_checks, CycleNumbering};
use crate::worker::{ParentDuties, Plug};

/// Keeps this much of a worker's stdout and of its stderr (their tails) in the record.
const TAIL_BYTES: usize = 8 * 1024;

/// How often the run loop looks at the child, the clock and the signal flag.
const TICK: Duration = Duration::from_millis(20);

/// After the worker closed its channel: how often, and for how long, the run
/// loop looks for its exit before going back to [`TICK`].
const EXIT_POLL: Duration = Duration::from_millis(1);
const EXIT_WATCH: Duration = Duration::from_secs(1);

/// After the worker was reaped: how long the channel and output pipes may take
/// to end (only a process that left the worker's group can hold them open).
const PIPE_GRACE: Duration = Duration::from_secs(2);

/// The same, where a descendant is known to outlive the program (it holds
/// them open for as long as it lives): a moment for what is in flight.
const OUTLIVED_PIPE_GRACE: Duration = Duration::from_millis(200);

/// When the parent looks at a program's environment and mappings.
const PROGRAM_LOOK_AFTER: Duration = Duration::from_millis(50);

/// Until when it looks again while a check fails: on a busy machine the
/// process may not have reached its `exec` (or its loader its preloads) by
/// the first look.
const PROGRAM_LOOK_UNTIL: Duration = Duration::from_secs(2);

/// One worker process of a run.
pub(super) struct Process<'a> {
    pub(super) exe: &'a Path,
    pub(super) strategy: &'static Strategy,
    pub(super) preload: Option<&'a Path>,
    pub(super) plug: &'a Plug,
    pub(super) interval: Duration,
    pub(super) clock_zero: Instant,
    pub(super) deadline: Instant,
    pub(super) samples: &'a SampleTarget,
    pub(super) cgroup: &'a crate::cgroup::setup::Setup,
    /// The name of the process's own cgroup under `--cgroup-parent`.
    pub(super) cgroup_name: String,
}

/// How one worker process ended.
pub(super) struct Ended {
    pub(super) stop: Option<Stop>,
    pub(super) status: Option<ExitStatus>,
    /// Why its samples did not all reach samples.csv.
    pub(super) sample_error: Option<String>,
    pub(super) vram: Option<Box<dyn VramProbe>>,
    pub(super) probe_name: &'static str,
}

impl Process<'_> {
    /// Spawns the worker, samples it and reads its channel until it ends, is
    /// killed at the deadline, or memrel is interrupted. `Err`: it could not
    /// be started (the run's error).
    pub(super) fn run(
        &self,
        vram: Option<Box<dyn VramProbe>>,
        got: &mut Collected,
        meta: &mut RunMeta,
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<Ended, String> {
        let channel = Channel::open()
            .map_err(|e| format!("cannot open the worker's event channel (a pipe): {e}"))?;
        let writer = self
            .samples
            .writer()
            .map_err(|e| format!("cannot write the run's samples: {e:#}"))?;
        let duties = self.plug.duties();
        let (mut child, mut cgroup) = self.spawn(&channel, meta)?;
        // What the program reads of a terminal goes through memrel (`stdin`).
        let _feeding = stdin::feed(&mut child);
        let pid = child.id();
        // Held at its exit until the sampler has read it (`exit_stop`).
        let exit_stop = ExitStop::start(pid);
        let spawned = Instant::now();
        cgroup.count_others();
        begin_process(&duties, pid, got, meta);
        let kernel_peak = kernel_peak(&duties, pid);
        // Every probe opened once, for the sampler and for the edges: under
        // --tree an edge is read like the samples (the tree's sum), the
        // model files' page cache at a low rate and at every edge.
        let files = self.plug.weight_files();
        let scope = Scope {
            pid,
            tree: duties.sample_tree,
            host_at_edges: duties.complete_edges,
            vram,
            vram_at_edges: duties.vram_at_edges,
            cgroup: cgroup.located(),
            model_files: &files,
            per_process: false,
        };
        let (session, edges) = match Session::start(scope, self.interval, self.clock_zero, writer) {
            Ok(started) => started,
            Err(e) => return Err(abandon(&mut child, exit_stop.as_ref(), e)),
        };
        let (messages, _edges) = channel.start_reader(self.clock_zero, edges, kernel_peak);
        let tails = Tails::spawn(&mut child, self.plug.io().show_output);
        if let Some(hold) = &exit_stop {
            hold.read_with(session.nudge());
        }
        let probe_name = session.probe_name();
        let tree_pids = session.tree_pids();

        let Watched {
            stop,
            channel_open,
            own_peak_bytes,
        } = self.watch(pid, spawned, &messages, got, meta, on_event);
        let (status, waited_peak_bytes, pipe_grace) =
            reap(&mut child, stop, exit_stop, &tree_pids, meta);
        if duties.sample_tree {
            child::reap_adopted();
        }
        let peak_bytes = own_peak(&duties, own_peak_bytes, waited_peak_bytes);
        let stopped = session.stop();
        // SIGKILL that memrel did not send, while an OOM kill counter rose.
        got.oom_killed = match (
            stop,
            status.and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s)),
        ) {
            (None, Some(libc::SIGKILL)) => cgroup.oom_kill(&last_reading(stopped.last.as_ref())),
            _ => None,
        };
        record_cgroup(meta, cgroup.finish());
        if channel_open {
            got.drain(&messages, pipe_grace, meta, on_event);
        }
        if let Some(why) = stopped.page_cache_note() {
            // The readings before it are kept; the note says why the rest is missing.
            meta.page_cache_note.get_or_insert(why);
        }
        // A program that sent no `done` (no memrel module, or one that
        // failed) still has the kernel's peak; after the last edge's reset,
        // it is the peak since that edge, one part of the run's.
        meta.vm_hwm_bytes = meta.vm_hwm_bytes.max(peak_bytes);
        got.fill_trailing_peak(peak_bytes, meta);
        tails.finish(pipe_grace, got.processes, meta);
        Ok(Ended {
            stop,
            status,
            sample_error: stopped.sample_error,
            vram: stopped.vram,
            probe_name,
        })
    }

    /// Starts the process: its command with the strategy's environment,
    /// the channel's descriptors, its own process group, its cgroup (or
    /// RLIMIT_AS); a tree's orphans adopted. `Err`: it could not be started.
    fn spawn(&self, channel: &Channel, meta: &mut RunMeta) -> Result<(Child, Prepared), String> {
        let mut command = self.plug.command(self.exe, self.strategy)?;
        let io = self.plug.io();
        command
            .stdin(if io.stdin {
                stdin::for_program()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        meta.ignored_env = strategy::clean_environment(&mut command, self.strategy, self.preload);
        channel.attach(&mut command);
        child::configure(&mut command);
        // A tree keeps its orphans (a `setsid` and double fork): memrel
        // adopts them as their subreaper, counts them, and reaps them.
        if self.plug.duties().sample_tree {
            if let Err(e) = crate::sampler::orphans::adopt() {
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| {
                    eprintln!(
                        "memrel: note: cannot adopt the tree's orphans (prctl(PR_SET_CHILD_SUBREAPER): \
                         {e}): a process whose parent exits leaves the tree"
                    );
                });
            }
        }
        let cgroup = self.cgroup.prepare(&self.cgroup_name)?;
        cgroup.apply(&mut command);
        match command.spawn() {
            Ok(child) => Ok((child, cgroup)),
            Err(e) => {
                record_cgroup(meta, cgroup.finish());
                Err(self.plug.start_error(self.exe, &e))
            }
        }
    }

    /// Watches the process until it exits, memrel is interrupted or the
    /// deadline passes: its channel's lines taken in as they arrive, its
    /// environment checked once it ran a moment (a program), its own peak
    /// read at every tick (a program alone).
    fn watch(
        &self,
        pid: u32,
        spawned: Instant,
        messages: &Receiver<Arrival>,
        got: &mut Collected,
        meta: &mut RunMeta,
        on_event: &mut dyn FnMut(&Event),
    ) -> Watched {
        // A program's own peak, read (never reset) at every tick while it
        // runs: wait4's ru_maxrss would also hold a child's it waited for,
        // which is not the scope of the samples (the process alone).
        let duties = self.plug.duties();
        let mut own_peak = (duties.complete_edges && !duties.sample_tree)
            .then(|| KernelPeak::open(pid).ok())
            .flatten();
        let mut own_peak_bytes = None;
        let mut channel_open = true;
        let mut channel_closed_at: Option<Instant> = None;
        let stop = loop {
            if let Some(peak) = own_peak.as_mut() {
                own_peak_bytes = peak.vm_hwm_bytes().or(own_peak_bytes);
            }
            if channel_open {
                match messages.recv_timeout(TICK) {
                    Ok(arrival) => got.take(arrival, meta, on_event),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => channel_open = false,
                }
            } else {
                // A worker that closed its channel is about to exit: notice
                // it within a millisecond (for a second; then at the tick).
                let closed_for = channel_closed_at.get_or_insert_with(Instant::now).elapsed();
                std::thread::sleep(if closed_for < EXIT_WATCH {
                    EXIT_POLL
                } else {
                    TICK
                });
            }
            if duties.sample_tree {
                child::reap_adopted();
            }
            if child::has_exited(pid) {
                break None;
            }
            // A program's environment is checked once it has run a moment
            // (the dynamic loader has mapped what was preloaded).
            if let Some(program) = got.program.as_mut().filter(|p| !p.environment_checked) {
                if spawned.elapsed() >= PROGRAM_LOOK_AFTER || got.events_taken > 0 {
                    let checks = environment_checks(pid, self.strategy, self.preload);
                    if checks.iter().all(|c| c.ok) || spawned.elapsed() >= PROGRAM_LOOK_UNTIL {
                        program.environment_checked = true;
                        meta.checks.extend(checks);
                    } else {
                        // Kept for a program that ends before the next look.
                        program.failed_checks = checks;
                    }
                }
            }
            if let Some(sig) = signals::received() {
                break Some(Stop::Signal(sig));
            }
            if Instant::now() >= self.deadline {
                break Some(Stop::Timeout);
            }
        };
        // A program that ended while a check still failed: its last look.
        if let Some(program) = got.program.as_mut().filter(|p| !p.environment_checked) {
            program.environment_checked = true;
            meta.checks.append(&mut program.failed_checks);
        }
        Watched {
            stop,
            channel_open,
            own_peak_bytes,
        }
    }
}

/// How the watch of one process ended.
struct Watched {
    /// Why memrel stopped it (`None`: it exited).
    stop: Option<Stop>,
    /// Its channel was still open (what is in flight is drained later).
    channel_open: bool,
    /// A program's own peak (VmHWM) at its latest tick.
    own_peak_bytes: Option<u64>,
}

/// Reaps the process (its whole group killed: a zombie's group id is still
/// reserved), within bounded waits: its status, wait4's peak, and how long
/// its pipes may take to end (a descendant that outlived it is named in
/// the run's metadata and cuts that short).
fn reap(
    child: &mut Child,
    stop: Option<Stop>,
    exit_stop: Option<ExitStop>,
    tree_pids: &Mutex<Vec<u32>>,
    meta: &mut RunMeta,
) -> (Option<ExitStatus>, Option<u64>, Duration) {
    // Stopped by memrel (a signal, the deadline): its exit is not waited on.
    if let (Some(_), Some(hold)) = (stop, &exit_stop) {
        hold.let_go();
    }
    // The worker is a zombie or about to be killed: its group id is still
    // reserved, so this reaches everything it started and nothing else.
    let pid = child.id();
    child::kill_group(pid);
    let (status, waited_peak_bytes) = child::wait_bounded_peak(child, REAP_GRACE);
    if let Some(why) = exit_stop.and_then(|hold| not_held(hold.finish(EXIT_STOP_ANSWER))) {
        meta.exit_reading_note.get_or_insert(why);
    }
    // A descendant that left the group outlives the program: named, with
    // what it holds; its pipes are given a moment, not the full grace.
    let outlived = tree_pids
        .lock()
        .map(|tree| child::outlived(&tree, pid))
        .unwrap_or_default();
    for o in &outlived {
        eprintln!(
            "memrel: warning: run {}: process {} ({}) that the program started outlived it, \
             holding {:.1} MiB; memrel does not wait for it: end it in the program, or kill it",
            meta.run,
            o.pid,
            o.command,
            o.rss_bytes as f64 / crate::textutil::MIB
        );
    }
    let pipe_grace = if outlived.is_empty() {
        PIPE_GRACE
    } else {
        OUTLIVED_PIPE_GRACE
    };
    meta.outlived.extend(outlived);
    (status, waited_peak_bytes, pipe_grace)
}

/// How long the tracer of a reaped process may take to say what it did.
const EXIT_STOP_ANSWER: Duration = Duration::from_secs(1);

/// Why a process was not read at its exit (`None`: it was, or it ended
/// without an exit of its own: killed by SIGKILL). A refused hold is said
/// once on stderr too, since it holds for every run on this machine.
fn not_held(held: Held) -> Option<String> {
    match held {
        Held::Read | Held::NoStop => None,
        Held::Unread => Some(
            "held at its exit, the sampler took no reading in time: its last sample is the \
             last tick before the exit"
                .into(),
        ),
        Held::Refused(why) => {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                eprintln!(
                    "memrel: note: {why}: a process cannot be held at its exit here, so a \
                     short one may end between two samples (set {}=0 to stop trying)",
                    super::exit_stop::ENV
                );
            });
            Some(format!(
                "no reading at the exit: {why}; its last sample is the last tick before the exit"
            ))
        }
    }
}

/// Keeps a process's cgroup in the run's metadata: the first process's
/// start, the latest one's end (respawn runs several in turn).
/// A process begins: the collector's program state (a program's edges
/// completed by memrel), and its pid in the run's meta (a respawn's after
/// the first).
fn begin_process(duties: &ParentDuties, pid: u32, got: &mut Collected, meta: &mut RunMeta) {
    got.program = duties.complete_edges.then(|| ProgramState {
        numbering: CycleNumbering::default(),
        environment_checked: !duties.check_strategy,
        failed_checks: Vec::new(),
    });
    if meta.pid == 0 {
        meta.pid = pid;
    } else {
        meta.respawned_pids.push(pid);
    }
}

/// The kernel's peak between edges is one process's VmHWM: not the
/// tree's PSS sum the samples are under --tree.
fn kernel_peak(duties: &ParentDuties, pid: u32) -> Result<KernelPeak, String> {
    if duties.sample_tree {
        Err(
            "the samples are the process tree's PSS (--tree); the kernel's peak (VmHWM) is \
             one process's, so it is not put beside them"
                .to_string(),
        )
    } else {
        KernelPeak::open(pid)
    }
}

/// The sampler could not start: the process is let go and killed; the run's error.
fn abandon(child: &mut Child, exit_stop: Option<&ExitStop>, e: impl std::fmt::Display) -> String {
    if let Some(hold) = exit_stop {
        hold.read_with(crate::sampler::Nudge::ended());
    }
    child::kill_group(child.id());
    let _ = child::wait_bounded(child, REAP_GRACE);
    format!("cannot start the sampler thread: {e}")
}

/// The process's own peak, in the scope of the samples: memrel's worker
/// holds no child, so wait4's is its own; a program's is read while it
/// ran; a tree has no VmHWM (its samples are PSS sums).
fn own_peak(
    duties: &ParentDuties,
    read_bytes: Option<u64>,
    waited_bytes: Option<u64>,
) -> Option<u64> {
    if duties.sample_tree {
        None
    } else if duties.complete_edges {
        read_bytes
    } else {
        waited_bytes
    }
}

/// The process's stdout and stderr, drained (and shown where asked).
struct Tails {
    stdout: drain::Tail,
    stderr: drain::Tail,
}

impl Tails {
    fn spawn(child: &mut Child, show_output: bool) -> Tails {
        let (echo_out, echo_err) = if show_output {
            (Some(drain::Echo::Stdout), Some(drain::Echo::Stderr))
        } else {
            (None, None)
        };
        Tails {
            stdout: drain::spawn(child.stdout.take(), TAIL_BYTES, echo_out),
            stderr: drain::spawn(child.stderr.take(), TAIL_BYTES, echo_err),
        }
    }

    /// Appends what each said (after `grace`) to the run's tails.
    fn finish(self, grace: Duration, process: u32, meta: &mut RunMeta) {
        append_tail(&mut meta.stdout_tail, self.stdout.finish(grace), process);
        append_tail(&mut meta.stderr_tail, self.stderr.finish(grace), process);
    }
}

fn record_cgroup(meta: &mut RunMeta, process: crate::cgroup::view::CgroupRun) {
    match &mut meta.cgroup {
        Some(run) => {
            run.at_end = process.at_end;
            run.error = run.error.take().or(process.error);
        }
        None => meta.cgroup = Some(process),
    }
}

/// The last sample, for an OOM kill's error.
fn last_reading(last: Option<&crate::record::Sample>) -> String {
    use crate::textutil::format_mib as mib;
    let Some(s) = last else {
        return "none (no sample was taken)".to_string();
    };
    let container = s
        .container()
        .map(|c| {
            format!(
                ", cgroup usage {}, working set {}",
                mib(c.usage_bytes),
                mib(c.working_set_bytes)
            )
        })
        .unwrap_or_default();
    format!("RSS {} at {:.3} s{container}", mib(s.host_bytes()), s.t_s)
}

/// Adds one process's output tail to the run's, keeping the last [`TAIL_BYTES`];
/// a later process's tail is headed by its number.
fn append_tail(tail: &mut String, more: String, process: u32) {
    if more.is_empty() {
        return;
    }
    if process > 0 {
        tail.push_str(&format!("--- worker process {} ---\n", process + 1));
    }
    tail.push_str(&more);
    if tail.len() > TAIL_BYTES {
        let mut cut = tail.len() - TAIL_BYTES;
        while !tail.is_char_boundary(cut) {
            cut += 1;
        }
        tail.drain(..cut);
    }
}
