//! The sampler's reader of a cgroup: its usage file and memory.stat opened
//! once and re-read with `pread` (no path lookup, no allocation). Usage is
//! read at every sample; memory.stat (longer, and costlier for the kernel to
//! write) at most every [`STAT_EVERY`], or at once when asked (a phase
//! edge), so at 1 kHz the sampler reads it one sample in a hundred. A
//! sample's working set is its usage less the latest inactive_file read.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use super::{stat_value, v1, v2, working_set, Located, Version};
use crate::record::ContainerSample;

/// How old the memory.stat values of a sample may be.
pub const STAT_EVERY: Duration = Duration::from_millis(100);

/// memory.stat of either version fits (v2 writes ~50 lines of ≤ 40 bytes).
const BUF_BYTES: usize = 16 * 1024;

/// An open cgroup, read for the sampler.
pub struct CgroupProbe {
    version: Version,
    usage: File,
    stat: Option<File>,
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
            stat_read_at: None,
            anon_bytes: None,
            file_bytes: None,
            inactive_file_bytes: None,
            buf: Box::new([0; BUF_BYTES]),
        })
    }

    /// One sample: usage now, memory.stat's parts as of at most
    /// [`STAT_EVERY`] ago (`fresh`: read now). `None`: usage unreadable.
    pub fn read(&mut self, fresh: bool) -> Option<ContainerSample> {
        let usage_bytes = self.read_usage()?;
        let now = Instant::now();
        let due = self
            .stat_read_at
            .is_none_or(|at| now.duration_since(at) >= STAT_EVERY);
        if fresh || due {
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
