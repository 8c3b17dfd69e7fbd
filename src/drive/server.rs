//! The server `memrel drive` measures: one it starts (`-- CMD`, in a
//! process group of its own, stopped at the end with SIGTERM and, after a
//! grace period, SIGKILL, until no process of the group is left, even where
//! its leader died first; its exit recorded), or one already running, named
//! by `--pid` or found as the process listening on the URL's port
//! (/proc/net/tcp and tcp6: the socket's inode, then the /proc/PID/fd link
//! that points at it). Its output goes to `server.log` in the results
//! directory; `memrel watch -- CMD` starts its server here too, and waits
//! for it to listen ([`Started::wait_listening`]). It measures nothing.

/// Where a server memrel started writes its stdout and stderr.
pub const SERVER_LOG: &str = "server.log";

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::attach::target::exit_words;

/// The host and port of `http://HOST:PORT/...` (port 80 when none is given).
pub fn host_port(url: &str) -> Result<(String, u16)> {
    let Some(rest) = url.strip_prefix("http://") else {
        bail!("--url {url:?} must start with http:// (memrel speaks plain HTTP to a local server)");
    };
    let authority = rest.split('/').next().unwrap_or(rest);
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) => (
            host,
            port.parse::<u16>()
                .map_err(|_| anyhow::anyhow!("--url {url:?}: {port:?} is not a port number"))?,
        ),
        None => (authority, 80),
    };
    if host.is_empty() {
        bail!("--url {url:?} has no host: write it as http://127.0.0.1:8000");
    }
    Ok((host.trim_matches(['[', ']']).to_string(), port))
}

/// The socket inodes listening on `port` (TCP state 0A, any address).
fn listening_inodes(port: u16) -> Vec<u64> {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            let (Some(local), Some(state), Some(inode)) =
                (fields.get(1), fields.get(3), fields.get(9))
            else {
                continue;
            };
            let local_port = local
                .rsplit_once(':')
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            if *state == "0A" && local_port == Some(port) {
                if let Ok(inode) = inode.parse::<u64>() {
                    inodes.push(inode);
                }
            }
        }
    }
    inodes
}

/// Whether anything listens on `port` (this network namespace).
pub fn listening(port: u16) -> bool {
    !listening_inodes(port).is_empty()
}

/// The process listening on `port`, or why none was found.
pub fn listener_pid(port: u16) -> Result<u32> {
    let inodes = listening_inodes(port);
    if inodes.is_empty() {
        bail!(
            "no process listens on port {port} (checked /proc/net/tcp and tcp6): start the server, \
             pass its --pid, or let memrel start it with -- CMD"
        );
    }
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc")
        .context("cannot read /proc")?
        .flatten()
    {
        let Some(pid) = crate::sampler::tree::entry_id(&entry) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path())
                .ok()
                .and_then(|l| l.to_str().map(|s| wanted.iter().any(|w| w == s)))
                .unwrap_or(false)
        });
        if holds {
            found.push(pid);
        }
    }
    // Forked workers share the socket: the oldest (lowest pid, usually the
    // parent) is the server.
    found.sort_unstable();
    found.first().copied().with_context(|| {
        format!(
            "port {port} is listened on, but by no process memrel may look into \
             (another user's?): pass --pid, or run memrel as that user"
        )
    })
}

/// A server memrel started.
pub struct Started {
    pub child: Child,
    /// The exit as it was reaped (`exited 0`, `killed by SIGTERM`, …).
    pub exit: Option<String>,
}

impl Started {
    /// Starts `command` in a process group of its own (so SIGTERM reaches
    /// its workers too).
    /// Its stdout and stderr go to `log` (a server logs much).
    /// Starts `command` with memrel's environment as it is (no `--strategy`).
    pub fn spawn(command: &[String], log: &std::path::Path) -> Result<Started> {
        Self::spawn_under(command, log, None)
    }

    /// Starts `command` under `strategy` where one is given: memrel's own
    /// allocator variables removed, the strategy's set, its allocator
    /// (`preload`, found beforehand) preloaded, as a run's worker starts.
    pub fn spawn_under(
        command: &[String],
        log: &std::path::Path,
        strategy: Option<(&crate::strategy::Strategy, Option<&std::path::Path>)>,
    ) -> Result<Started> {
        let Some((program, args)) = command.split_first() else {
            bail!("-- CMD is empty: name the server's command after --");
        };
        use std::os::unix::process::CommandExt;
        let out = std::fs::File::create(log)
            .with_context(|| format!("cannot create {}", log.display()))?;
        let err = out
            .try_clone()
            .with_context(|| format!("cannot create {}", log.display()))?;
        let mut command = Command::new(program);
        if let Some((strategy, preload)) = strategy {
            crate::strategy::clean_environment(&mut command, strategy, preload);
        }
        let child = command
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .with_context(|| format!("cannot start {program:?}: is it installed and on PATH?"))?;
        Ok(Started { child, exit: None })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until something listens on `url`'s port (the server is up),
    /// for `timeout_s` at most (`flag` names that limit in the error); at
    /// SIGINT/SIGTERM it stops waiting at once (`Ok`: the caller's loop
    /// ends on the signal). An error, with the last lines of its `log`,
    /// where the server exits first or the time passes.
    pub fn wait_listening(
        &mut self,
        url: &str,
        timeout_s: f64,
        flag: &str,
        log: &Path,
    ) -> Result<()> {
        let (_, port) = host_port(url)?;
        let since = Instant::now();
        while !listening(port) && crate::signals::received().is_none() {
            if self.exited() {
                let exit = self.exit.clone().unwrap_or_default();
                bail!(
                    "the server {exit} before it listened on port {port} of --url {url}{}",
                    log_tail(log)
                );
            }
            if since.elapsed().as_secs_f64() > timeout_s {
                bail!(
                    "the server did not listen on port {port} of --url {url} within {flag} {timeout_s} s{}",
                    log_tail(log)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Whether it has exited (reaped here: its exit is kept).
    pub fn exited(&mut self) -> bool {
        if self.exit.is_some() {
            return true;
        }
        match self.child.try_wait() {
            Ok(Some(status)) => {
                self.exit = Some(exit_words(status));
                true
            }
            _ => false,
        }
    }

    /// SIGTERM to its group, then SIGKILL after `grace` to what is left of
    /// it (its workers too, where the leader exited first); its exit.
    pub fn stop(&mut self, grace: Duration) -> String {
        let leader = self.pid();
        let group = rustix::process::Pid::from_raw(leader as i32);
        let Some(group) = group else {
            return self.exit.clone().unwrap_or_default();
        };
        let was_gone = self.exited();
        if !was_gone || group_alive(leader) {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::TERM);
        }
        let until = Instant::now() + grace;
        while Instant::now() < until {
            if self.exited() && !group_alive(leader) {
                return self.exit.clone().unwrap_or_default();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // Asked before the SIGKILL: once sent, the leader may be reaped
        // here at once, and its exit must still say it was killed.
        let leader_ran = !self.exited();
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        if leader_ran {
            let exit = match self.child.wait() {
                Ok(status) => exit_words(status),
                Err(e) => format!("not reaped: {e}"),
            };
            self.exit = Some(format!(
                "{exit} (SIGKILL after a {} s grace)",
                grace.as_secs_f64()
            ));
        }
        self.exit.clone().unwrap_or_default()
    }

    /// What is left of its tree once its leader is gone: its process group
    /// ([`Started::stop`]) and every process of `seen` (pid, start time)
    /// that still runs outside it (SIGKILL: one that left the group left
    /// its signals too). The pids that still ran.
    pub fn stop_rest(&mut self, seen: &[(u32, u64)], grace: Duration) -> Vec<u32> {
        let running = |(pid, start): &(u32, u64)| {
            start_ticks(*pid) == Some(*start) && stat_field(*pid, 0).as_deref() != Some("Z")
        };
        let left: Vec<(u32, u64)> = seen.iter().copied().filter(running).collect();
        self.stop(grace);
        for p in left.iter().filter(|p| running(p)) {
            if let Some(pid) = rustix::process::Pid::from_raw(p.0 as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
        left.into_iter().map(|(pid, _)| pid).collect()
    }
}

/// The last lines of a server's `log`, for an error (nothing where it is
/// empty or cannot be read).
fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines = crate::textutil::last_stderr_lines(&text);
    if lines.is_empty() {
        return format!(" ({} is empty)", log.display());
    }
    let shown: Vec<String> = lines.iter().map(|l| format!("  {l}")).collect();
    format!(
        "; the last lines of {}:\n{}",
        log.display(),
        shown.join("\n")
    )
}

/// Field `i` of /proc/PID/stat after the command (0: the state letter).
fn stat_field(pid: u32, i: usize) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .nth(i)
        .map(str::to_string)
}

/// When `pid` started (clock ticks since boot, /proc/PID/stat): a pid
/// with another start time is another process.
pub fn start_ticks(pid: u32) -> Option<u64> {
    stat_field(pid, 19)?.parse().ok()
}

/// Whether a process of group `group` still runs (a zombie does not).
fn group_alive(group: u32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    let group = group.to_string();
    entries.flatten().any(|e| {
        e.file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
            .is_some_and(|pid| {
                stat_field(pid, 2).as_deref() == Some(group.as_str())
                    && stat_field(pid, 0).as_deref() != Some("Z")
            })
    })
}

impl Drop for Started {
    /// Never leaves a server behind (an early error, a signal).
    fn drop(&mut self) {
        if !self.exited() || group_alive(self.pid()) {
            self.stop(Duration::from_secs(2));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_give_their_port_and_bad_ones_are_named() {
        assert_eq!(
            host_port("http://127.0.0.1:8000/v1").expect("valid"),
            ("127.0.0.1".to_string(), 8000)
        );
        assert_eq!(host_port("http://localhost").expect("valid").1, 80);
        assert!(host_port("https://x:1")
            .unwrap_err()
            .to_string()
            .contains("http://"));
        assert!(host_port("http://x:port")
            .unwrap_err()
            .to_string()
            .contains("not a port"));
    }

    #[test]
    fn the_process_listening_on_a_port_is_found() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        assert_eq!(listener_pid(port).expect("found"), std::process::id());
        drop(listener);
        let e = listener_pid(port).unwrap_err().to_string();
        assert!(
            e.contains(&format!("no process listens on port {port}")),
            "{e}"
        );
    }
}
