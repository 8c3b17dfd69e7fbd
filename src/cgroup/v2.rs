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
