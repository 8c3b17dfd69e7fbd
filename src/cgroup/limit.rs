//! `--memory-limit SIZE`: the most memory a worker may have. With a delegated
//! cgroup (`--cgroup-parent`) it is the worker's cgroup's memory.max, and
//! going over it brings the kernel's OOM killer (`oom_killed`). Without
//! one memrel creates no cgroup: the limit becomes the worker's RLIMIT_AS
//! (its address space, set between fork and exec), and going over it makes
//! an allocation fail (`alloc_failed`). The two measure different things —
//! charged memory against reserved address space — and the record says
//! which one applied.

use std::os::unix::process::CommandExt;
use std::process::Command;

use serde::{Deserialize, Serialize};

/// How a `--memory-limit` was applied to the workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// memory.max of the worker's own cgroup.
    CgroupMax,
    /// RLIMIT_AS (address space) of the worker process.
    RlimitAs,
}

/// `512M`, `2G`, `1.5GiB`, `1048576` (bytes; K, M, G, T are powers of 1024).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let bad = || {
        format!("--memory-limit {text:?} is not a size: use bytes or a number with K, M, G or T (e.g. 512M, 2G)")
    };
    let digits_end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(digits_end);
    let number: f64 = number.parse().map_err(|_| bad())?;
    let scale: u64 = match unit.trim().trim_end_matches("iB").trim_end_matches('B') {
        "" => 1,
        "K" | "k" => 1 << 10,
        "M" | "m" => 1 << 20,
        "G" | "g" => 1 << 30,
        "T" | "t" => 1 << 40,
        _ => return Err(bad()),
    };
    let bytes = (number * scale as f64).round();
    if !(bytes >= 4096.0 && bytes < u64::MAX as f64) {
        return Err(format!(
            "--memory-limit {text:?} is too small: give at least 4K (a page)"
        ));
    }
    Ok(bytes as u64)
}

/// Sets RLIMIT_AS of the process `command` starts to `bytes`, between fork and exec.
pub fn rlimit_as_at_exec(command: &mut Command, bytes: u64) {
    // SAFETY: setrlimit(2) is async-signal-safe; nothing is allocated.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: bytes as libc::rlim_t,
                rlim_max: bytes as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_people_units() {
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("65536"), Ok(65536));
        let e = parse_size("lots").unwrap_err();
        assert!(e.contains("--memory-limit") && e.contains("512M"), "{e}");
        assert!(parse_size("12X").is_err());
        assert!(parse_size("1").unwrap_err().contains("too small"));
    }
}
