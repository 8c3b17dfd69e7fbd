//! The process `memrel attach` measures: that it exists, that memrel may
//! read its memory (the same user, or root), what it runs (argv from
//! /proc/PID/cmdline) and when it has ended.
//!
//! It is not memrel's child, so there is no `waitpid`: it has ended when
//! /proc/PID is gone, is a zombie, or belongs to another process that got the
//! same pid (its start time differs). One memrel started (`memrel watch --
//! CMD`) stays a zombie until memrel reaps it: its exit status is read there
//! ([`Target::exit`]). Nothing here samples memory.

use std::path::Path;

use anyhow::{bail, Context, Result};

/// A process memrel may measure, as it was when memrel attached.
#[derive(Debug, Clone)]
pub struct Target {
    pub pid: u32,
    /// /proc/PID/cmdline's arguments; `[comm]` when it has none.
    pub argv: Vec<String>,
    /// Its start time in clock ticks after boot (/proc/PID/stat field 22):
    /// tells it apart from a later process with the same pid.
    start_ticks: u64,
    /// Its start time in Unix seconds, where the boot time is known.
    pub started_unix_s: Option<u64>,
}

impl Target {
    /// The process `pid`, checked: it exists, is not memrel itself, has
    /// memory of its own (not a kernel thread, not a zombie) and memrel runs
    /// as its user or as root.
    pub fn open(pid: u32) -> Result<Target> {
        if pid == std::process::id() {
            bail!("pid {pid} is this memrel attach itself: name the process to measure");
        }
        let proc_dir = Path::new("/proc").join(pid.to_string());
        let status = match std::fs::read_to_string(proc_dir.join("status")) {
            Ok(status) => status,
            Err(e) if pid == 0 || e.kind() == std::io::ErrorKind::NotFound => {
                bail!("no process with pid {pid}: check the pid with `ps -p {pid}`")
            }
            Err(e) => {
                return Err(e).with_context(|| format!("cannot read /proc/{pid}/status"));
            }
        };
        check_owner(pid, &status, rustix::process::geteuid().as_raw())?;
        if let Some(tgid) = field(&status, "Tgid:").filter(|t| *t != u64::from(pid)) {
            bail!("pid {pid} is a thread of process {tgid}: attach to {tgid}");
        }
        let stat = Stat::read(pid)
            .with_context(|| format!("no process with pid {pid} (it ended as memrel looked)"))?;
        if stat.gone() {
            bail!("process {pid} has already exited (a zombie its parent has not reaped): nothing to measure");
        }
        if field(&status, "VmRSS:").is_none() {
            bail!(
                "process {pid} ({}) is a kernel thread: it has no memory of its own to measure",
                stat.comm
            );
        }
        let cmdline = std::fs::read(proc_dir.join("cmdline")).unwrap_or_default();
        let mut argv: Vec<String> = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if argv.is_empty() {
            argv.push(format!("[{}]", stat.comm));
        }
        Ok(Target {
            pid,
            argv,
            start_ticks: stat.start_ticks,
            started_unix_s: started_unix_s(stat.start_ticks),
        })
    }

    /// Whether the process memrel attached to is still running.
    pub fn alive(&self) -> bool {
        Stat::read(self.pid).is_ok_and(|s| !s.gone() && s.start_ticks == self.start_ticks)
    }

    /// How it ended, where memrel started it and has not reaped it yet
    /// (`memrel watch -- CMD`): its zombie's exit status (/proc/PID/stat,
    /// as `waitpid` gives it) in words, `exited 3`; `None` while it runs, or
    /// for a process memrel is not the parent of.
    pub fn exit(&self) -> Option<String> {
        use std::os::unix::process::ExitStatusExt;
        let stat = Stat::read(self.pid).ok()?;
        let ours = stat.parent == std::process::id() && stat.start_ticks == self.start_ticks;
        let raw = stat.exit_code.filter(|_| ours && stat.state == 'Z')?;
        Some(exit_words(std::process::ExitStatus::from_raw(raw)))
    }

    /// The kernel's peak resident memory of the process since it started
    /// (VmHWM), while it runs.
    pub fn vm_hwm_bytes(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).ok()?;
        field(&status, "VmHWM:").map(|kib| kib * 1024)
    }
}

/// Fails unless memrel (effective uid `me`) may read the memory of the
/// process whose /proc/PID/status is `status`: root may read any; another
/// user only a process whose real, effective and saved uids are all its own
/// (the kernel's rule for /proc/PID/smaps without CAP_SYS_PTRACE).
pub fn check_owner(pid: u32, status: &str, me: u32) -> Result<()> {
    if me == 0 {
        return Ok(());
    }
    let uids: Vec<u32> = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .map(|rest| {
            rest.split_whitespace()
                .filter_map(|u| u.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let Some(&real) = uids.first() else {
        bail!("cannot read the owner of process {pid} (no Uid line in /proc/{pid}/status)");
    };
    if uids.iter().take(3).all(|u| *u == me) {
        return Ok(());
    }
    let owner = if uids.iter().take(3).all(|u| *u == real) {
        format!("uid {real}")
    } else {
        format!(
            "uids {}",
            uids.iter()
                .take(3)
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join("/")
        )
    };
    bail!(
        "process {pid} belongs to another user ({owner}) and memrel runs as uid {me}: \
         memrel needs the same user or root to read a process's memory (run it as that user, or with sudo)"
    )
}

/// The number after `name` in /proc/PID/status (kB for memory fields).
fn field(status: &str, name: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// What memrel reads of /proc/PID/stat.
struct Stat {
    comm: String,
    state: char,
    parent: u32,
    start_ticks: u64,
    /// Its exit status, as `waitpid` gives it (Linux 3.5 on; 0 while it runs).
    exit_code: Option<i32>,
}

impl Stat {
    fn read(pid: u32) -> Result<Stat> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        parse_stat(&text).with_context(|| format!("/proc/{pid}/stat is not as Linux writes it"))
    }

    /// A zombie or a dead task: the process has exited.
    fn gone(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// comm, state, parent, start time and exit code of a /proc/PID/stat line
/// (comm may hold spaces and parentheses: it ends at the last ')').
fn parse_stat(text: &str) -> Option<Stat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // Field 3 (state) is rest[0], 4 (ppid) rest[1], 22 (starttime)
    // rest[19], 52 (exit_code) rest[49].
    let state = rest.first()?.chars().next()?;
    let parent = rest.get(1)?.parse().ok()?;
    let start_ticks = rest.get(19)?.parse().ok()?;
    Some(Stat {
        comm,
        state,
        parent,
        start_ticks,
        exit_code: rest.get(49).and_then(|c| c.parse().ok()),
    })
}

/// How a process ended, in words: `exited 3`, `killed by signal 9`.
pub fn exit_words(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => "ended".to_string(),
    }
}

/// Boot time (/proc/stat `btime`) plus the start ticks over the clock rate.
fn started_unix_s(start_ticks: u64) -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let boot_s: u64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    // SAFETY: sysconf reads a constant of the C library; no memory is passed.
    let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let ticks_per_s = u64::try_from(ticks_per_s).ok().filter(|t| *t > 0)?;
    Some(boot_s + start_ticks / ticks_per_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tpython3\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nVmHWM:\t  204800 kB\nVmRSS:\t  10240 kB\n";

    #[test]
    fn another_users_process_is_refused_naming_the_pid_and_the_fix() {
        let e = check_owner(4242, STATUS, 1001).unwrap_err().to_string();
        assert!(
            e.contains("process 4242 belongs to another user (uid 1000)"),
            "{e}"
        );
        assert!(e.contains("memrel runs as uid 1001"), "{e}");
        assert!(e.contains("same user or root"), "{e}");
        // A set-uid process whose saved uid is root's is not the user's either.
        let setuid = STATUS.replace("Uid:\t1000\t1000\t1000", "Uid:\t1000\t1000\t0");
        let e = check_owner(7, &setuid, 1000).unwrap_err().to_string();
        assert!(e.contains("uids 1000/1000/0"), "{e}");
    }

    #[test]
    fn the_same_user_or_root_may_read_it() {
        check_owner(4242, STATUS, 1000).unwrap();
        check_owner(4242, STATUS, 0).unwrap();
        assert!(check_owner(4242, "Name:\tx\n", 1000).is_err());
    }

    #[test]
    fn a_stat_line_with_an_odd_comm_is_read() {
        let line = "1234 (my (odd) prog) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 200 18446744073709551615";
        let stat = parse_stat(line).unwrap();
        assert_eq!(stat.comm, "my (odd) prog");
        assert_eq!(stat.state, 'S');
        assert_eq!(stat.start_ticks, 987654);
        assert_eq!((stat.parent, stat.exit_code), (1, None));
        assert_eq!(field(STATUS, "VmHWM:"), Some(204_800));
    }

    #[test]
    fn a_pid_that_does_not_exist_or_is_memrel_is_refused() {
        let e = Target::open(u32::MAX - 1).unwrap_err().to_string();
        assert!(
            e.contains(&format!("no process with pid {}", u32::MAX - 1)),
            "{e}"
        );
        let e = Target::open(std::process::id()).unwrap_err().to_string();
        assert!(e.contains("memrel attach itself"), "{e}");
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            // /proc/thread-self links to PID/task/TID.
            let link = std::fs::read_link("/proc/thread-self").unwrap();
            let tid: u32 = link.file_name().unwrap().to_str().unwrap().parse().unwrap();
            tx.send(tid).unwrap();
            let _ = stop_rx.recv();
        });
        let tid = rx.recv().unwrap();
        let e = Target::open(tid).unwrap_err().to_string();
        stop_tx.send(()).unwrap();
        thread.join().unwrap();
        let me = std::process::id();
        assert_eq!(
            e,
            format!("pid {tid} is a thread of process {me}: attach to {me}")
        );
        let me = Target::open(std::os::unix::process::parent_id()).unwrap();
        assert!(me.alive() && !me.argv.is_empty());
        assert_eq!(me.exit(), None);
    }

    #[test]
    fn a_child_memrel_has_not_reaped_says_how_it_ended() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "read x; exit 3"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let target = Target::open(child.id()).unwrap();
        assert_eq!(target.exit(), None, "it runs");
        drop(child.stdin.take());
        while target.alive() {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(target.exit().as_deref(), Some("exited 3"));
        assert_eq!(exit_words(child.wait().unwrap()), "exited 3");
        assert_eq!(target.exit(), None, "reaped: gone");
    }
}
