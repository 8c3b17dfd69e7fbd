//! Shared memory: what the machine's /dev/shm holds. A
//! `multiprocessing.shared_memory` segment, a DataLoader's shared tensors or
//! any POSIX shm object that nobody unlinked stays charged to the machine
//! (and to the cgroup that first touched it) after every process that mapped
//! it has exited; no process's RSS shows it then.
//!
//! Read as the blocks its files hold (`st_blocks`, the tmpfs's own count),
//! summed over the directory and its subdirectories at each reading: the
//! whole machine's /dev/shm, so its baseline is what was there before the
//! run. `MEMREL_SHM_DIR` names another directory (a container that mounts
//! its shared memory elsewhere; the tests, which keep theirs apart from the
//! machine's).

use std::path::{Path, PathBuf};

use super::{Probe, ResourceDef};

pub static SHM: ResourceDef = ResourceDef {
    key: "shm",
    quantity: "shm",
    label: "shared memory (/dev/shm)",
    open,
};

/// Where POSIX shared memory lives on Linux.
const SHM_DIR: &str = "/dev/shm";

/// The variable that names another directory.
const SHM_DIR_ENV: &str = "MEMREL_SHM_DIR";

/// The most entries one reading visits: a /dev/shm of more is read as far
/// as that (a reading stays cheap beside the program it measures).
const MAX_ENTRIES: usize = 10_000;

struct ShmProbe {
    dir: PathBuf,
}

fn open(_pid: u32) -> Result<Box<dyn Probe>, String> {
    let dir = std::env::var_os(SHM_DIR_ENV).map_or_else(|| PathBuf::from(SHM_DIR), PathBuf::from);
    held_bytes(&dir).map_err(|e| format!("{} cannot be read: {e}", dir.display()))?;
    Ok(Box::new(ShmProbe { dir }))
}

/// The bytes the files under `dir` hold (512-byte blocks, as `du` counts).
fn held_bytes(dir: &Path) -> std::io::Result<u64> {
    let mut total = 0u64;
    let mut visited = 0usize;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at)? {
            visited += 1;
            if visited > MAX_ENTRIES {
                return Ok(total);
            }
            // A file unlinked between the listing and its stat holds nothing.
            let Ok(entry) = entry else { continue };
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                pending.push(entry.path());
            } else {
                total += std::os::unix::fs::MetadataExt::blocks(&meta) * 512;
            }
        }
    }
    Ok(total)
}

impl Probe for ShmProbe {
    fn read(&mut self, _pids: &[u32]) -> Option<u64> {
        held_bytes(&self.dir).ok()
    }

    fn how(&self) -> String {
        format!(
            "the blocks of the files under {}, the whole machine's",
            self.dir.display()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_read_until_it_is_unlinked() {
        let tmp = tempfile::tempdir().unwrap();
        let mut probe = ShmProbe {
            dir: tmp.path().to_path_buf(),
        };
        assert_eq!(probe.read(&[]), Some(0));
        std::fs::create_dir(tmp.path().join("sub")).unwrap();
        std::fs::write(tmp.path().join("sub/segment"), vec![1u8; 8 << 20]).unwrap();
        assert_eq!(probe.read(&[]), Some(8 << 20));
        std::fs::remove_file(tmp.path().join("sub/segment")).unwrap();
        assert_eq!(probe.read(&[]), Some(0));
    }

    #[test]
    fn the_machines_dev_shm_opens() {
        let probe = ShmProbe {
            dir: PathBuf::from(SHM_DIR),
        };
        assert!(held_bytes(&probe.dir).is_ok());
    }
}
