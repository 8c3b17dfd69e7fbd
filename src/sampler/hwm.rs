//! The kernel's exact peak of a process's resident memory between two of
//! its phase edges: VmHWM from `/proc/PID/status`, then "5" written to
//! `/proc/PID/clear_refs`, which resets VmHWM to the current RSS.
//!
//! Why: a sampler that reads every 10 ms misses a spike that comes and goes
//! between two readings; the kernel raises VmHWM whenever it unmaps or
//! zaps pages with its RSS counters at a new high, so nothing in between
//! escapes it. The two files are the worker's own: the parent may read the
//! one and write the other as the same user, without a cgroup. Where the
//! write is refused (another user, a kernel without `CONFIG_PROC_PAGE_MONITOR`,
//! a locked-down /proc) the peak is not available and says why; the run
//! goes on. Both files are opened once; a reading allocates nothing. The
//! reset takes the worker's mmap lock for a moment (once per edge).
//!
//! A reset also resets what the worker's own VmHWM and `wait4`'s
//! `ru_maxrss` say at its end (the peak since the last edge): the
//! orchestrator keeps the run's `vm_hwm_bytes` as the largest of every
//! span's peak and those. `attach` never resets: the process is not
//! memrel's, and it or another tool may read its VmHWM.
//!
//! The parent's event reader (`orchestrator::channel::Reader`) takes the
//! peak as each edge's line arrives. A worker in a cgroup of its own has a
//! second exact peak, the cgroup's `memory.peak` (page cache included);
//! it is read at the same place and moment, beside this one.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;

/// The open status and clear_refs files of one process.
pub struct KernelPeak {
    pid: u32,
    status: File,
    clear_refs: File,
    buf: Vec<u8>,
    /// Why the peak stopped being available (a reset that failed once
    /// leaves every later span's peak wrong, so none is given after it).
    broken: Option<String>,
}

/// What /proc/PID/status is read into: the file is ~1.5 KiB.
const STATUS_BUF_BYTES: usize = 8 * 1024;

impl KernelPeak {
    /// Opens `pid`'s files; `Err` says why its peaks cannot be had.
    pub fn open(pid: u32) -> Result<KernelPeak, String> {
        let status_path = format!("/proc/{pid}/status");
        let status =
            File::open(&status_path).map_err(|e| format!("cannot read {status_path}: {e}"))?;
        let refs_path = format!("/proc/{pid}/clear_refs");
        let clear_refs = std::fs::OpenOptions::new()
            .write(true)
            .open(&refs_path)
            .map_err(|e| format!("cannot open {refs_path} to reset VmHWM: {e}"))?;
        Ok(KernelPeak {
            pid,
            status,
            clear_refs,
            buf: vec![0; STATUS_BUF_BYTES],
            broken: None,
        })
    }

    /// VmHWM now (the peak since the process started or since the last
    /// reset), without resetting it; `None` once the process has ended (a
    /// zombie's status has no memory lines; a reaped one has no status).
    pub fn vm_hwm_bytes(&mut self) -> Option<u64> {
        let n = self.status.read_at(&mut self.buf, 0).ok()?;
        parse_vm_hwm_bytes(&self.buf[..n])
    }

    /// The peak since the last reset, then a reset: the exact peak of the
    /// span that ends now; `Ok(None)` when the process has ended (an edge
    /// read after its exit: that span has no peak, the others keep theirs).
    /// Once a reset failed, every call says why.
    pub fn take(&mut self) -> Result<Option<u64>, String> {
        if let Some(why) = &self.broken {
            return Err(why.clone());
        }
        let Some(peak) = self.vm_hwm_bytes() else {
            return Ok(None);
        };
        if let Err(e) = (&self.clear_refs).write_all(b"5") {
            let why = format!(
                "writing \"5\" to /proc/{}/clear_refs (the VmHWM reset) was refused: {e}",
                self.pid
            );
            self.broken = Some(why.clone());
            return Err(why);
        }
        Ok(Some(peak))
    }
}

/// VmHWM in bytes from the text of a /proc/PID/status.
pub fn parse_vm_hwm_bytes(status: &[u8]) -> Option<u64> {
    let start = find(status, b"VmHWM:")? + b"VmHWM:".len();
    let kib = status[start..]
        .iter()
        .skip_while(|b| **b == b' ' || **b == b'\t')
        .take_while(|b| b.is_ascii_digit())
        .try_fold(None, |acc: Option<u64>, b| {
            Some(Some(
                acc.unwrap_or(0).checked_mul(10)? + u64::from(b - b'0'),
            ))
        })??;
    kib.checked_mul(1024)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_vm_hwm() {
        let status = b"Name:\tx\nVmPeak:\t  9000 kB\nVmHWM:\t    1234 kB\nVmRSS:\t 1000 kB\n";
        assert_eq!(parse_vm_hwm_bytes(status), Some(1234 * 1024));
        assert_eq!(parse_vm_hwm_bytes(b"Name:\tx\n"), None);
        assert_eq!(parse_vm_hwm_bytes(b"VmHWM:\t kB\n"), None);
    }

    /// A child that touches 64 MiB, frees it and waits: the peak taken then
    /// holds the 64 MiB; after the reset, the next span's peak is what it
    /// holds now (well below).
    #[test]
    fn a_freed_block_stays_in_the_peak_until_the_reset() {
        let mut child = std::process::Command::new("python3")
            .args([
                "-c",
                "import sys, mmap\nm = mmap.mmap(-1, 64 << 20)\nm.write(b'x' * (64 << 20))\nm.close()\n\
                 print('freed', flush=True)\nsys.stdin.read()",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 starts (it is on PATH wherever memrel's tests run)");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().expect("stdout")),
            &mut line,
        )
        .expect("the child says it freed the block");
        assert_eq!(line.trim(), "freed");
        let mut peak = KernelPeak::open(child.id()).expect("the child's own files");
        let first = peak.take().expect("a peak").expect("alive");
        let second = peak.take().expect("a peak after the reset").expect("alive");
        drop(child.stdin.take());
        let _ = child.wait();
        // Reaped: no peak, and no error either.
        assert_eq!(peak.take(), Ok(None));
        assert!(first >= 64 << 20, "peak {first} holds the freed 64 MiB");
        assert!(
            second + (48 << 20) < first,
            "after the reset the peak is the RSS now: {second} vs {first}"
        );
    }

    /// A reset that fails (here: a write to a file open for reading only)
    /// makes this and every later peak unavailable, with the reason.
    #[test]
    fn a_refused_reset_says_why_every_time() {
        let mut peak = KernelPeak::open(std::process::id()).expect("own files");
        peak.clear_refs = File::open("/proc/self/status").expect("opens for reading");
        for _ in 0..2 {
            let err = peak.take().expect_err("the write is refused");
            assert!(
                err.contains("clear_refs") && err.contains("refused"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_process_that_is_gone_says_why() {
        let err = KernelPeak::open(u32::MAX).err().expect("no such process");
        assert!(err.contains("/proc/4294967295/status"), "{err}");
    }
}
