//! Reading another process's memory from `/proc/PID/statm`: the file is opened
//! once and re-read with `pread`, the cheapest reading Linux offers (no path
//! lookup, no allocation, ~1 µs).
//!
//! statm's `resident` is RSS and `shared` is RssFile + RssShmem, so
//! anon = resident − shared exactly as the kernel counts RssAnon.
//!
//! As a [`ResourceProbe`] it is the host probe of one process: it fills
//! `Resource::Host` where the map has no host reading yet (at an edge, the
//! sender's own stands).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use super::probe::{Got, Measured, ResourceProbe};
use super::Reading;
use crate::record::{Readings, Resource};

/// A process's state letter from `/proc/PID/stat` (`R`, `S`, `Z` for a
/// zombie, …); `None` where the process is gone.
pub fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

/// Alive and not a zombie.
pub fn is_running(pid: u32) -> bool {
    state(pid).is_some_and(|s| s != 'Z')
}

pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 {
        size as u64
    } else {
        4096
    }
}

/// Parses statm's first three fields (size resident shared, in pages).
pub fn parse_statm(bytes: &[u8], page_size: u64) -> Option<Reading> {
    let mut fields = bytes
        .split(|b| *b == b' ' || *b == b'\n')
        .filter(|f| !f.is_empty())
        .map(|f| {
            f.iter().try_fold(0u64, |acc, b| {
                b.is_ascii_digit().then(|| acc * 10 + u64::from(b - b'0'))
            })
        });
    let _size = fields.next()??;
    let resident = fields.next()??;
    let shared = fields.next()??;
    Some(Reading {
        rss_bytes: resident * page_size,
        anon_bytes: resident.saturating_sub(shared) * page_size,
        file_bytes: shared * page_size,
    })
}

/// An open `/proc/PID/statm`.
pub struct StatmProbe {
    file: File,
    page_size: u64,
    buf: [u8; 256],
}

impl StatmProbe {
    pub fn open(pid: u32) -> io::Result<StatmProbe> {
        Ok(StatmProbe {
            file: File::open(format!("/proc/{pid}/statm"))?,
            page_size: page_size(),
            buf: [0; 256],
        })
    }

    /// One reading; an error once the process is gone.
    pub fn read(&mut self) -> io::Result<Reading> {
        let n = self.file.read_at(&mut self.buf, 0)?;
        parse_statm(&self.buf[..n], self.page_size)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unreadable statm"))
    }
}

impl ResourceProbe for StatmProbe {
    fn read(&mut self, _at: &Measured, into: &mut Readings) -> Got {
        if into.get(Resource::Host).is_some() {
            return Got::Kept;
        }
        match StatmProbe::read(self) {
            Ok(reading) => reading.put(into),
            Err(_) => Got::Gone,
        }
    }

    fn how(&self) -> String {
        "one process's RSS (/proc/PID/statm)".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_statm_fields() {
        let r = parse_statm(b"1000 300 100 5 0 200 0\n", 4096).unwrap();
        assert_eq!(r.rss_bytes, 300 * 4096);
        assert_eq!(r.file_bytes, 100 * 4096);
        assert_eq!(r.anon_bytes, 200 * 4096);
        assert!(parse_statm(b"garbage", 4096).is_none());
    }

    #[test]
    fn reads_own_process_like_status_does() {
        let mut probe = StatmProbe::open(std::process::id()).unwrap();
        let r = probe.read().unwrap();
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let rss_kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .unwrap()
            .trim()
            .trim_end_matches(" kB")
            .parse()
            .unwrap();
        let diff = (r.rss_bytes as i64 - (rss_kib * 1024) as i64).abs();
        assert!(
            diff < 4 << 20,
            "statm {} vs status {}",
            r.rss_bytes,
            rss_kib * 1024
        );
    }
}
