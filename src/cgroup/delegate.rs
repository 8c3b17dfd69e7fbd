//! `--cgroup-parent DIR`: a cgroup v2 directory delegated to the user, under
//! which each worker process gets a child cgroup of its own, so its numbers
//! (memory.current, memory.peak, memory.events) are the worker's alone and
//! `--memory-limit` becomes the child's memory.max.
//!
//! The only code in memrel that writes a cgroup, and only under the directory
//! the user named: it makes the child, writes its memory.max (and
//! memory.swap.max where the kernel has it), and the worker joins it between
//! fork and exec by writing `0` ("the writing process") to the child's
//! cgroup.procs, so every page the worker touches is charged there. The
//! child is removed after the worker ended and its numbers were read.
//!
//! What makes a directory usable is checked before any run, each failure
//! naming the flag: cgroup v2 (it has cgroup.controllers), the memory
//! controller enabled for children (cgroup.subtree_control lists `memory`),
//! and writable by this user.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{Located, Version};

/// A checked `--cgroup-parent` directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delegation {
    pub parent: PathBuf,
}

impl Delegation {
    /// Checks that `dir` can hold the workers' cgroups; the error names the flag.
    pub fn open(dir: &Path) -> Result<Delegation, String> {
        let flag = format!("--cgroup-parent {}", dir.display());
        if !dir.is_dir() {
            return Err(format!("{flag}: not a directory: give a cgroup v2 directory delegated to you (e.g. one systemd-run --user -p Delegate=yes made)"));
        }
        let controllers = std::fs::read_to_string(dir.join("cgroup.controllers")).map_err(|e| {
            format!(
                "{flag}: not a cgroup v2 directory (cannot read its cgroup.controllers: {e}): \
                 give a directory of the unified hierarchy (usually under /sys/fs/cgroup)"
            )
        })?;
        if !lists_memory(&controllers) {
            return Err(format!(
                "{flag}: the memory controller is not available there (cgroup.controllers: {:?}): \
                 enable it in the parent's cgroup.subtree_control",
                controllers.trim()
            ));
        }
        let subtree = std::fs::read_to_string(dir.join("cgroup.subtree_control"))
            .map_err(|e| format!("{flag}: cannot read its cgroup.subtree_control: {e}"))?;
        if !lists_memory(&subtree) {
            return Err(format!(
                "{flag}: its children would have no memory controller (cgroup.subtree_control: {:?}): \
                 run `echo +memory > {}/cgroup.subtree_control` first",
                subtree.trim(),
                dir.display()
            ));
        }
        if !writable(dir) {
            return Err(format!(
                "{flag}: not writable by this user: give a directory delegated to you \
                 (chown it, or systemd-run --user -p Delegate=yes)"
            ));
        }
        Ok(Delegation {
            parent: dir.to_path_buf(),
        })
    }

    /// Makes the child cgroup `name` with `limit_bytes` as its memory.max
    /// (and no swap), ready for a worker to join.
    pub fn child(&self, name: &str, limit_bytes: Option<u64>) -> Result<WorkerCgroup, String> {
        let dir = self.parent.join(name);
        std::fs::create_dir(&dir).map_err(|e| {
            format!(
                "--cgroup-parent: cannot make the worker's cgroup {}: {e}",
                dir.display()
            )
        })?;
        let made = WorkerCgroup {
            procs: None,
            dir: dir.clone(),
        };
        match ready(&dir, limit_bytes) {
            Ok(procs) => Ok(WorkerCgroup {
                procs: Some(procs),
                ..made
            }),
            Err(e) => {
                // Not left half made (a real cgroup's files go with it).
                let _ = made.remove();
                Err(e)
            }
        }
    }
}

/// A worker's own cgroup under the delegated directory.
#[derive(Debug)]
pub struct WorkerCgroup {
    pub dir: PathBuf,
    /// cgroup.procs, open for the worker to write itself into.
    procs: Option<File>,
}

impl WorkerCgroup {
    pub fn located(&self) -> Located {
        Located {
            version: Version::V2,
            dir: self.dir.clone(),
        }
    }

    /// Makes the process `command` starts join this cgroup before it runs
    /// anything: between fork and exec it writes `0` to cgroup.procs (one
    /// raw write, nothing allocated). A refused write fails the spawn.
    pub fn join_at_exec(&self, command: &mut Command) {
        let Some(fd) = self.procs.as_ref().map(AsRawFd::as_raw_fd) else {
            return;
        };
        // SAFETY: the closure runs between fork and exec and makes one raw
        // write(2) to a descriptor the parent keeps open until the spawn returned.
        unsafe {
            command.pre_exec(move || join(fd));
        }
    }

    /// Removes the cgroup (after its worker ended and its numbers were
    /// read); a cgroup that still has processes stays.
    pub fn remove(mut self) -> Result<(), String> {
        self.procs.take();
        std::fs::remove_dir(&self.dir).map_err(|e| {
            format!(
                "cannot remove the worker's cgroup {}: {e}",
                self.dir.display()
            )
        })
    }
}

/// Writes a new child's limits and opens its cgroup.procs.
fn ready(dir: &Path, limit_bytes: Option<u64>) -> Result<File, String> {
    if let Some(limit) = limit_bytes {
        write_control(&dir.join("memory.max"), &limit.to_string())
            .map_err(|e| format!("--memory-limit: {e}"))?;
        let swap = dir.join("memory.swap.max");
        if swap.exists() {
            write_control(&swap, "0").map_err(|e| format!("--memory-limit: {e}"))?;
        }
    }
    let procs_path = dir.join("cgroup.procs");
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&procs_path)
        .map_err(|e| format!("--cgroup-parent: cannot open {}: {e}", procs_path.display()))
}

/// Writes `0` (this process) to cgroup.procs.
fn join(fd: RawFd) -> std::io::Result<()> {
    // SAFETY: a one-byte buffer that lives through the call.
    let n = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
    if n == 1 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Writes a control file the way the shell's `echo value > file` does.
fn write_control(path: &Path, value: &str) -> Result<(), String> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .and_then(|mut f| f.write_all(value.as_bytes()))
        .map_err(|e| format!("cannot write {value} to {}: {e}", path.display()))
}

fn lists_memory(controllers: &str) -> bool {
    controllers.split_whitespace().any(|c| c == "memory")
}

/// access(2) W_OK|X_OK: this user may make entries in `dir`.
fn writable(dir: &Path) -> bool {
    let Ok(path) = CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a NUL-terminated path that lives through the call.
    unsafe { libc::access(path.as_ptr(), libc::W_OK | libc::X_OK) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain directory that looks like a delegated cgroup v2 directory.
    fn imitation(root: &Path, subtree: &str) -> PathBuf {
        let dir = root.join("parent");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("cgroup.controllers"), "cpu memory pids\n").unwrap();
        std::fs::write(dir.join("cgroup.subtree_control"), subtree).unwrap();
        dir
    }

    #[test]
    fn a_child_gets_its_limit_and_its_worker() {
        let tmp = tempfile::tempdir().unwrap();
        let d = Delegation::open(&imitation(tmp.path(), "memory pids\n")).unwrap();
        let child = d.child("w1", Some(256 << 20)).unwrap();
        assert_eq!(
            std::fs::read_to_string(child.dir.join("memory.max")).unwrap(),
            (256u64 << 20).to_string()
        );
        let mut command = Command::new("true");
        child.join_at_exec(&mut command);
        assert!(command.status().unwrap().success());
        assert_eq!(
            std::fs::read_to_string(child.dir.join("cgroup.procs")).unwrap(),
            "0"
        );
        assert_eq!(child.located().version, Version::V2);
        // The imitation keeps its files: a real cgroup is removed empty.
        let dir = child.dir.clone();
        assert!(child.remove().is_err());
        assert!(dir.is_dir());
        assert!(
            d.child("w1", None).unwrap_err().contains("w1"),
            "exists already"
        );
    }

    #[test]
    fn what_cannot_hold_workers_is_refused_naming_the_flag() {
        let tmp = tempfile::tempdir().unwrap();
        let e = Delegation::open(tmp.path()).unwrap_err();
        assert!(
            e.starts_with("--cgroup-parent") && e.contains("not a cgroup v2"),
            "{e}"
        );
        let e = Delegation::open(&imitation(tmp.path(), "cpu\n")).unwrap_err();
        assert!(e.contains("+memory"), "{e}");
        let e = Delegation::open(&tmp.path().join("absent")).unwrap_err();
        assert!(e.contains("not a directory"), "{e}");
        // A v1 hierarchy has no cgroup.controllers.
        let e = Delegation::open(Path::new("/sys/fs/cgroup/memory")).unwrap_err();
        assert!(e.starts_with("--cgroup-parent"), "{e}");
    }
}
