//! cgroup v2 (the unified hierarchy): memory.current, memory.peak,
//! memory.max, memory.stat and memory.events.

use std::path::Path;

use super::{read_number, read_optional, stat_value, Counters};

pub const CURRENT: &str = "memory.current";
pub const PEAK: &str = "memory.peak";
pub const MAX: &str = "memory.max";
pub const STAT: &str = "memory.stat";
pub const EVENTS: &str = "memory.events";

/// The memory.stat keys the record keeps, by their v2 names.
pub struct StatKeys;

impl StatKeys {
    pub const ANON: &'static str = "anon";
    pub const FILE: &'static str = "file";
    pub const FILE_MAPPED: &'static str = "file_mapped";
    pub const SHMEM: &'static str = "shmem";
    pub const ACTIVE_FILE: &'static str = "active_file";
    pub const INACTIVE_FILE: &'static str = "inactive_file";
}

/// Every counter of the v2 cgroup `dir`; `Err` when memory.current cannot be read.
pub fn read(dir: &Path) -> Result<Counters, String> {
    let usage_bytes = read_number(&dir.join(CURRENT))?.unwrap_or(0);
    let mut c = Counters {
        usage_bytes,
        peak_bytes: read_number(&dir.join(PEAK)).ok().flatten(),
        limit_bytes: read_number(&dir.join(MAX)).ok().flatten(),
        ..Counters::default()
    };
    if let Some(stat) = read_optional(&dir.join(STAT)) {
        apply_stat(&mut c, &stat);
    }
    if let Some(events) = read_optional(&dir.join(EVENTS)) {
        apply_events(&mut c, &events);
    }
    Ok(c)
}

/// The memory.stat values the record keeps.
pub fn apply_stat(c: &mut Counters, stat: &str) {
    c.anon_bytes = stat_value(stat, StatKeys::ANON);
    c.file_bytes = stat_value(stat, StatKeys::FILE);
    c.file_mapped_bytes = stat_value(stat, StatKeys::FILE_MAPPED);
    c.shmem_bytes = stat_value(stat, StatKeys::SHMEM);
    c.active_file_bytes = stat_value(stat, StatKeys::ACTIVE_FILE);
    c.inactive_file_bytes = stat_value(stat, StatKeys::INACTIVE_FILE);
}

/// memory.events: oom_kill, high, max.
pub fn apply_events(c: &mut Counters, events: &str) {
    c.oom_kill = stat_value(events, "oom_kill");
    c.high_events = stat_value(events, "high");
    c.max_events = stat_value(events, "max");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::{read, Located, Version};

    fn fixture() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cgroup/v2")
    }

    #[test]
    fn every_counter_of_a_v2_directory() {
        let c = read(&Located {
            version: Version::V2,
            dir: fixture(),
        })
        .unwrap();
        assert_eq!(c.usage_bytes, 5_958_008_832);
        assert_eq!(c.peak_bytes, Some(6_442_450_944));
        assert_eq!(c.limit_bytes, Some(8 << 30));
        assert_eq!(c.anon_bytes, Some(1_610_612_736));
        assert_eq!(c.file_bytes, Some(4 << 30));
        assert_eq!(c.file_mapped_bytes, Some(3 << 30));
        assert_eq!(c.shmem_bytes, Some(8 << 20));
        assert_eq!(c.active_file_bytes, Some(1 << 30));
        assert_eq!(c.inactive_file_bytes, Some(3 << 30));
        assert_eq!(
            (c.oom_kill, c.high_events, c.max_events),
            (Some(1), Some(0), Some(4))
        );
        assert_eq!(c.working_set_bytes(), 5_958_008_832 - (3 << 30));
    }

    #[test]
    fn a_directory_without_memory_current_says_which_file() {
        let tmp = tempfile::tempdir().unwrap();
        let e = read(&Located {
            version: Version::V2,
            dir: tmp.path().to_path_buf(),
        })
        .unwrap_err();
        assert!(e.contains("memory.current"), "{e}");
    }

    #[test]
    fn missing_optional_files_leave_their_counters_unknown() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join(CURRENT), "4096\n").unwrap();
        std::fs::write(tmp.path().join(MAX), "max\n").unwrap();
        let c = read(&Located {
            version: Version::V2,
            dir: tmp.path().to_path_buf(),
        })
        .unwrap();
        assert_eq!(c.usage_bytes, 4096);
        assert_eq!(
            (c.peak_bytes, c.limit_bytes, c.inactive_file_bytes),
            (None, None, None)
        );
        assert_eq!(c.working_set_bytes(), 4096);
    }
}
