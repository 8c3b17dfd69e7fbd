//! The worker process as the orchestrator controls it: spawned in its own
//! process group (so a timeout or Ctrl-C kills everything it started, and a
//! Ctrl-C at the terminal reaches memrel only), tied to memrel's life (it gets
//! SIGKILL if memrel dies first), checked for its end without being reaped (so
//! its group id stays reserved until the group is killed), and waited for with
//! a bound, never forever.
//!
//! rustix for what std lacks (`waitid(WNOWAIT)`, `PR_SET_PDEATHSIG`); libc
//! only for `wait4`, whose rusage (the child's own VmHWM) rustix does not
//! return.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// How often a bounded wait looks at the child again.
const POLL: Duration = Duration::from_millis(5);

/// Makes `command` start the worker as the leader of a new process group that
/// dies with memrel. (The kernel sends the parent-death signal when the
/// spawning *thread* ends: spawn from a thread that outlives the worker, as
/// `memrel run` does from its main thread.)
pub fn configure(command: &mut Command) {
    command.process_group(0);
    let parent_pid = std::process::id();
    // SAFETY: `pre_exec` is unsafe because its closure runs between fork
    // and exec: this one makes raw syscalls only (prctl, getppid, through
    // rustix) and allocates nothing.
    unsafe {
        command.pre_exec(move || {
            use rustix::process::{getppid, set_parent_process_death_signal, Pid, Signal};
            set_parent_process_death_signal(Some(Signal::KILL))?;
            // memrel died between fork and prctl: do not start an orphan.
            if getppid() != Pid::from_raw(parent_pid as i32) {
                return Err(std::io::Error::other(
                    "memrel exited while starting the worker",
                ));
            }
            Ok(())
        });
    }
}

/// Whether the child has ended; it stays a zombie (not reaped), so its pid and
/// process-group id cannot be reused before [`kill_group`] and [`wait_bounded`].
pub fn has_exited(pid: u32) -> bool {
    use rustix::process::{waitid, Pid, WaitId, WaitIdOptions};
    let Some(pid) = Pid::from_raw(pid as i32) else {
        return true;
    };
    match waitid(
        WaitId::Pid(pid),
        WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT,
    ) {
        // Something exited (it stays a zombie for the reaper: NOWAIT); a
        // stop (held at its exit: `exit_stop`) is not an exit.
        Ok(Some(status)) => status.exited() || status.killed() || status.dumped(),
        Ok(None) => false,
        // ECHILD: already reaped or not ours; either way it is not running.
        Err(_) => true,
    }
}

/// SIGKILL to every process in the worker's group (the worker and whatever it
/// started). Call it before the worker is reaped: the group id is its pid.
/// The processes of `tree` (a tree's pids at its last reading) other than
/// `root` that are still alive outside `root`'s process group (which
/// [`kill_group`] has just ended): they left it (`setsid`, a daemon) and
/// outlive the program, holding what they hold.
pub fn outlived(tree: &[u32], root: u32) -> Vec<crate::record::Outlived> {
    tree.iter()
        .filter(|&&pid| pid != root)
        .filter_map(|&pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
            let state = fields.next()?;
            let group: u32 = fields.nth(1)?.parse().ok()?;
            if state == "Z" || state == "X" || group == root {
                return None;
            }
            let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
            let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let command: String = String::from_utf8_lossy(&cmdline)
                .replace('\0', " ")
                .trim()
                .chars()
                .take(120)
                .collect();
            Some(crate::record::Outlived {
                pid,
                command,
                rss_bytes: pages * rustix::param::page_size() as u64,
            })
        })
        .collect()
}

pub fn kill_group(pid: u32) {
    if let Some(group) = rustix::process::Pid::from_raw(pid as i32) {
        // The group is gone already when this fails: nothing left to kill.
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    }
}

/// Reaps the orphans memrel adopted that have exited (`sampler::orphans`:
/// memrel is their subreaper), so none stays a zombie. It looks with
/// `WNOWAIT` first and waits only for a pid that has exited and is an
/// adopted orphan, never for a worker: a wait that is not `WNOWAIT` on a
/// worker held at its exit would take its stop from the tracer (`exit_stop`).
pub fn reap_adopted() {
    use rustix::process::{waitid, waitpid, Pid, WaitId, WaitIdOptions, WaitOptions};
    for orphan in crate::sampler::orphans::adopted_pids() {
        let Some(pid) = Pid::from_raw(orphan as i32) else {
            crate::sampler::orphans::forget(orphan);
            continue;
        };
        match waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT,
        ) {
            // Alive (or not exited yet): looked at again later.
            Ok(None) => {}
            Ok(Some(_)) => {
                if waitpid(Some(pid), WaitOptions::NOHANG).is_ok_and(|s| s.is_some()) {
                    crate::sampler::orphans::forget(orphan);
                }
            }
            // ECHILD: reaped already, or not memrel's child.
            Err(_) => crate::sampler::orphans::forget(orphan),
        }
    }
}

/// Reaps the child, waiting at most `limit`; `None` when it has not ended by then
/// (a process stuck in the kernel, or held at its exit by a tracer that has
/// not let it go) or cannot be waited for.
///
/// It waits for the child only once [`has_exited`] has seen it end: a wait
/// that is not `WNOWAIT` also takes a traced process's stop, which the kernel
/// reports to every thread of memrel, and a stop taken here is one the tracer
/// (`exit_stop`) never sees: the process would stay held at its exit, deaf to
/// SIGKILL, until memrel itself exits.
pub fn wait_bounded(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    use rustix::process::{waitpid, Pid, WaitOptions};
    let deadline = Instant::now() + limit;
    let pid = Pid::from_raw(child.id() as i32)?;
    loop {
        if !has_exited(child.id()) {
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(POLL);
            continue;
        }
        // rustix, not std's `try_wait`: std keeps the first status it is
        // given, and a traced process's stop (`exit_stop`) is not its end.
        match waitpid(Some(pid), WaitOptions::NOHANG) {
            Ok(Some((_, status))) if !status.stopped() => {
                return Some(ExitStatus::from_raw(status.as_raw()))
            }
            Ok(_) if Instant::now() < deadline => std::thread::sleep(POLL),
            Ok(_) => return None,
            // Reaped already (by std's own wait): what std kept, if anything.
            Err(_) => return child.try_wait().ok().flatten(),
        }
    }
}

/// Reaps the child like [`wait_bounded`] (once [`has_exited`] has seen it
/// end, never taking a tracer's stop), and returns with its status the
/// kernel's peak of its resident set (`ru_maxrss` of `wait4`: VmHWM, which a
/// program that reports none still has), in bytes.
pub fn wait_bounded_peak(child: &mut Child, limit: Duration) -> (Option<ExitStatus>, Option<u64>) {
    let pid = child.id() as libc::pid_t;
    let deadline = Instant::now() + limit;
    loop {
        if !has_exited(child.id()) {
            if Instant::now() < deadline {
                std::thread::sleep(POLL);
                continue;
            }
            return (None, None);
        }
        let mut status: libc::c_int = 0;
        // libc directly: neither std nor rustix 1.1 has wait4 with its
        // rusage, and getrusage(RUSAGE_CHILDREN) is the largest of all
        // children reaped so far, not this one's.
        // SAFETY: `rusage` is plain integers, for which all zeros is a valid
        // value; wait4 writes only into the two locals it is handed.
        let (got, usage) = unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            let got = libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage);
            (got, usage)
        };
        if got == pid && libc::WIFSTOPPED(status) {
            // A traced process's stop (`exit_stop`) is not its end.
            std::thread::sleep(POLL);
            continue;
        }
        if got == pid {
            let peak_bytes = u64::try_from(usage.ru_maxrss).ok().map(|kib| kib * 1024);
            return (Some(ExitStatus::from_raw(status)), peak_bytes);
        }
        if got == 0 && Instant::now() < deadline {
            std::thread::sleep(POLL);
            continue;
        }
        // Reaped elsewhere, or not ended in time: what std can still tell.
        return (wait_bounded(child, Duration::ZERO), None);
    }
}

/// How the worker ended, for a run's error, when memrel did not stop it.
/// A program (`program`) has completed when it exits 0; memrel's worker
/// must also have said `done`.
pub fn describe_exit(status: Option<ExitStatus>, limit: Duration, program: bool) -> String {
    let who = if program { "the program" } else { "the worker" };
    match status {
        None => format!(
            "{who} did not end within {:.0} s of its exit or SIGKILL (stuck in the kernel?)",
            limit.as_secs_f64()
        ),
        Some(s) => match (s.code(), s.signal()) {
            (_, Some(sig)) => format!(
                "{who} was killed by signal {sig} ({}), which memrel did not send{}",
                signal_name(sig),
                if sig == libc::SIGKILL {
                    // An OOM kill, where a counter showed it, is `oom_killed` (`cgroup::oom`).
                    " (no oom_kill counter memrel reads rose: not the kernel's OOM killer, as far as it can tell)"
                } else {
                    ""
                }
            ),
            (Some(code), _) if program => format!("the program exited with code {code}"),
            (Some(code), _) => format!("worker exited with code {code} without finishing"),
            _ => format!("{who} ended without finishing"),
        },
    }
}

/// The usual name of a signal number (`SIG?` for others).
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        _ => "SIG?",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Stdio;

    #[test]
    fn a_killed_group_takes_the_grandchild_with_it() {
        // sh starts a sleeping grandchild in the same group, prints its pid and waits.
        let mut command = Command::new("sh");
        command
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(Stdio::piped())
            .stdin(Stdio::null());
        configure(&mut command);
        let mut child = command.spawn().expect("sh starts");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().expect("stdout")),
            &mut line,
        )
        .expect("pid line");
        let grandchild: i32 = line.trim().parse().expect("a pid");
        assert!(!has_exited(child.id()));
        kill_group(child.id());
        let status = wait_bounded(&mut child, Duration::from_secs(5)).expect("reaped");
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive(grandchild) && Instant::now() < deadline {
            std::thread::sleep(POLL);
        }
        assert!(!alive(grandchild), "grandchild {grandchild} survived");
    }

    #[test]
    fn reaping_tells_the_kernels_peak_of_a_program_that_reports_none() {
        let mut child = Command::new("python3")
            .args([
                "-c",
                "b = bytearray(48 << 20); b[::4096] = b'x' * len(b[::4096])",
            ])
            .spawn()
            .expect("python3 starts (it is on PATH wherever memrel's tests run)");
        let (status, peak) = wait_bounded_peak(&mut child, Duration::from_secs(20));
        assert!(status.expect("reaped").success());
        let peak = peak.expect("ru_maxrss");
        assert!(peak > 48 << 20, "{peak}");
    }

    #[test]
    fn a_bounded_wait_gives_up_on_a_child_that_does_not_end() {
        let mut child = Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep starts");
        let start = Instant::now();
        assert_eq!(wait_bounded(&mut child, Duration::from_millis(50)), None);
        assert!(start.elapsed() < Duration::from_secs(2));
        let _ = child.kill();
        assert!(wait_bounded(&mut child, Duration::from_secs(5)).is_some());
    }

    fn alive(pid: i32) -> bool {
        crate::sampler::procfs::is_running(pid as u32)
    }
}
