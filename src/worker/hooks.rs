//! Test hooks: faults that memrel's own end-to-end tests (tests/it/faults/)
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
//! - `MEMREL_WORKER_AS_LIMIT_AFTER=<phase>`: after the first end edge of
//!   `<phase>`, the worker limits its own address space (RLIMIT_AS) to what it
//!   maps now plus [`AS_HEADROOM_BYTES`], so the next large allocation (the
//!   following load) runs out of memory the way it would under a real limit.
//! - `MEMREL_WORKER_LAZY_CONTEXT=1`: the fake worker on a CUDA device makes
//!   its context at its first load, after its baseline, as PyTorch and JAX
//!   do at their first GPU operation: until then NVML does not list it.
//! - `MEMREL_WORKER_NO_DEVICE=1`: the fake worker on a CUDA device opens none
//!   (host memory only, no VRAM readings), so runs spread over GPUs
//!   (`devices`, `plan::lanes`) are tested on a machine without one.

use std::fs::File;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::protocol::{Edge, Envelope, MemoryAtEdge, Message, Phase, PhaseEdge};

pub const STDOUT_NOISE_ENV: &str = "MEMREL_WORKER_STDOUT_NOISE";
pub const HANG_AFTER_ENV: &str = "MEMREL_WORKER_HANG_AFTER";
pub const AS_LIMIT_AFTER_ENV: &str = "MEMREL_WORKER_AS_LIMIT_AFTER";
pub const LAZY_CONTEXT_ENV: &str = "MEMREL_WORKER_LAZY_CONTEXT";

/// `MEMREL_WORKER_LAZY_CONTEXT=1`: open the fake worker's device at its first load.
pub fn lazy_context() -> bool {
    std::env::var(LAZY_CONTEXT_ENV).is_ok_and(|v| v == "1")
}

pub const NO_DEVICE_ENV: &str = "MEMREL_WORKER_NO_DEVICE";

/// `MEMREL_WORKER_NO_DEVICE=1`: the fake worker opens no device.
pub fn no_device() -> bool {
    std::env::var(NO_DEVICE_ENV).is_ok_and(|v| v == "1")
}

/// Room left above the address space in use when the limit is set: enough for
/// the worker to keep sending events, far too little to load a model.
pub const AS_HEADROOM_BYTES: u64 = 1 << 20;

/// The cycle of the fake events printed on stdout (no scenario has that many).
pub const FAKE_CYCLE: u32 = 9999;

/// The hooks in force for this worker (none, normally).
#[derive(Debug, Default)]
pub struct Hooks {
    noise: bool,
    hang_after: Option<Phase>,
    as_limit_after: Option<Phase>,
}

/// The phase named by the environment variable `var`, if it is set.
fn phase_from_env(var: &str) -> Option<Phase> {
    std::env::var(var).ok().and_then(|name| {
        let phase = Phase::parse(&name);
        if phase.is_none() {
            eprintln!("memrel worker: test hook {var}={name:?} names no phase; ignored");
        }
        phase
    })
}

impl Hooks {
    pub fn from_env() -> Hooks {
        Hooks {
            noise: std::env::var(STDOUT_NOISE_ENV).is_ok_and(|v| v == "1"),
            hang_after: phase_from_env(HANG_AFTER_ENV),
            as_limit_after: phase_from_env(AS_LIMIT_AFTER_ENV),
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
    pub fn after_edge(&mut self, phase: Phase, edge: Edge, channel: &mut Option<File>) {
        if self.noise {
            print_noise(phase, edge);
        }
        if edge == Edge::End && self.as_limit_after == Some(phase) {
            self.as_limit_after = None;
            limit_address_space(phase);
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
        heap: None,
        views: Default::default(),
        note: Some("printed on stdout by a library".into()),
        mono_s: None,
    }))
    .to_line();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{fake}");
    let _ = write!(out, "{{\"v\":1,\"type\":\"phase\",\"data\":{{\"phase\":\"");
    let _ = out.write_all(b"\xff\xfe junk \x1b[31m\n");
    let _ = out.flush();
}

/// Sets RLIMIT_AS to the address space mapped now plus [`AS_HEADROOM_BYTES`].
fn limit_address_space(phase: Phase) {
    let Some(mapped_bytes) = vm_size_bytes() else {
        eprintln!("memrel test hook: cannot read VmSize; no address-space limit set");
        return;
    };
    let limit = mapped_bytes + AS_HEADROOM_BYTES;
    let rlim = libc::rlimit {
        rlim_cur: limit as libc::rlim_t,
        rlim_max: limit as libc::rlim_t,
    };
    // SAFETY: setrlimit on this process with a valid, initialised struct.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_AS, &rlim) };
    if rc == 0 {
        eprintln!(
            "memrel test hook: address space limited to {limit} bytes after {}",
            phase.as_str()
        );
    } else {
        eprintln!(
            "memrel test hook: cannot limit the address space: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// The process's mapped address space (VmSize in /proc/self/status).
fn vm_size_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmSize:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
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
