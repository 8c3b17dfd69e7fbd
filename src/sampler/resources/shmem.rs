//! Shared memory the measured processes map: their `RssShmem` (a POSIX or
//! System V segment, a `multiprocessing.shared_memory` block, a
//! DataLoader's shared tensors, an anonymous `MAP_SHARED` mapping, a file on
//! a tmpfs), summed over the process or its tree.
//!
//! Host RSS counts these pages too, but cannot say that they outlive the
//! process that made them: what /dev/shm keeps after every process exits is
//! `shm`'s (`shm.rs`); this is what the processes hold mapped while they
//! run. Read from `/proc/PID/status` (one small read per process); a page
//! mapped by two processes of a tree counts in each.

use super::{Probe, ResourceDef, Shape};

pub static SHMEM: ResourceDef = ResourceDef {
    key: "shmem",
    quantity: "shmem",
    label: "shared memory mapped (RssShmem)",
    open,
    shape: Shape::ONE_NUMBER,
};

struct ShmemProbe;

fn open(pid: u32) -> Result<Box<dyn Probe>, String> {
    rss_shmem_bytes(pid).ok_or_else(|| format!("/proc/{pid}/status has no RssShmem"))?;
    Ok(Box::new(ShmemProbe))
}

/// The `RssShmem` of `pid` in bytes; `None` where it cannot be read (the
/// process is gone, or the kernel does not say).
fn rss_shmem_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("RssShmem:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

impl Probe for ShmemProbe {
    fn read(&mut self, pids: &[u32]) -> Option<u64> {
        // A process that exited between the tree's walk and this reading
        // holds nothing any more; none readable: no reading.
        let read: Vec<u64> = pids.iter().filter_map(|p| rss_shmem_bytes(*p)).collect();
        (!read.is_empty()).then(|| read.iter().sum())
    }

    fn how(&self) -> String {
        "RssShmem of /proc/PID/status, summed over the measured processes".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_mapping_this_process_touches_is_read_to_the_page() {
        let pid = std::process::id();
        let mut probe = open(pid).expect("RssShmem is readable on Linux");
        let before = probe.read(&[pid]).expect("a reading");
        const BYTES: usize = 8 << 20;
        // SAFETY: a fresh anonymous shared mapping, written within its
        // length and unmapped below.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(at, libc::MAP_FAILED);
        // SAFETY: within the mapping just made.
        unsafe { std::ptr::write_bytes(at.cast::<u8>(), 0x5A, BYTES) };
        let held = probe.read(&[pid]).expect("a reading");
        // SAFETY: the mapping made above, unmapped once.
        unsafe { libc::munmap(at, BYTES) };
        let after = probe.read(&[pid]).expect("a reading");
        // Other threads of the test binary may map shared pages of their
        // own meanwhile: the mapping's own bytes, within a few pages.
        let grew = held as i64 - before as i64;
        assert!(
            (grew - BYTES as i64).abs() <= 64 * 4096,
            "grew {grew} for {BYTES}"
        );
        assert!(after + (BYTES as u64) / 2 < held, "{after} after {held}");
        assert_eq!(probe.read(&[u32::MAX]), None);
    }
}
