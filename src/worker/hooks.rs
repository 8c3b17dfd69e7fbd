//! Test hooks: faults that memrel's own end-to-end tests (tests/faults.rs)
//! need from a real worker and a real workload never has. Each is inert unless
//! its environment variable is set (read once, when the worker starts); none
//! changes what the worker measures. Not for users: undocumented outside here.
//!
//! - `MEMREL_WORKER_STDOUT_NOISE=1`: around every phase edge, the worker prints
//!   on stdout what a chatty library would: a partial line (no newline) before
//!   the edge, and after it a line exactly like a protocol event (a phase edge
//!   of cycle [`FAKE_CYCLE`]), a cut-off JSON line, junk bytes; a partial line
//!   on stderr too. Events travel on their own channel, so none may be lost
//!   or faked.
//! - `MEMREL_WORKER_HANG_AFTER=<phase>`: after the first end edge of `<phase>`
//!   (`baseline`, `load`, …), the worker starts a grandchild (`sleep`) in its
//!   process group, names its pid on stderr (`grandchild pid N`), closes its
//!   event channel and stdout, and sleeps forever: the parent must kill it at
//!   the timeout, grandchild included.

use std::fs::File;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::protocol::{Edge, Envelope, MemoryAtEdge, Message, Phase, PhaseEdge};

pub const STDOUT_NOISE_ENV: &str = "MEMREL_WORKER_STDOUT_NOISE";
pub const HANG_AFTER_ENV: &str = "MEMREL_WORKER_HANG_AFTER";

/// The cycle of the fake events printed on stdout (no scenario has that many).
pub const FAKE_CYCLE: u32 = 9999;

/// The hooks in force for this worker (none, normally).
#[derive(Debug, Default)]
pub struct Hooks {
    noise: bool,
    hang_after: Option<Phase>,
}

impl Hooks {
    pub fn from_env() -> Hooks {
        let hang_after = std::env::var(HANG_AFTER_ENV).ok().and_then(|name| {
            let phase = Phase::parse(&name);
            if phase.is_none() {
                eprintln!(
                    "memrel worker: test hook {HANG_AFTER_ENV}={name:?} names no phase; ignored"
                );
            }
            phase
        });
        Hooks {
            noise: std::env::var(STDOUT_NOISE_ENV).is_ok_and(|v| v == "1"),
            hang_after,
        }
    }

    /// Before an edge is sent.
    pub fn before_edge(&self) {
        if self.noise {
            let mut out = std::io::stdout().lock();
            let _ = write!(out, "library progress 42% ");
            let _ = out.flush();
            eprint!("chatty stderr without a newline ");
        }
    }

    /// After an edge was sent on `channel`; may close it and never return.
    pub fn after_edge(&self, phase: Phase, edge: Edge, channel: &mut Option<File>) {
        if self.noise {
            print_noise(phase, edge);
        }
        if edge == Edge::End && self.hang_after == Some(phase) {
            hang(phase, channel);
        }
    }
}

fn print_noise(phase: Phase, edge: Edge) {
    let fake = Envelope::new(Message::Phase(PhaseEdge {
        phase,
        edge,
        cycle: FAKE_CYCLE,
        model: Some("fake".into()),
        elapsed_s: None,
        memory: MemoryAtEdge::default(),
        allocator: None,
        note: Some("printed on stdout by a library".into()),
    }))
    .to_line();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{fake}");
    let _ = write!(out, "{{\"v\":1,\"type\":\"phase\",\"data\":{{\"phase\":\"");
    let _ = out.write_all(b"\xff\xfe junk \x1b[31m\n");
    let _ = out.flush();
}

fn hang(phase: Phase, channel: &mut Option<File>) -> ! {
    let grandchild = Command::new("sleep")
        .arg("600")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn();
    match grandchild {
        Ok(g) => eprintln!(
            "memrel test hook: hanging after {}; grandchild pid {}",
            phase.as_str(),
            g.id()
        ),
        Err(e) => eprintln!("memrel test hook: cannot start the grandchild: {e}"),
    }
    *channel = None;
    // SAFETY: closes this process's stdout descriptor; nothing writes to it after.
    unsafe {
        libc::close(1);
    }
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}
