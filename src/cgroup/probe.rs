//! The sampler's reader of a cgroup: its usage file and memory.stat opened
//! once and re-read with `pread` (no path lookup, no allocation). Usage is
//! read at most every [`USAGE_EVERY`] (at the sampler's interval when that
//! is longer; samples in between leave the container columns empty), and
//! memory.stat (longer, and costlier for the kernel to write) at most every
//! [`STAT_EVERY`]; a phase edge reads both at once. A sample's working set
//! is its usage less the latest inactive_file read.
//!
//! Why the rates: on the 2-core VM one `pread` of memory.usage_in_bytes took
//! 2.0 µs and one of memory.stat with its scan 17–20 µs (20 000 reads each,
//! v1, Linux 6.1, a throwaway program; docs/validation.md). Read at every
//! sample at 1 kHz that would add ~0.2 % of a core to a sampler whose whole
//! budget is 0.5 %; at 100 Hz it adds ~0.02 %, and the metrics, which read
//! the phase edges, lose nothing.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use super::view::ContainerSample;
use super::{stat_value, v1, v2, working_set, Located, Version};

/// How old the memory.stat values of a sample may be.
pub const STAT_EVERY: Duration = Duration::from_millis(100);

/// The shortest time between two readings of the usage for samples.
pub const USAGE_EVERY: Duration = Duration::from_millis(10);

/// memory.stat of either version fits (v2 writes ~50 lines of ≤ 40 bytes).
const BUF_BYTES: usize = 16 * 1024;

/// An open cgroup, read for the sampler.
pub struct CgroupProbe {
    version: Version,
    usage: File,
    stat: Option<File>,
    usage_read_at: Option<Instant>,
    stat_read_at: Option<Instant>,
    anon_bytes: Option<u64>,
    file_bytes: Option<u64>,
    inactive_file_bytes: Option<u64>,
    buf: Box<[u8; BUF_BYTES]>,
}

impl CgroupProbe {
    /// Opens the usage file (required) and memory.stat (optional) of `at`.
    pub fn open(at: &Located) -> Result<CgroupProbe, String> {
        let (usage, stat) = match at.version {
            Version::V1 => (v1::USAGE, v1::STAT),
            Version::V2 => (v2::CURRENT, v2::STAT),
        };
        let usage_path = at.dir.join(usage);
        let usage = File::open(&usage_path)
            .map_err(|e| format!("cannot read {}: {e}", usage_path.display()))?;
        Ok(CgroupProbe {
            version: at.version,
            usage,
            stat: File::open(at.dir.join(stat)).ok(),
            usage_read_at: None,
            stat_read_at: None,
            anon_bytes: None,
            file_bytes: None,
            inactive_file_bytes: None,
            buf: Box::new([0; BUF_BYTES]),
        })
    }

    /// One sample: usage now, memory.stat's parts as of at most
    /// [`STAT_EVERY`] ago; `fresh` (a phase edge): both read now. `None`:
    /// not due yet (less than [`USAGE_EVERY`] since the last), or usage
    /// unreadable.
    pub fn read(&mut self, fresh: bool) -> Option<ContainerSample> {
        self.read_at(Instant::now(), fresh)
    }

    fn read_at(&mut self, now: Instant, fresh: bool) -> Option<ContainerSample> {
        let due = |last: Option<Instant>, every: Duration| {
            last.is_none_or(|at| now.saturating_duration_since(at) >= every)
        };
        if !fresh && !due(self.usage_read_at, USAGE_EVERY) {
            return None;
        }
        let usage_bytes = self.read_usage()?;
        self.usage_read_at = Some(now);
        if fresh || due(self.stat_read_at, STAT_EVERY) {
            self.read_stat();
            self.stat_read_at = Some(now);
        }
        Some(ContainerSample {
            working_set_bytes: working_set(usage_bytes, self.inactive_file_bytes),
            usage_bytes,
            anon_bytes: self.anon_bytes,
            file_bytes: self.file_bytes,
        })
    }

    fn read_usage(&mut self) -> Option<u64> {
        let n = self.usage.read_at(&mut self.buf[..], 0).ok()?;
        let text = std::str::from_utf8(&self.buf[..n]).ok()?;
        super::parse_number(text).ok().map(|n| n.unwrap_or(0))
    }

    fn read_stat(&mut self) {
        let Some(file) = &self.stat else { return };
        let Ok(n) = file.read_at(&mut self.buf[..], 0) else {
            return;
        };
        let Ok(stat) = std::str::from_utf8(&self.buf[..n]) else {
            return;
        };
        let first = |keys: &[&str]| keys.iter().find_map(|k| stat_value(stat, k));
        (self.anon_bytes, self.file_bytes, self.inactive_file_bytes) = match self.version {
            Version::V1 => (
                first(&v1::ANON_KEYS),
                first(&v1::FILE_KEYS),
                first(&v1::INACTIVE_FILE_KEYS),
            ),
            Version::V2 => (
                stat_value(stat, v2::StatKeys::ANON),
                stat_value(stat, v2::StatKeys::FILE),
                stat_value(stat, v2::StatKeys::INACTIVE_FILE),
            ),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn fixture(version: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/cgroup")
            .join(version)
    }

    #[test]
    fn the_probe_agrees_with_a_full_reading_in_both_versions() {
        for (version, dir) in [(Version::V1, fixture("v1")), (Version::V2, fixture("v2"))] {
            let at = Located { version, dir };
            let full = crate::cgroup::read(&at).unwrap();
            let s = CgroupProbe::open(&at).unwrap().read(false).unwrap();
            assert_eq!(s.usage_bytes, full.usage_bytes, "{version:?}");
            assert_eq!(s.working_set_bytes, full.working_set_bytes(), "{version:?}");
            assert_eq!(s.anon_bytes, full.anon_bytes, "{version:?}");
            assert_eq!(s.file_bytes, full.file_bytes, "{version:?}");
        }
    }

    #[test]
    fn memory_stat_is_reread_only_when_due_or_asked() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::write(dir.join(v2::CURRENT), "1000\n").unwrap();
        std::fs::write(
            dir.join(v2::STAT),
            "anon 600\nfile 400\ninactive_file 300\n",
        )
        .unwrap();
        let at = Located {
            version: Version::V2,
            dir: dir.to_path_buf(),
        };
        let mut probe = CgroupProbe::open(&at).unwrap();
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let ws = |s: Option<ContainerSample>| s.map(|s| s.working_set_bytes);
        assert_eq!(ws(probe.read_at(t0, false)), Some(700));
        assert_eq!(probe.read_at(ms(1), false), None, "usage not due yet");
        // The same length, so the open file reads the new text.
        let stat = |inactive: u32| format!("anon 600\nfile 400\ninactive_file {inactive}\n");
        std::fs::write(dir.join(v2::STAT), stat(100)).unwrap();
        std::fs::write(dir.join(v2::CURRENT), "1200\n").unwrap();
        let s = probe.read_at(ms(10), false).unwrap();
        assert_eq!(
            (s.usage_bytes, s.working_set_bytes),
            (1200, 900),
            "stat not due yet"
        );
        assert_eq!(
            ws(probe.read_at(ms(11), true)),
            Some(1100),
            "an edge reads both now"
        );
        std::fs::write(dir.join(v2::STAT), stat(200)).unwrap();
        assert_eq!(ws(probe.read_at(ms(30), false)), Some(1100));
        assert_eq!(ws(probe.read_at(ms(111), false)), Some(1000), "stat due");
    }

    #[test]
    fn no_usage_file_no_probe() {
        let tmp = tempfile::tempdir().unwrap();
        let at = Located {
            version: Version::V1,
            dir: tmp.path().to_path_buf(),
        };
        let e = CgroupProbe::open(&at).err().unwrap();
        assert!(e.contains("memory.usage_in_bytes"), "{e}");
    }

    #[test]
    fn the_cgroup_these_tests_run_in_reads_plausibly() {
        let at = crate::cgroup::locate(std::process::id())
            .expect("this machine's memory cgroup can be found and read");
        let s = CgroupProbe::open(&at).unwrap().read(true).unwrap();
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let anon_kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("RssAnon:"))
            .unwrap()
            .trim()
            .trim_end_matches(" kB")
            .parse()
            .unwrap();
        // This process's anonymous pages are charged to its cgroup.
        assert!(
            s.usage_bytes >= anon_kib * 1024,
            "usage {} < this process's RssAnon {} KiB ({})",
            s.usage_bytes,
            anon_kib,
            at.dir.display()
        );
        assert!(s.working_set_bytes <= s.usage_bytes);
        assert!(s.anon_bytes.is_some() && s.file_bytes.is_some(), "{s:?}");
    }
}
