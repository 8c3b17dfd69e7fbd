//! The protocol writer of memrel's own workers (candle and fake): phase edges
//! with the worker's own memory reading on the private event channel, one
//! unbuffered write per line, never on stdout.

use std::fs::File;
use std::io::Write;
use std::os::fd::FromRawFd;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::{allocator, device, glibc, hooks, selfmem};
use crate::protocol::{
    monotonic_s, Edge, Envelope, Message, Phase, PhaseEdge, ACK_FD_ENV, ACK_TIMEOUT_S, EVENT_FD_ENV,
};

/// Writes protocol lines on the private event channel, one write per line
/// (unbuffered, so the parent stamps each edge when it happens).
pub struct Emitter {
    /// The channel's write end; `None` once a test hook closed it.
    channel: Option<File>,
    /// The parent's acknowledgements (`protocol`'s handshake): after each
    /// phase line the worker waits until its edge is read; `None` without.
    ack: Option<File>,
    hooks: hooks::Hooks,
    /// The allocator serving `malloc`, for its view of memory at each end edge.
    pub allocator: allocator::Served,
    /// The model files' page cache, read at each edge (the candle worker
    /// sets it; the parent reads edges that come without it on arrival).
    pub page_cache: Option<crate::sampler::page_cache::PageCacheProbe>,
}

impl Emitter {
    /// Takes the channel the parent opened and named in `MEMREL_EVENT_FD`.
    pub fn from_env() -> Result<Emitter> {
        let text = std::env::var(EVENT_FD_ENV).with_context(|| {
            format!("{EVENT_FD_ENV} is not set: memrel worker is internal, use memrel run")
        })?;
        let fd: i32 = text
            .parse()
            .ok()
            .filter(|fd| *fd > 2)
            .with_context(|| format!("{EVENT_FD_ENV}={text:?} is not a descriptor above 2"))?;
        // Close-on-exec, so that programs the workload starts do not hold the
        // channel open; also tells whether the descriptor is open at all.
        // SAFETY: fcntl on a descriptor number only reads or sets its flags.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
            anyhow::bail!(
                "{EVENT_FD_ENV}={fd} is not an open descriptor: memrel worker is internal, use memrel run"
            );
        }
        // SAFETY: the descriptor is open, was made for this process by the
        // parent, and nothing else in the worker uses it.
        let channel = unsafe { File::from_raw_fd(fd) };
        Ok(Emitter {
            channel: Some(channel),
            ack: ack_from_env(),
            hooks: hooks::Hooks::from_env(),
            allocator: allocator::identify(),
            page_cache: None,
        })
    }

    pub fn send(&mut self, message: Message) {
        let mut line = Envelope::new(message).to_line();
        line.push('\n');
        if let Some(channel) = &mut self.channel {
            // A closed pipe means the parent is gone; nothing useful is left to do.
            let _ = channel.write_all(line.as_bytes());
        }
    }

    pub fn edge(
        &mut self,
        phase: Phase,
        edge: Edge,
        cycle: u32,
        model: Option<&str>,
        elapsed: Option<Duration>,
        note: Option<String>,
    ) {
        self.hooks.before_edge();
        let mono_s = Some(monotonic_s());
        let mut memory = selfmem::memory_now();
        memory.vram_bytes = device::vram_bytes_now();
        memory.page_cache_bytes = self.page_cache.as_mut().and_then(|p| p.read().ok());
        let note = match (note, device::crosscheck_note()) {
            (Some(n), Some(smi)) => Some(format!("{n}; {smi}")),
            (n, smi) => n.or(smi),
        };
        self.send(Message::Phase(PhaseEdge {
            phase,
            edge,
            cycle,
            model: model.map(str::to_string),
            elapsed_s: elapsed.map(|d| d.as_secs_f64()),
            memory,
            allocator: if edge == Edge::End && self.allocator.is_glibc() {
                glibc::allocator_state()
            } else {
                None
            },
            heap: if edge == Edge::End {
                self.allocator.heap_stats()
            } else {
                None
            },
            views: Default::default(),
            note,
            mono_s,
        }));
        self.wait_for_ack();
        self.hooks.after_edge(phase, edge, &mut self.channel);
    }

    /// Waits (at most `ACK_TIMEOUT_S`) until the parent has read the edge
    /// just sent; without an answer it stops waiting for later ones.
    fn wait_for_ack(&mut self) {
        use std::io::Read;
        let Some(ack) = self.ack.as_mut() else {
            return;
        };
        if self.channel.is_none() {
            return;
        }
        let timeout = rustix::time::Timespec {
            tv_sec: ACK_TIMEOUT_S as i64,
            tv_nsec: 0,
        };
        let mut fds = [rustix::event::PollFd::new(
            &*ack,
            rustix::event::PollFlags::IN,
        )];
        let mut byte = [0u8; 1];
        let answered = loop {
            match rustix::event::poll(&mut fds, Some(&timeout)) {
                Err(rustix::io::Errno::INTR) => continue,
                Ok(n) if n > 0 => break matches!(ack.read(&mut byte), Ok(1)),
                _ => break false,
            }
        };
        if !answered {
            self.ack = None;
        }
    }
}

/// The acknowledgements' read end the parent named in `MEMREL_ACK_FD`, made
/// close-on-exec; `None` when it is not set or not open (an older parent).
fn ack_from_env() -> Option<File> {
    let fd: i32 = std::env::var(ACK_FD_ENV)
        .ok()?
        .parse()
        .ok()
        .filter(|fd| *fd > 2)?;
    // SAFETY: fcntl on a descriptor number only sets its flags (and tells
    // whether it is open at all).
    if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
        return None;
    }
    // SAFETY: the descriptor is open, was made for this process by the
    // parent, and nothing else in the worker uses it.
    Some(unsafe { File::from_raw_fd(fd) })
}

/// Runs a phase: begin edge, the work, end edge with its worker-measured time.
pub fn phase<T>(
    out: &mut Emitter,
    phase: Phase,
    cycle: u32,
    model: Option<&str>,
    work: impl FnOnce() -> Result<(T, Option<String>)>,
) -> Result<T> {
    out.edge(phase, Edge::Begin, cycle, model, None, None);
    let start = Instant::now();
    let (value, note) = work()?;
    out.edge(phase, Edge::End, cycle, model, Some(start.elapsed()), note);
    Ok(value)
}
