//! Wakes the attach loop the moment a mark or a log line is written, so an
//! edge is read within about a millisecond of it (not at the next 20 ms
//! tick, after the program has already acted on it).
//!
//! It watches directories with inotify (the live directory `memrel mark`
//! appends to, and the log file's directory: a directory watch also sees a
//! log rotated, truncated or made anew); where inotify is not available the
//! loop falls back to its tick. It only wakes the loop: the marks and the
//! log are read by `live` and `follow` as before.

use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::fs::inotify;

/// An inotify descriptor on a few directories (or none: ticks only).
pub struct Watch {
    fd: Option<OwnedFd>,
}

impl Watch {
    /// Watches `dirs` for files written, made or moved into them.
    pub fn new(dirs: &[&Path]) -> Watch {
        let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK).ok();
        let fd = fd.filter(|fd| {
            let flags = inotify::WatchFlags::MODIFY
                | inotify::WatchFlags::CLOSE_WRITE
                | inotify::WatchFlags::CREATE
                | inotify::WatchFlags::MOVED_TO;
            // One directory that cannot be watched leaves the loop on ticks.
            dirs.iter()
                .all(|dir| inotify::add_watch(fd, *dir, flags).is_ok())
        });
        Watch { fd }
    }

    /// Whether the loop wakes on writes (not only on ticks).
    pub fn active(&self) -> bool {
        self.fd.is_some()
    }

    /// Waits until something is written in a watched directory or `tick`
    /// passes; returns when it woke for a write (the lag of what it reads
    /// next is measured from then).
    pub fn wait(&self, tick: Duration) -> Option<Instant> {
        let Some(fd) = self.fd.as_ref() else {
            std::thread::sleep(tick);
            return None;
        };
        let timeout = rustix::time::Timespec {
            tv_sec: tick.as_secs() as i64,
            tv_nsec: i64::from(tick.subsec_nanos()),
        };
        let mut fds = [rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN)];
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Ok(n) if n > 0 => {
                let woke = Instant::now();
                // The events themselves do not matter: read them all away.
                let mut buf = [0u8; 4096];
                while matches!(rustix::io::read(fd, &mut buf), Ok(n) if n > 0) {}
                Some(woke)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_in_a_watched_directory_wakes_it_before_the_tick() {
        let dir = tempfile::tempdir().expect("tempdir");
        let watch = Watch::new(&[dir.path()]);
        assert!(watch.active());
        let path = dir.path().join("app.log");
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            std::fs::write(path, "model loaded\n").expect("write");
        });
        let start = Instant::now();
        // A tick far longer than the write's delay: only the write wakes it.
        let woke = watch.wait(Duration::from_secs(30));
        writer.join().expect("writer");
        assert!(woke.is_some());
        assert!(start.elapsed() < Duration::from_secs(20));
        // The write's later events (modify, close) may wake it again; once
        // they are read away and nothing more is written, the tick ends it.
        let quiet = (0..10).any(|_| watch.wait(Duration::from_millis(10)).is_none());
        assert!(quiet);
    }
}
