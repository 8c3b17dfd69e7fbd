//! Drains one of the worker's output pipes (stdout or stderr) on its own
//! thread and keeps its tail for the run record: a pipe nobody reads would
//! block the worker once full, and what a crashing library printed last is
//! often the only clue. For `memrel exec` it also copies what arrives to
//! memrel's own stdout or stderr as it comes ([`Echo`]); a copy that fails
//! (memrel's output closed) stops the copying, never the draining.
//!
//! The tail is shared with the thread, so [`Tail::finish`] returns what has
//! arrived even when a process outside memrel's reach still holds the pipe
//! open: collecting it is bounded, like every other wait on a worker.

use std::io::{Read, Write};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The last bytes of one output pipe, filled by a thread.
pub struct Tail {
    bytes: Arc<Mutex<Vec<u8>>>,
    ended: Receiver<()>,
    keep_bytes: usize,
}

/// Where a drained pipe is also shown, as it arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Echo {
    Stdout,
    Stderr,
}

impl Echo {
    /// Writes `bytes` to memrel's stream at once; false when it cannot.
    fn write(self, bytes: &[u8]) -> bool {
        fn to(mut out: impl Write, bytes: &[u8]) -> bool {
            out.write_all(bytes).and_then(|()| out.flush()).is_ok()
        }
        match self {
            Echo::Stdout => to(std::io::stdout().lock(), bytes),
            Echo::Stderr => to(std::io::stderr().lock(), bytes),
        }
    }
}

/// Starts draining `source` (none: an empty tail), keeping its last
/// `keep_bytes`, and showing what arrives on `echo` where given.
pub fn spawn(
    source: Option<impl Read + Send + 'static>,
    keep_bytes: usize,
    mut echo: Option<Echo>,
) -> Tail {
    let bytes = Arc::new(Mutex::new(Vec::new()));
    let (done, ended) = mpsc::channel();
    let shared = Arc::clone(&bytes);
    std::thread::spawn(move || {
        if let Some(mut source) = source {
            let mut buf = [0u8; 4096];
            while let Ok(n) = source.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if echo.is_some_and(|e| !e.write(&buf[..n])) {
                    echo = None;
                }
                let Ok(mut all) = shared.lock() else { break };
                all.extend_from_slice(&buf[..n]);
                if all.len() > 4 * keep_bytes {
                    let cut = all.len() - keep_bytes;
                    all.drain(..cut);
                }
            }
        }
        let _ = done.send(());
    });
    Tail {
        bytes,
        ended,
        keep_bytes,
    }
}

impl Tail {
    /// The tail as text, after the pipe ended or `grace` passed, whichever is first.
    pub fn finish(self, grace: Duration) -> String {
        let ended = self.ended.recv_timeout(grace).is_ok();
        let all = match self.bytes.lock() {
            Ok(all) => all.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        let start = all.len().saturating_sub(self.keep_bytes);
        let mut text = String::from_utf8_lossy(&all[start..]).into_owned();
        if !ended {
            text.push_str(&format!(
                "\n[memrel: still open {:.0} s after the worker ended (a process outside its group holds it); tail cut here]",
                grace.as_secs_f64()
            ));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn keeps_the_last_bytes_of_a_long_output() {
        let text: Vec<u8> = (0..100_000u32)
            .flat_map(|i| format!("{i}\n").into_bytes())
            .collect();
        let tail = spawn(Some(std::io::Cursor::new(text)), 64, None).finish(Duration::from_secs(5));
        assert!(tail.ends_with("99998\n99999\n"), "{tail}");
        assert!(tail.len() <= 64);
    }

    /// A reader that never ends, like a pipe a stray grandchild keeps open.
    struct Forever;
    impl Read for Forever {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            std::thread::sleep(Duration::from_millis(20));
            buf[0] = b'x';
            Ok(1)
        }
    }

    #[test]
    fn finishing_is_bounded_when_the_pipe_never_ends() {
        let tail = spawn(Some(Forever), 1024, None);
        std::thread::sleep(Duration::from_millis(100));
        let start = Instant::now();
        let text = tail.finish(Duration::from_millis(50));
        assert!(start.elapsed() < Duration::from_secs(2));
        assert!(text.starts_with('x'), "what arrived is kept: {text}");
        assert!(text.contains("still open"), "{text}");
    }
}
