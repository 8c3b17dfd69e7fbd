//! Who else is in the cgroup: the processes in it that are neither memrel
//! nor the process tree it measures. On a shared machine a container's (or
//! a session's) cgroup holds everything else running there, so its working
//! set rises and falls with other work: a run's container lane is then
//! context, not evidence about the strategy (`metrics`: "shared cgroup: N
//! other processes"). Reads `cgroup.procs` and each process's parent from
//! /proc; writes nothing.

use std::path::Path;

/// How many processes listed in `<dir>/cgroup.procs` descend from none of
/// `roots` (memrel, and for attach the attached process); `None` where the
/// list cannot be read.
pub fn count(dir: &Path, roots: &[u32]) -> Option<u32> {
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).ok()?;
    let others = procs
        .lines()
        .filter_map(|l| l.trim().parse::<u32>().ok())
        .filter(|&pid| !descends_from(pid, roots, parent_of))
        .count();
    Some(others as u32)
}

/// Whether `pid` is one of `roots` or below one, following `parent` up (a
/// process whose parent is gone or init belongs to none).
fn descends_from(pid: u32, roots: &[u32], parent: impl Fn(u32) -> Option<u32>) -> bool {
    let mut p = pid;
    for _ in 0..64 {
        if roots.contains(&p) {
            return true;
        }
        match parent(p) {
            Some(q) if q > 1 && q != p => p = q,
            _ => return false,
        }
    }
    false
}

/// A process's parent, from /proc/PID/stat (the field after the name).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cgroup_of_memrel_and_its_children_has_no_others() {
        let dir = tempfile::tempdir().expect("tempdir");
        let me = std::process::id();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep starts");
        let list = format!("{me}\n{}\n", child.id());
        std::fs::write(dir.path().join("cgroup.procs"), &list).expect("fixture");
        assert_eq!(count(dir.path(), &[me]), Some(0));
        // Another process (init, and one that is no child of memrel's).
        std::fs::write(dir.path().join("cgroup.procs"), format!("{list}1\n")).expect("fixture");
        assert_eq!(count(dir.path(), &[me]), Some(1));
        child.kill().expect("kill");
        child.wait().expect("reaped");
        assert_eq!(count(&dir.path().join("missing"), &[me]), None);
    }

    #[test]
    fn a_grandchild_belongs_to_its_root_and_an_orphan_to_none() {
        let parents = |pid: u32| match pid {
            30 => Some(20),
            20 => Some(10),
            40 => Some(1),
            _ => None,
        };
        assert!(descends_from(30, &[10], parents));
        assert!(!descends_from(40, &[10], parents));
        assert!(!descends_from(50, &[10], parents));
    }
}
