//! cgroup v1 (the `memory` controller's own hierarchy): memory.usage_in_bytes,
//! memory.max_usage_in_bytes, memory.limit_in_bytes, memory.stat and
//! memory.oom_control.
//!
//! memory.stat's `total_*` keys count the cgroup and its descendants, as
//! usage_in_bytes does: they are preferred, the plain keys (this cgroup
//! alone) taken where a kernel has no `total_*`. Kubernetes' working set on
//! v1 is usage_in_bytes − total_inactive_file.

use std::path::Path;

use super::{read_number, read_optional, stat_value, Counters};

pub const USAGE: &str = "memory.usage_in_bytes";
pub const MAX_USAGE: &str = "memory.max_usage_in_bytes";
pub const LIMIT: &str = "memory.limit_in_bytes";
pub const STAT: &str = "memory.stat";
pub const OOM_CONTROL: &str = "memory.oom_control";

/// Every counter of the v1 cgroup `dir`; `Err` when usage_in_bytes cannot be read.
pub fn read(dir: &Path) -> Result<Counters, String> {
    let usage_bytes = read_number(&dir.join(USAGE))?.unwrap_or(0);
    let mut c = Counters {
        usage_bytes,
        peak_bytes: read_number(&dir.join(MAX_USAGE)).ok().flatten(),
        limit_bytes: read_number(&dir.join(LIMIT)).ok().flatten(),
        ..Counters::default()
    };
    if let Some(stat) = read_optional(&dir.join(STAT)) {
        apply_stat(&mut c, &stat);
    }
    if let Some(oom) = read_optional(&dir.join(OOM_CONTROL)) {
        c.oom_kill = stat_value(&oom, "oom_kill");
    }
    Ok(c)
}

/// The memory.stat keys of the v2 names anon, file and inactive_file (the
/// ones sampled), `total_*` first.
pub const ANON_KEYS: [&str; 2] = ["total_rss", "rss"];
pub const FILE_KEYS: [&str; 2] = ["total_cache", "cache"];
pub const INACTIVE_FILE_KEYS: [&str; 2] = ["total_inactive_file", "inactive_file"];

/// The first of `keys` that memory.stat has.
fn value(stat: &str, keys: &[&str]) -> Option<u64> {
    keys.iter().find_map(|k| stat_value(stat, k))
}

/// The memory.stat values the record keeps, under the v2 names.
pub fn apply_stat(c: &mut Counters, stat: &str) {
    c.anon_bytes = value(stat, &ANON_KEYS);
    c.file_bytes = value(stat, &FILE_KEYS);
    c.file_mapped_bytes = value(stat, &["total_mapped_file", "mapped_file"]);
    c.shmem_bytes = value(stat, &["total_shmem", "shmem"]);
    c.active_file_bytes = value(stat, &["total_active_file", "active_file"]);
    c.inactive_file_bytes = value(stat, &INACTIVE_FILE_KEYS);
}
