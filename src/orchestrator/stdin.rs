//! memrel's stdin passed through to a program (`memrel exec`).
//!
//! A pipe or a file is inherited as it is: the program reads it directly
//! (`echo hi | memrel exec -- cat`). A terminal cannot be: the program runs
//! in a process group of its own (so a Ctrl-C reaches memrel only, which
//! ends the run), and a process outside the terminal's foreground group that
//! reads it is stopped by the kernel (SIGTTIN). So memrel, in the
//! foreground, reads the terminal on one thread for the whole invocation
//! and copies what is typed into a pipe to the program of the live run; at
//! the terminal's end of input (Ctrl-D) that pipe is closed, and later runs
//! get /dev/null.
//!
//! It never touches memrel's other descriptors, nor the event and
//! acknowledgement pipes (3 and 4).

use std::io::{IsTerminal, Read, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The live run's end of the pipe from the terminal, while there is one.
static SINK: Mutex<Option<Arc<ChildStdin>>> = Mutex::new(None);
/// The terminal's input has ended (Ctrl-D): nothing more will come.
static ENDED: AtomicBool = AtomicBool::new(false);
/// The one thread that reads the terminal, started at the first run.
static PUMP: OnceLock<()> = OnceLock::new();

/// Whether memrel's stdin is a terminal (then it is fed, not inherited).
fn terminal() -> bool {
    std::io::stdin().is_terminal()
}

/// The program's stdin: memrel's own where it is not a terminal; a pipe
/// memrel feeds where it is ([`feed`]); /dev/null once the terminal's input
/// has ended.
pub fn for_program() -> Stdio {
    if !terminal() {
        Stdio::inherit()
    } else if ENDED.load(Ordering::SeqCst) {
        Stdio::null()
    } else {
        Stdio::piped()
    }
}

/// Hands `child`'s stdin pipe (where [`for_program`] made one) to the
/// terminal's reader until the returned guard is dropped (the run's end).
pub fn feed(child: &mut Child) -> Option<Feeding> {
    let pipe = child.stdin.take()?;
    if let Ok(mut sink) = SINK.lock() {
        *sink = Some(Arc::new(pipe));
    }
    PUMP.get_or_init(|| {
        std::thread::spawn(pump);
    });
    Some(Feeding)
}

/// Feeding a run's program; dropping it closes the program's stdin.
pub struct Feeding;

impl Drop for Feeding {
    fn drop(&mut self) {
        if let Ok(mut sink) = SINK.lock() {
            *sink = None;
        }
    }
}

/// Copies the terminal into the live run's pipe, until the terminal ends.
fn pump() {
    let mut buf = [0u8; 4096];
    let mut input = std::io::stdin();
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        // The lock is not held while writing: a program that does not read
        // must not block the run's end (which drops the pipe).
        let sink = SINK.lock().ok().and_then(|s| s.clone());
        if let Some(sink) = sink {
            if (&*sink).write_all(&buf[..n]).is_err() {
                // The program is gone or closed its stdin: nothing to feed.
                if let Ok(mut live) = SINK.lock() {
                    if live.as_ref().is_some_and(|l| Arc::ptr_eq(l, &sink)) {
                        *live = None;
                    }
                }
            }
        }
    }
    ENDED.store(true, Ordering::SeqCst);
    if let Ok(mut sink) = SINK.lock() {
        *sink = None;
    }
}
