//! The private worker → parent channel: a pipe made here, whose write end the
//! worker inherits as file descriptor [`EVENT_FD`], and the thread that reads
//! it, stamps each line on arrival, parses it and reads every resource at each
//! phase edge (`edges`). A second pipe runs back ([`ACK_FD`]): one byte for
//! each phase line once its reading is taken, so a sender that waits for it
//! (the handshake) cannot act before its edge is read.
//!
//! Nothing but the worker's emitter writes on this pipe, so every line that is
//! not a valid message (junk, a line cut off by the worker's death, a line
//! longer than [`MAX_LINE_BYTES`]) is handed on as a protocol error, never
//! skipped. The descriptors are made with rustix (`pipe2`, `fcntl`, `dup2`):
//! the one `unsafe` left is std's `pre_exec` hook itself.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::Instant;

use crate::protocol::{
    Envelope, Message, ACK_FD, ACK_FD_ENV, ACK_PIPE_ENV, EVENT_FD, EVENT_FD_ENV, EVENT_PIPE_ENV,
    MAX_LINE_BYTES,
};
use crate::sampler::hwm::KernelPeak;
use crate::session::edges::{EdgeExtras, EdgeReader};
use crate::session::Arrival;

/// Both ends of the event pipe and of the acknowledgement pipe, all
/// close-on-exec in the parent.
pub struct Channel {
    read: OwnedFd,
    write: OwnedFd,
    ack_read: OwnedFd,
    ack_write: OwnedFd,
}

impl Channel {
    pub fn open() -> std::io::Result<Channel> {
        let (read, low_write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        // The write end moves above the standard descriptors and EVENT_FD, so
        // the child's stdio set-up cannot overwrite it and dup2 never sees
        // source == target (which would keep close-on-exec set).
        let write = rustix::io::fcntl_dupfd_cloexec(&low_write, 10)?;
        // The acknowledgements: the parent never waits to write one (a
        // sender that does not read them only fills the pipe's buffer).
        let (low_ack_read, ack_write) = rustix::pipe::pipe_with(
            rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK,
        )?;
        let ack_read = rustix::io::fcntl_dupfd_cloexec(&low_ack_read, 10)?;
        // The child's end blocks: a sender waits on it (with its own timeout).
        rustix::fs::fcntl_setfl(&ack_read, rustix::fs::OFlags::empty())?;
        Ok(Channel {
            read,
            write,
            ack_read,
            ack_write,
        })
    }

    /// Makes `command` hand the write end to the worker as [`EVENT_FD`] and
    /// the acknowledgements' read end as [`ACK_FD`] (the only descriptors
    /// beyond stdio it inherits), named in [`EVENT_FD_ENV`] and [`ACK_FD_ENV`].
    pub fn attach(&self, command: &mut Command) {
        let source = self.write.as_raw_fd();
        let ack_source = self.ack_read.as_raw_fd();
        command.env(EVENT_FD_ENV, EVENT_FD.to_string());
        command.env(ACK_FD_ENV, ACK_FD.to_string());
        if let Ok(stat) = rustix::fs::fstat(&self.write) {
            command.env(EVENT_PIPE_ENV, format!("pipe:[{}]", stat.st_ino));
        }
        if let Ok(stat) = rustix::fs::fstat(&self.ack_read) {
            command.env(ACK_PIPE_ENV, format!("pipe:[{}]", stat.st_ino));
        }
        // SAFETY: `pre_exec` is unsafe because its closure runs between fork
        // and exec: this one makes two raw syscalls (dup2, async-signal-safe)
        // and allocates nothing. The targets are wrapped without being owned
        // (ManuallyDrop: nothing closes them); dup2's copies do not inherit
        // close-on-exec. Both sources sit at 10 or above, so neither dup2
        // overwrites the other's source.
        unsafe {
            command.pre_exec(move || {
                for (from, to) in [(source, EVENT_FD), (ack_source, ACK_FD)] {
                    let from = BorrowedFd::borrow_raw(from);
                    let mut target = ManuallyDrop::new(OwnedFd::from_raw_fd(to));
                    rustix::io::dup2(from, &mut target)?;
                }
                Ok(())
            });
        }
    }

    /// Closes the parent's copies of the child's ends (so the channel ends
    /// when the worker and everything that inherited it are gone) and reads
    /// on a thread. Each phase line is read by `edges` the moment it is read
    /// (every resource the run samples; see `edges`) and then acknowledged.
    /// `peak` gives each phase edge the kernel's peak since the one before
    /// (or why it cannot). The reader is handed back when the channel ends.
    pub fn start_reader(
        self,
        clock_zero: Instant,
        edges: EdgeReader,
        peak: Result<KernelPeak, String>,
    ) -> (Receiver<Arrival>, std::thread::JoinHandle<EdgeReader>) {
        let Channel {
            read,
            write,
            ack_read,
            ack_write,
        } = self;
        drop(write);
        drop(ack_read);
        let (tx, rx) = mpsc::channel();
        let handle = std::thread::spawn(move || {
            let mut reader = Reader {
                clock_zero,
                edges,
                peak,
                ack: Some(File::from(ack_write)),
                acks_written: 0,
            };
            reader.read_messages(File::from(read), &tx);
            reader.edges
        });
        (rx, handle)
    }
}

/// What the reading thread adds to each line as it arrives.
struct Reader {
    clock_zero: Instant,
    edges: EdgeReader,
    peak: Result<KernelPeak, String>,
    /// The acknowledgements' write end (non-blocking); `None` once the
    /// sender is gone.
    ack: Option<File>,
    /// Acknowledgements written so far (`sender_waits`).
    acks_written: u64,
}

impl Reader {
    /// Reads lines until the end of the channel, sending each as it arrives.
    fn read_messages(&mut self, source: impl Read, tx: &Sender<Arrival>) {
        let mut reader = BufReader::new(source);
        let mut line = Vec::new();
        loop {
            line.clear();
            let limit = MAX_LINE_BYTES as u64 + 1;
            let n = match (&mut reader).take(limit).read_until(b'\n', &mut line) {
                Ok(n) => n,
                Err(e) => {
                    let _ = tx.send(Arrival {
                        t_s: self.clock_zero.elapsed().as_secs_f64(),
                        parsed: Err(format!("cannot read the event channel: {e}")),
                        kernel_peak: None,
                        extras: EdgeExtras::default(),
                    });
                    return;
                }
            };
            if n == 0 {
                return;
            }
            let t_s = self.clock_zero.elapsed().as_secs_f64();
            let mut parsed = if line.last() == Some(&b'\n') {
                line.pop();
                std::str::from_utf8(&line)
                    .map_err(|e| format!("a line that is not UTF-8 ({e})"))
                    .and_then(Envelope::parse_line)
            } else if line.len() > MAX_LINE_BYTES {
                skip_to_newline(&mut reader);
                Err(format!("a line longer than {MAX_LINE_BYTES} bytes"))
            } else {
                Err(format!(
                    "a message cut off before its newline (the worker ended while writing it): {:?}",
                    String::from_utf8_lossy(&line[..line.len().min(80)])
                ))
            };
            let mut kernel_peak = None;
            let mut extras = EdgeExtras::default();
            if let Ok(Envelope {
                message: Message::Phase(edge),
                ..
            }) = parsed.as_mut()
            {
                // First the peak, closest to the edge: the span it closes.
                kernel_peak = match self.peak.as_mut() {
                    Ok(peak) => peak.take().transpose(),
                    Err(why) => Some(Err(why.clone())),
                };
                extras = self.edges.read(&mut edge.memory);
                // A sender that took every acknowledgement so far waits
                // for this one: from its line's arrival until now.
                if self.sender_waits() {
                    extras.held_s = Some(self.clock_zero.elapsed().as_secs_f64() - t_s);
                }
                self.acknowledge();
            }
            let arrival = Arrival {
                t_s,
                parsed,
                kernel_peak,
                extras,
            };
            if tx.send(arrival).is_err() {
                return;
            }
        }
    }

    /// Whether the sender takes the handshake: it has read every
    /// acknowledgement written so far, one at least (a sender that never
    /// reads them leaves them in the pipe; at its first edge nothing is
    /// known yet, and its wait there is not counted).
    fn sender_waits(&self) -> bool {
        self.acks_written > 0
            && self
                .ack
                .as_ref()
                .is_some_and(|ack| rustix::io::ioctl_fionread(ack).is_ok_and(|unread| unread == 0))
    }

    /// Tells the sender its edge is read: one byte, never waited for (a
    /// sender that does not take them fills the pipe, then they are dropped).
    fn acknowledge(&mut self) {
        use std::io::Write;
        if let Some(ack) = self.ack.as_mut() {
            match ack.write(b"k") {
                Ok(_) => self.acks_written += 1,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                // EPIPE: nobody holds the read end any more.
                Err(_) => self.ack = None,
            }
        }
    }
}

/// Discards the rest of an over-long line, a bounded piece at a time.
fn skip_to_newline(reader: &mut impl BufRead) {
    let mut chunk = Vec::new();
    loop {
        chunk.clear();
        match reader.take(64 * 1024).read_until(b'\n', &mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(_) if chunk.last() == Some(&b'\n') => return,
            Ok(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Done, Message};

    fn read_all(bytes: &[u8]) -> Vec<Result<Envelope, String>> {
        let (tx, rx) = mpsc::channel();
        let mut reader = Reader {
            clock_zero: Instant::now(),
            edges: EdgeReader::new(0, None, Vec::new()),
            peak: Err("not asked for".into()),
            ack: None,
            acks_written: 0,
        };
        reader.read_messages(bytes, &tx);
        drop(tx);
        rx.into_iter().map(|a| a.parsed).collect()
    }

    fn done_line() -> String {
        Envelope::new(Message::Done(Done {
            vm_hwm_bytes: 7,
            checks: Vec::new(),
        }))
        .to_line()
    }

    #[test]
    fn every_bad_line_on_the_channel_is_an_error_and_good_lines_pass() {
        let done = done_line();
        let mut bytes = Vec::new();
        bytes.extend_from_slice(format!("{done}\njunk\n\n").as_bytes());
        bytes.extend_from_slice(&[0xff, 0xfe, b'\n']);
        bytes.extend_from_slice(&vec![b'x'; MAX_LINE_BYTES + 10]);
        bytes.extend_from_slice(format!("\n{done}\n{{\"v\":1,\"type\":\"ph").as_bytes());
        let got = read_all(&bytes);
        assert_eq!(got.len(), 7, "{got:?}");
        assert!(got[0].is_ok() && got[5].is_ok(), "{got:?}");
        for (i, bad) in [1, 2, 3, 4, 6].into_iter().map(|i| (i, &got[i])) {
            assert!(bad.is_err(), "line {i} passed: {bad:?}");
        }
        let last = got[6].as_ref().expect_err("cut off");
        assert!(last.contains("cut off"), "{last}");
        let long = got[4].as_ref().expect_err("too long");
        assert!(long.contains("longer than"), "{long}");
    }

    #[test]
    fn the_child_gets_the_write_end_as_the_event_fd_and_the_parent_sees_the_end() {
        let channel = Channel::open().expect("pipe");
        let mut command = Command::new("sh");
        command.args(["-c", &format!("echo \"$MEMREL_EVENT_FD\" >&{EVENT_FD}")]);
        channel.attach(&mut command);
        let mut child = command.spawn().expect("sh starts");
        let (rx, _) = channel.start_reader(
            Instant::now(),
            EdgeReader::new(0, None, Vec::new()),
            Err("not asked for".into()),
        );
        let got: Vec<Arrival> = rx.into_iter().collect();
        assert!(child.wait().expect("exit").success());
        // "3" is not a message: the line arrives as an error, and then the channel ends.
        assert_eq!(got.len(), 1);
        let err = got[0].parsed.as_ref().expect_err("not a message");
        assert!(err.contains("\"3\""), "{err}");
    }
}
