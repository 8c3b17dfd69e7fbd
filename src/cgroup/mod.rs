//! The container's view: the memory counters of the cgroup a worker runs in,
//! read-only, for cgroup v1 (`memory` controller) and v2 (unified).
//!
//! What a container's limit, its OOM killer and Kubernetes' eviction act on is
//! the cgroup's charge, not the process's RSS: it counts the page cache of the
//! files the process read (mapped weights), and every process of the cgroup —
//! memrel itself included, unless memrel was given a delegated cgroup
//! (`delegate`) and each worker has its own child.
//!
//! Parts: `v1` and `v2` (file names and parsers of each version), `probe` (the
//! sampler's cheap reader), `delegate` (`--cgroup-parent`: the only code that
//! writes a cgroup, and only under a directory the user named), `limit`
//! (`--memory-limit` and its RLIMIT_AS fallback), `oom` (telling an OOM kill
//! from another SIGKILL). Nothing here creates, moves or writes a cgroup
//! except `delegate`.

pub mod delegate;
pub mod limit;
pub mod oom;
pub mod others;
pub mod probe;
pub mod setup;
pub mod v1;
pub mod v2;
pub mod view;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Which cgroup hierarchy holds the memory counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Version {
    V1,
    V2,
}

impl Version {
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V1 => "v1",
            Version::V2 => "v2",
        }
    }
}

/// A cgroup's directory and its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub version: Version,
    pub dir: PathBuf,
}

/// One full reading of a cgroup's memory counters, in bytes (events as
/// counts). `None`: the file or the key is absent in this kernel or version.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    /// v2 `memory.current`; v1 `memory.usage_in_bytes`.
    pub usage_bytes: u64,
    /// v2 `memory.peak` (Linux 5.19+); v1 `memory.max_usage_in_bytes`.
    #[serde(default)]
    pub peak_bytes: Option<u64>,
    /// v2 `memory.max`; v1 `memory.limit_in_bytes` (`None`: no limit).
    #[serde(default)]
    pub limit_bytes: Option<u64>,
    /// `memory.stat` anon (v1: total_rss).
    #[serde(default)]
    pub anon_bytes: Option<u64>,
    /// `memory.stat` file (v1: total_cache): the page cache charged here.
    #[serde(default)]
    pub file_bytes: Option<u64>,
    /// `memory.stat` file_mapped (v1: total_mapped_file).
    #[serde(default)]
    pub file_mapped_bytes: Option<u64>,
    /// `memory.stat` shmem (v1: total_shmem).
    #[serde(default)]
    pub shmem_bytes: Option<u64>,
    /// `memory.stat` active_file (v1: total_active_file).
    #[serde(default)]
    pub active_file_bytes: Option<u64>,
    /// `memory.stat` inactive_file (v1: total_inactive_file).
    #[serde(default)]
    pub inactive_file_bytes: Option<u64>,
    /// v2 `memory.events` oom_kill; v1 `memory.oom_control` oom_kill (4.13+).
    #[serde(default)]
    pub oom_kill: Option<u64>,
    /// v2 `memory.events` high: times memory.high throttled the cgroup.
    #[serde(default)]
    pub high_events: Option<u64>,
    /// v2 `memory.events` max: times usage hit memory.max.
    #[serde(default)]
    pub max_events: Option<u64>,
}

impl Counters {
    /// The working set as Kubernetes (cAdvisor) computes it: usage less the
    /// inactive page cache, floored at 0; usage itself when memory.stat had
    /// no inactive_file.
    pub fn working_set_bytes(&self) -> u64 {
        working_set(self.usage_bytes, self.inactive_file_bytes)
    }
}

/// usage − inactive_file, floored at 0 (Kubernetes' working set).
pub fn working_set(usage_bytes: u64, inactive_file_bytes: Option<u64>) -> u64 {
    usage_bytes.saturating_sub(inactive_file_bytes.unwrap_or(0))
}

/// The memory cgroup of process `pid`, from /proc/PID/cgroup and
/// /proc/PID/mountinfo; `Err` says why there is none to read.
pub fn locate(pid: u32) -> Result<Located, String> {
    if let Some(dir) = std::env::var_os(CGROUP_DIR_ENV) {
        return located_at(PathBuf::from(dir));
    }
    let cgroup_file = format!("/proc/{pid}/cgroup");
    let cgroup = std::fs::read_to_string(&cgroup_file)
        .map_err(|e| format!("cannot read {cgroup_file}: {e}"))?;
    let mountinfo_file = format!("/proc/{pid}/mountinfo");
    let mountinfo = std::fs::read_to_string(&mountinfo_file)
        .map_err(|e| format!("cannot read {mountinfo_file}: {e}"))?;
    let located = locate_in(&cgroup, &mountinfo)?;
    let probe_file = match located.version {
        Version::V1 => v1::USAGE,
        Version::V2 => v2::CURRENT,
    };
    let path = located.dir.join(probe_file);
    std::fs::metadata(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(located)
}

/// The variable that names the cgroup directory to read instead of the
/// process's own: a cgroupfs mounted elsewhere, or a test's fixture
/// directory (memrel only reads it).
pub const CGROUP_DIR_ENV: &str = "MEMREL_CGROUP_DIR";

/// The cgroup directory `dir` as [`CGROUP_DIR_ENV`] names it: v2 where it
/// has memory.current, v1 where it has memory.usage_in_bytes.
fn located_at(dir: PathBuf) -> Result<Located, String> {
    let version = if dir.join(v2::CURRENT).is_file() {
        Version::V2
    } else if dir.join(v1::USAGE).is_file() {
        Version::V1
    } else {
        return Err(format!(
            "{CGROUP_DIR_ENV}={} has neither {} (cgroup v2) nor {} (v1): name a memory cgroup's directory",
            dir.display(),
            v2::CURRENT,
            v1::USAGE
        ));
    };
    Ok(Located { version, dir })
}

/// The memory cgroup named by a /proc/PID/cgroup text, found in the mounts
/// of a mountinfo text. A v1 `memory` hierarchy wins (on a hybrid system the
/// memory controller is there, not in the unified tree).
pub fn locate_in(proc_cgroup: &str, mountinfo: &str) -> Result<Located, String> {
    let mut v2_path = None;
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            v2_path = Some(path.to_string());
        } else if controllers.split(',').any(|c| c == "memory") {
            let mount = find_mount(mountinfo, |fstype, options| {
                fstype == "cgroup" && options.split(',').any(|o| o == "memory")
            })
            .ok_or("the v1 memory controller is not mounted here (no cgroup mount with `memory` in /proc/self/mountinfo)")?;
            return Ok(Located {
                version: Version::V1,
                dir: mount.join_cgroup(path),
            });
        }
    }
    let path = v2_path.ok_or(
        "no memory cgroup in /proc/PID/cgroup (neither a v1 `memory` line nor a v2 `0::` line)",
    )?;
    let mount = find_mount(mountinfo, |fstype, _| fstype == "cgroup2")
        .ok_or("cgroup v2 is not mounted here (no cgroup2 mount in /proc/self/mountinfo)")?;
    Ok(Located {
        version: Version::V2,
        dir: mount.join_cgroup(&path),
    })
}

/// A cgroup mount: where it is and which cgroup its root is.
struct Mount {
    root: String,
    point: PathBuf,
}

impl Mount {
    /// The directory of cgroup `path` (as /proc/PID/cgroup names it) under this mount.
    fn join_cgroup(&self, path: &str) -> PathBuf {
        let relative = path
            .strip_prefix(self.root.as_str())
            .unwrap_or(path)
            .trim_start_matches('/');
        if relative.is_empty() {
            self.point.clone()
        } else {
            self.point.join(relative)
        }
    }
}

/// The first mount whose filesystem type and super options match.
fn find_mount(mountinfo: &str, matches: impl Fn(&str, &str) -> bool) -> Option<Mount> {
    mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let fields: Vec<&str> = left.split(' ').collect();
        let mut after = right.split(' ');
        let fstype = after.next()?;
        let _source = after.next()?;
        let options = after.next().unwrap_or("");
        (fields.len() >= 5 && matches(fstype, options)).then(|| Mount {
            root: unescape(fields[3]),
            point: PathBuf::from(unescape(fields[4])),
        })
    })
}

/// mountinfo writes a space, tab, newline and backslash as octal escapes.
fn unescape(field: &str) -> String {
    field
        .replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// Reads every counter of the cgroup at `located`; `Err` names the file
/// that could not be read (the usage file: without it nothing is known).
pub fn read(located: &Located) -> Result<Counters, String> {
    match located.version {
        Version::V1 => v1::read(&located.dir),
        Version::V2 => v2::read(&located.dir),
    }
}

/// `key value` lines (memory.stat, memory.events, memory.oom_control): the value of `key`.
pub fn stat_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// A file of one number (`max` and v1's "no limit" read as `None`).
pub fn read_number(path: &Path) -> Result<Option<u64>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse_number(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// One number, or `max` (no limit); v1 writes "no limit" as a number near 2^63.
pub fn parse_number(text: &str) -> Result<Option<u64>, String> {
    let text = text.trim();
    if text == "max" {
        return Ok(None);
    }
    let n: u64 = text
        .parse()
        .map_err(|_| format!("expected a number or `max`, found {text:?}"))?;
    Ok((n < 1 << 62).then_some(n))
}

/// The text of an optional file: `None` when it cannot be read.
pub(crate) fn read_optional(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID_CGROUP: &str = "9:name=systemd:/\n4:memory:/process_api/1ff0\n1:cpu:/\n0::/\n";
    const HYBRID_MOUNTS: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn a_hybrid_system_reads_the_v1_memory_controller() {
        let got = locate_in(HYBRID_CGROUP, HYBRID_MOUNTS).unwrap();
        assert_eq!(got.version, Version::V1);
        assert_eq!(
            got.dir,
            PathBuf::from("/sys/fs/cgroup/memory/process_api/1ff0")
        );
    }

    #[test]
    fn a_pure_v2_system_reads_the_unified_tree() {
        let mounts = "30 24 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
        let got = locate_in("0::/user.slice/user-1000.slice/session-3.scope\n", mounts).unwrap();
        assert_eq!(got.version, Version::V2);
        assert_eq!(
            got.dir,
            PathBuf::from("/sys/fs/cgroup/user.slice/user-1000.slice/session-3.scope")
        );
        // In a container with its own cgroup namespace: `0::/` is the mount's root.
        let got = locate_in("0::/\n", mounts).unwrap();
        assert_eq!(got.dir, PathBuf::from("/sys/fs/cgroup"));
    }

    #[test]
    fn a_mount_of_a_subtree_strips_its_root() {
        let mounts = "30 24 0:26 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let got = locate_in("0::/kubepods/pod1/c1\n", mounts).unwrap();
        assert_eq!(got.dir, PathBuf::from("/sys/fs/cgroup/c1"));
    }

    #[test]
    fn no_memory_cgroup_says_why() {
        let e = locate_in("1:cpu:/\n", HYBRID_MOUNTS).unwrap_err();
        assert!(e.contains("no memory cgroup"), "{e}");
        let e = locate_in("0::/\n", "35 31 0:32 / /x rw - cgroup cgroup rw,cpu\n").unwrap_err();
        assert!(e.contains("cgroup v2 is not mounted"), "{e}");
    }

    #[test]
    fn the_working_set_is_usage_less_inactive_file_floored_at_zero() {
        assert_eq!(working_set(100, Some(30)), 70);
        assert_eq!(working_set(100, Some(130)), 0);
        assert_eq!(working_set(100, None), 100);
    }

    #[test]
    fn numbers_and_no_limit() {
        assert_eq!(parse_number("123\n"), Ok(Some(123)));
        assert_eq!(parse_number("max\n"), Ok(None));
        assert_eq!(parse_number("9223372036854771712\n"), Ok(None));
        assert!(parse_number("lots").is_err());
    }
}
