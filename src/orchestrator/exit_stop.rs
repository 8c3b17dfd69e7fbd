//! Holds a worker or program at its exit until the sampler has read it, so
//! every run has a reading at the exit however busy the machine is: on a
//! loaded machine a short program can end between two ticks, and what it
//! held is gone by the time anything notices the exit.
//!
//! The kernel stops a traced process at `PTRACE_EVENT_EXIT`: after its last
//! instruction, before its memory, its files and its GPU contexts are
//! released. A thread of its own is the tracer (ptrace's requests must come
//! from the thread that attached). It attaches with `PTRACE_SEIZE`, which
//! neither stops the process nor changes what it sees at `exec`, passes
//! every signal on at once, keeps a job-control stop a stop
//! (`PTRACE_LISTEN`), and at the exit stop asks the sampler for a reading
//! and waits for it (bounded) before letting the process go.
//!
//! The price: while memrel holds it, a debugger cannot attach to the
//! process (`MEMREL_EXIT_STOP=0` turns the hold off). Where ptrace is
//! refused (a seccomp profile, Yama's scope 3) the run goes on without it:
//! its last sample is the last tick before the exit, and the run says so.

use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::sampler::Nudge;

/// The environment variable that turns the hold off (`0`).
pub const ENV: &str = "MEMREL_EXIT_STOP";

/// How long a held process waits for the sampler's reading at most: a busy
/// machine may not run the sampler thread for a while; a sampler that has
/// ended answers at once.
const READ_LIMIT: Duration = Duration::from_secs(5);

/// How long the tracer waits for the sampler to exist (it starts just after
/// the process).
const SAMPLER_LIMIT: Duration = Duration::from_secs(10);

/// The tracer of one process.
pub struct ExitStop {
    nudge: Arc<OnceLock<Nudge>>,
    done: Option<mpsc::Receiver<Held>>,
}

/// What the hold did.
#[derive(Debug, Clone, PartialEq)]
pub enum Held {
    /// The process was read at its exit.
    Read,
    /// It was held at its exit, and the sampler took no reading in time (or
    /// had ended).
    Unread,
    /// It ended without an exit stop (killed by SIGKILL, or gone before the
    /// tracer attached: ptrace refuses a process that has exited, and that
    /// is no refusal of the hold).
    NoStop,
    /// ptrace refused: why.
    Refused(String),
}

impl ExitStop {
    /// Starts tracing `pid` (memrel's child, already past its `exec`) on a
    /// thread of its own; `None` where the hold is turned off.
    pub fn start(pid: u32) -> Option<ExitStop> {
        if std::env::var(ENV).is_ok_and(|v| v.trim() == "0") {
            return None;
        }
        let nudge = Arc::new(OnceLock::new());
        let (tx, rx) = mpsc::channel();
        let shared = Arc::clone(&nudge);
        let started = std::thread::Builder::new()
            .name("memrel-exit-stop".into())
            .spawn(move || {
                let _ = tx.send(trace(pid, &shared));
            });
        let done = match started {
            Ok(_) => Some(rx),
            Err(_) => None,
        };
        Some(ExitStop { nudge, done })
    }

    /// The sampler that reads the process at its exit.
    pub fn read_with(&self, nudge: Nudge) {
        let _ = self.nudge.set(nudge);
    }

    /// memrel is stopping the process (a signal to memrel, the deadline): no
    /// reading is waited for at its exit.
    pub fn let_go(&self) {
        match self.nudge.get() {
            Some(nudge) => nudge.close(),
            None => {
                let _ = self.nudge.set(Nudge::ended());
            }
        }
    }

    /// What the hold did, once the process has been reaped (waits at most
    /// `limit` for the tracer's answer).
    pub fn finish(self, limit: Duration) -> Held {
        match self.done.map(|rx| rx.recv_timeout(limit)) {
            Some(Ok(held)) => held,
            Some(Err(_)) => Held::NoStop,
            None => Held::Refused("no thread could be started to trace it".into()),
        }
    }
}

/// The tracer thread: attach, pass signals on, read at the exit stop.
fn trace(pid: u32, nudge: &OnceLock<Nudge>) -> Held {
    if let Err(e) = ptrace(libc::PTRACE_SEIZE, pid, libc::PTRACE_O_TRACEEXIT as usize) {
        // The kernel refuses to trace a process that has already exited (a
        // zombie: EPERM, or ESRCH): nothing was refused, it ended before the
        // tracer came (`echo hi | memrel exec -- cat`), and its exit cannot
        // be held. Only a live process's refusal is one.
        if super::child::has_exited(pid) {
            return Held::NoStop;
        }
        return Held::Refused(format!("ptrace(PTRACE_SEIZE) was refused: {e}"));
    }
    let mut held = Held::NoStop;
    loop {
        match stopped(pid) {
            Wait::Gone => return held,
            Wait::Exit => {
                held = if read(nudge) {
                    Held::Read
                } else {
                    Held::Unread
                };
                resume(pid, libc::PTRACE_CONT, 0);
            }
            Wait::JobControl => resume(pid, libc::PTRACE_LISTEN, 0),
            Wait::Signal(sig) => resume(pid, libc::PTRACE_CONT, sig),
        }
    }
}

/// Asks the sampler (once it exists) for a reading and waits for it.
fn read(nudge: &OnceLock<Nudge>) -> bool {
    let until = Instant::now() + SAMPLER_LIMIT;
    loop {
        if let Some(nudge) = nudge.get() {
            return nudge.read_now(READ_LIMIT);
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// What the traced process did next.
enum Wait {
    /// Exited (a zombie, left for the orchestrator to reap) or reaped.
    Gone,
    /// At its exit stop.
    Exit,
    /// Stopped by job control (SIGSTOP, SIGTSTP, …): it stays stopped.
    JobControl,
    /// A signal is about to be delivered to it: pass it on.
    Signal(i32),
}

/// Blocks until the process stops or exits; leaves an exit to be reaped by
/// the orchestrator (`WNOWAIT`: its process group stays reserved).
fn stopped(pid: u32) -> Wait {
    use rustix::process::{waitid, Pid, WaitId, WaitIdOptions};
    let Some(id) = Pid::from_raw(pid as i32) else {
        return Wait::Gone;
    };
    loop {
        let status = match waitid(
            WaitId::Pid(id),
            WaitIdOptions::EXITED | WaitIdOptions::STOPPED | WaitIdOptions::NOWAIT,
        ) {
            Ok(Some(status)) => status,
            Ok(None) => continue,
            Err(rustix::io::Errno::INTR) => continue,
            // ECHILD: reaped already.
            Err(_) => return Wait::Gone,
        };
        if status.exited() || status.killed() || status.dumped() {
            return Wait::Gone;
        }
        let Some(raw) = status.trapping_signal() else {
            // Not a ptrace stop (it cannot be one here): look again shortly.
            std::thread::sleep(Duration::from_millis(1));
            continue;
        };
        let (sig, event) = (raw & 0xff, raw >> 8);
        return match event {
            libc::PTRACE_EVENT_EXIT => Wait::Exit,
            libc::PTRACE_EVENT_STOP
                if matches!(
                    sig,
                    libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
                ) =>
            {
                Wait::JobControl
            }
            // Another event stop (none is asked for): go on.
            e if e != 0 => Wait::Signal(0),
            _ => Wait::Signal(sig),
        };
    }
}

/// Lets the stopped process go on (`request`: `PTRACE_CONT`, or
/// `PTRACE_LISTEN` to keep a job-control stop), delivering `sig`.
fn resume(pid: u32, request: libc::c_uint, sig: i32) {
    // ESRCH: it is no longer stopped (SIGKILL took it): nothing to resume.
    if ptrace(request, pid, sig as usize).is_err() {
        // A process still stopped that would not resume: do not spin on it.
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn ptrace(request: libc::c_uint, pid: u32, data: usize) -> std::io::Result<()> {
    // SAFETY: the requests used here (SEIZE, CONT, LISTEN) take no address
    // and an integer `data` (options or a signal number); none writes into
    // memrel's memory.
    let got = unsafe {
        libc::ptrace(
            request,
            pid as libc::pid_t,
            std::ptr::null_mut::<libc::c_void>(),
            data as *mut libc::c_void,
        )
    };
    if got == -1 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    /// A child killed by a signal memrel passes on still dies of it, and one
    /// stopped by job control stays stopped until SIGCONT.
    #[test]
    fn signals_reach_the_traced_process_as_they_would_untraced() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep starts");
        let pid = child.id();
        let hold = ExitStop::start(pid).expect("the hold is on by default");
        hold.read_with(Nudge::ended());
        std::thread::sleep(Duration::from_millis(50));
        let target = rustix::process::Pid::from_raw(pid as i32).expect("a pid");
        rustix::process::kill_process(target, rustix::process::Signal::STOP).expect("SIGSTOP");
        std::thread::sleep(Duration::from_millis(100));
        // 'T', or 't' for a stop the tracer keeps (PTRACE_LISTEN); a tracer
        // that let it go on would show it sleeping ('S').
        assert!(matches!(state(pid), 'T' | 't'), "stopped: {}", state(pid));
        rustix::process::kill_process(target, rustix::process::Signal::CONT).expect("SIGCONT");
        rustix::process::kill_process(target, rustix::process::Signal::TERM).expect("SIGTERM");
        let status = super::super::child::wait_bounded(&mut child, Duration::from_secs(20))
            .expect("it ends");
        assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
        // Held at its exit; the sampler had ended, so nothing read it.
        assert_eq!(hold.finish(Duration::from_secs(10)), Held::Unread);
    }

    /// memrel reaps the process (`child::wait_bounded_peak`) while it is
    /// held at its exit: the reaper must leave the exit stop to the tracer.
    /// A reaper that took it (a wait without `WNOWAIT` reports a tracee's
    /// stop to any thread of memrel) left the tracer waiting for a stop that
    /// never came, and the process held, deaf to SIGKILL, until memrel
    /// exited: a signal to memrel as a worker started took 12 s to stop it.
    #[test]
    fn reaping_a_held_process_leaves_its_exit_stop_to_the_tracer() {
        use std::process::{Command, Stdio};
        let mut child = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("cat starts");
        let pid = child.id();
        let (go, orders) = mpsc::channel::<()>();
        let (report, reports) = mpsc::channel::<bool>();
        // The tracer: attaches, then, when told, looks for the exit stop
        // without waiting and lets the process go.
        let tracer = std::thread::spawn(move || {
            let seized = ptrace(libc::PTRACE_SEIZE, pid, libc::PTRACE_O_TRACEEXIT as usize);
            let _ = report.send(seized.is_ok());
            if seized.is_err() || orders.recv().is_err() {
                return;
            }
            let seen = exit_stop_reported(pid);
            resume(pid, libc::PTRACE_CONT, 0);
            let _ = report.send(seen);
        });
        assert!(reports.recv().expect("the tracer answers"), "PTRACE_SEIZE");
        // cat exits when its input ends: it stops at its exit, held.
        drop(child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(20);
        while state(pid) != 't' {
            assert!(Instant::now() < deadline, "never held: {}", state(pid));
            std::thread::sleep(Duration::from_millis(1));
        }
        let reap = super::super::child::wait_bounded_peak;
        assert_eq!(reap(&mut child, Duration::from_millis(50)).0, None);
        assert_eq!(
            super::super::child::wait_bounded(&mut child, Duration::ZERO),
            None
        );
        go.send(()).expect("the tracer waits");
        assert!(
            reports.recv().expect("the tracer answers"),
            "the reaper took the exit stop from the tracer"
        );
        let (status, _) = reap(&mut child, Duration::from_secs(20));
        assert!(status.expect("reaped once let go").success());
        tracer.join().expect("the tracer thread");
    }

    /// Issue 47, item 9: a process that exited before the tracer attached
    /// (ptrace refuses a zombie) ended without a stop; nothing refused the
    /// hold, so no run and no note says ptrace was refused.
    #[test]
    fn a_process_gone_before_the_tracer_came_is_no_refusal() {
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("true starts");
        let pid = child.id();
        // A zombie, not reaped: what the tracer finds when it comes late.
        let deadline = Instant::now() + Duration::from_secs(20);
        while !super::super::child::has_exited(pid) {
            assert!(Instant::now() < deadline, "true never ended");
            std::thread::sleep(Duration::from_millis(1));
        }
        let hold = ExitStop::start(pid).expect("the hold is on by default");
        hold.read_with(Nudge::ended());
        assert_eq!(hold.finish(Duration::from_secs(10)), Held::NoStop);
        let _ = super::super::child::wait_bounded(&mut child, Duration::from_secs(5));
    }

    /// Whether `pid`'s exit stop is there to be seen (not waited for, not taken).
    fn exit_stop_reported(pid: u32) -> bool {
        use rustix::process::{waitid, Pid, WaitId, WaitIdOptions};
        let id = Pid::from_raw(pid as i32).expect("a pid");
        match waitid(
            WaitId::Pid(id),
            WaitIdOptions::EXITED
                | WaitIdOptions::STOPPED
                | WaitIdOptions::NOHANG
                | WaitIdOptions::NOWAIT,
        ) {
            Ok(Some(status)) => status
                .trapping_signal()
                .is_some_and(|raw| raw >> 8 == libc::PTRACE_EVENT_EXIT),
            _ => false,
        }
    }

    /// The process state letter of /proc/PID/stat ('T': stopped, 't': traced).
    fn state(pid: u32) -> char {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
        let after = stat.rsplit_once(") ").expect("comm ends").1;
        after.chars().next().expect("a state")
    }
}
