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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::{read, Located, Version};

    fn fixture() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cgroup/v1")
    }

    #[test]
    fn every_counter_of_a_v1_directory() {
        let dir = fixture();
        let c = read(&Located {
            version: Version::V1,
            dir: dir.clone(),
        })
        .unwrap();
        let file = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
        let stat = file(STAT);
        let key = |k: &str| stat_value(&stat, k);
        assert_eq!(c.usage_bytes, file(USAGE).trim().parse::<u64>().unwrap());
        assert_eq!(c.peak_bytes, file(MAX_USAGE).trim().parse().ok());
        // The fixture's limit is v1's "no limit" (a number near 2^63).
        assert_eq!(c.limit_bytes, None);
        assert_eq!(c.anon_bytes, key("total_rss"));
        assert_eq!(c.file_bytes, key("total_cache"));
        assert_eq!(c.file_mapped_bytes, key("total_mapped_file"));
        assert_eq!(c.inactive_file_bytes, key("total_inactive_file"));
        assert!(c.inactive_file_bytes.is_some());
        assert_eq!(c.oom_kill, Some(0));
        assert_eq!((c.high_events, c.max_events), (None, None));
        assert_eq!(
            c.working_set_bytes(),
            c.usage_bytes - key("total_inactive_file").unwrap()
        );
    }

    #[test]
    fn the_plain_keys_serve_where_there_is_no_total() {
        let mut c = Counters::default();
        apply_stat(
            &mut c,
            "cache 300\nrss 200\nmapped_file 10\ninactive_file 100\n",
        );
        assert_eq!(
            (
                c.file_bytes,
                c.anon_bytes,
                c.file_mapped_bytes,
                c.inactive_file_bytes
            ),
            (Some(300), Some(200), Some(10), Some(100))
        );
        apply_stat(&mut c, "inactive_file 100\ntotal_inactive_file 150\n");
        assert_eq!(c.inactive_file_bytes, Some(150));
    }
}
