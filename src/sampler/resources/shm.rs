//! Shared memory: what the machine's /dev/shm holds. A
//! `multiprocessing.shared_memory` segment, a DataLoader's shared tensors or
//! any POSIX shm object that nobody unlinked stays charged to the machine
//! (and to the cgroup that first touched it) after every process that mapped
//! it has exited; no process's RSS shows it then.
//!
//! Read as the blocks its files hold, the tmpfs's own count: where the
//! directory is a mount of its own (as /dev/shm is), one `statvfs` a
//! reading gives the mount's used blocks (a sampler tick stays one system
//! call however many segments there are); elsewhere (a directory inside
//! another filesystem, a tmpfs without a size limit, whose `statvfs` counts
//! nothing) the files' `st_blocks` summed over the directory and its
//! subdirectories. Either way the whole machine's /dev/shm, so its baseline
//! is what was there before the run. `MEMREL_SHM_DIR` names another directory (a container that mounts
//! its shared memory elsewhere; the tests, which keep theirs apart from the
//! machine's).

use std::path::{Path, PathBuf};

use super::{Probe, ResourceDef, Shape};

pub static SHM: ResourceDef = ResourceDef {
    key: "shm",
    quantity: "shm",
    label: "shared memory (/dev/shm)",
    open,
    shape: Shape::ONE_NUMBER,
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
    /// The directory is a mount whose `statvfs` counts its blocks.
    mount: bool,
}

fn open(_pid: u32) -> Result<Box<dyn Probe>, String> {
    let dir = std::env::var_os(SHM_DIR_ENV).map_or_else(|| PathBuf::from(SHM_DIR), PathBuf::from);
    held_bytes(&dir).map_err(|e| format!("{} cannot be read: {e}", dir.display()))?;
    let mount = is_mount(&dir) && mount_used_bytes(&dir).is_some();
    Ok(Box::new(ShmProbe { dir, mount }))
}

/// Whether `dir` is the root of a filesystem of its own (its device is not
/// its parent's).
fn is_mount(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(dir), std::fs::metadata(dir.join(".."))) {
        (Ok(at), Ok(parent)) => at.dev() != parent.dev(),
        _ => false,
    }
}

/// The bytes in use on the filesystem mounted at `dir` (`statvfs`: its
/// blocks less the free ones); `None` where it cannot be read or counts no
/// blocks (a tmpfs mounted without a size limit).
fn mount_used_bytes(dir: &Path) -> Option<u64> {
    let path =
        std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(dir.as_os_str())).ok()?;
    // SAFETY: `path` is a NUL-terminated string that outlives the call, and
    // `stat` is a plain struct the call fills in (zeroed beforehand).
    let stat = unsafe {
        let mut stat: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(path.as_ptr(), &mut stat) != 0 {
            return None;
        }
        stat
    };
    // 64-bit counts on the 64-bit Linux targets memrel builds for.
    let (blocks, free, block_bytes): (u64, u64, u64) = (stat.f_blocks, stat.f_bfree, stat.f_frsize);
    (blocks > 0).then(|| blocks.saturating_sub(free) * block_bytes)
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
        if self.mount {
            mount_used_bytes(&self.dir)
        } else {
            held_bytes(&self.dir).ok()
        }
    }

    fn how(&self) -> String {
        if self.mount {
            format!(
                "the used blocks of the filesystem mounted at {} (statvfs), the whole machine's",
                self.dir.display()
            )
        } else {
            format!(
                "the blocks of the files under {}, the whole machine's",
                self.dir.display()
            )
        }
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
            mount: false,
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
        assert!(held_bytes(Path::new(SHM_DIR)).is_ok());
    }

    #[test]
    fn a_mount_is_read_by_statvfs_as_its_files_are_counted() {
        let dir = Path::new(SHM_DIR);
        if !(is_mount(dir) && mount_used_bytes(dir).is_some()) {
            eprintln!("skipped: {SHM_DIR} is not a tmpfs mount with a size here");
            return;
        }
        let mut probe = ShmProbe {
            dir: dir.to_path_buf(),
            mount: true,
        };
        let segment = dir.join(format!("memrel-test-{}", std::process::id()));
        let before = probe.read(&[]).unwrap();
        std::fs::write(&segment, vec![1u8; 8 << 20]).unwrap();
        let held = probe.read(&[]).unwrap();
        let walked = held_bytes(dir).unwrap();
        std::fs::remove_file(&segment).unwrap();
        // Other programs may use /dev/shm meanwhile: by far less than 8 MiB.
        assert!(held >= before + (8 << 20), "{before} -> {held}");
        assert!(
            held.abs_diff(walked) < 4 << 20,
            "statvfs {held}, files {walked}"
        );
        assert!(probe.how().contains("statvfs"), "{}", probe.how());
    }
}
