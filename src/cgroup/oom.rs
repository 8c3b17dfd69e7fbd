//! Telling the kernel's OOM killer from any other SIGKILL: the OOM kill
//! counters — the worker's cgroup's (`memory.events` oom_kill in v2,
//! `memory.oom_control` oom_kill in v1) and the machine's (/proc/vmstat
//! oom_kill) — are read before the worker starts and after it died; a
//! SIGKILL memrel did not send while one of them rose is an OOM kill.
//!
//! The machine's counter counts every OOM kill on the machine: a worker
//! killed by SIGKILL while another process was OOM-killed would be
//! attributed too, and the reason says which counter rose.

use std::path::PathBuf;

use super::{stat_value, v1, v2, Located, Version};

/// The machine's OOM kill counter.
pub const VMSTAT: &str = "/proc/vmstat";

/// The OOM kill counters as they were before a worker started.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OomWatch {
    cgroup: Option<(PathBuf, u64)>,
    vmstat: Option<u64>,
}

impl OomWatch {
    /// Reads the counters of `cgroup` (where known) and of the machine.
    pub fn start(cgroup: Option<&Located>) -> OomWatch {
        OomWatch {
            cgroup: cgroup.and_then(|at| {
                let file = counter_file(at);
                read_counter(&file).map(|n| (file, n))
            }),
            vmstat: read_counter(&PathBuf::from(VMSTAT)),
        }
    }

    /// A watch with given counters (tests).
    pub fn with(cgroup: Option<(PathBuf, u64)>, vmstat: Option<u64>) -> OomWatch {
        OomWatch { cgroup, vmstat }
    }

    /// Which counter rose since [`OomWatch::start`], as a sentence; `None`
    /// when neither did (or neither could be read).
    pub fn rose(&self) -> Option<String> {
        self.rose_to(
            self.cgroup.as_ref().and_then(|(f, _)| read_counter(f)),
            read_counter(&PathBuf::from(VMSTAT)),
        )
    }

    /// [`OomWatch::rose`] against given readings of the cgroup's and the machine's counters.
    pub fn rose_to(&self, cgroup_now: Option<u64>, vmstat_now: Option<u64>) -> Option<String> {
        if let (Some((file, before)), Some(now)) = (&self.cgroup, cgroup_now) {
            if now > *before {
                return Some(format!(
                    "oom_kill in {} rose from {before} to {now}",
                    file.display()
                ));
            }
        }
        match (self.vmstat, vmstat_now) {
            (Some(before), Some(now)) if now > before => Some(format!(
                "oom_kill in {VMSTAT} rose from {before} to {now} (the machine's count: an OOM kill happened during the run)"
            )),
            _ => None,
        }
    }
}

/// The file that holds a cgroup's oom_kill counter.
fn counter_file(at: &Located) -> PathBuf {
    at.dir.join(match at.version {
        Version::V1 => v1::OOM_CONTROL,
        Version::V2 => v2::EVENTS,
    })
}

fn read_counter(file: &PathBuf) -> Option<u64> {
    stat_value(&std::fs::read_to_string(file).ok()?, "oom_kill")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_that_rose_is_named() {
        let watch = OomWatch::with(Some((PathBuf::from("/cg/memory.events"), 2)), Some(7));
        assert_eq!(watch.rose_to(Some(2), Some(7)), None);
        let cg = watch.rose_to(Some(3), Some(8)).unwrap();
        assert!(cg.contains("/cg/memory.events rose from 2 to 3"), "{cg}");
        let machine = watch.rose_to(Some(2), Some(8)).unwrap();
        assert!(
            machine.contains("/proc/vmstat rose from 7 to 8"),
            "{machine}"
        );
        assert_eq!(OomWatch::default().rose_to(Some(9), Some(9)), None);
    }

    #[test]
    fn the_machines_counter_is_readable_here() {
        assert!(
            OomWatch::start(None).vmstat.is_some(),
            "/proc/vmstat has no oom_kill line (Linux 4.13+ writes it)"
        );
    }
}
