//! The sampler's clock: a periodic timer on `CLOCK_MONOTONIC` (a timerfd)
//! whose ticks fall on absolute deadlines, start + k × interval, however
//! long each reading took.
//!
//! Why not a sleep per tick: a relative sleep drifts by the reading's
//! length, and parking with a timeout costs the loop two clock reads and
//! the park's bookkeeping on every tick. The timer re-arms itself in the
//! kernel; the thread makes one `read` per tick, which also says how many
//! ticks passed, so a busy machine's missed ticks are skipped, never burst.
//! Stopping arms the timer to fire at once, so `stop` never waits out an
//! interval. Where no timerfd can be made, the thread parks until the
//! next deadline instead (the same ticks, a little more work each).

use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::time::{
    timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags,
    Timespec,
};

/// Wakes the sampler thread at each tick.
pub enum Ticker {
    Timer(Arc<OwnedFd>),
    /// No timerfd: park until the next deadline (`Waker::wake` unparks).
    Park {
        next: Instant,
        interval: Duration,
    },
}

/// Ends the current wait of a [`Ticker`] from another thread.
#[derive(Clone)]
pub enum Waker {
    Timer(Arc<OwnedFd>),
    Park,
}

impl Ticker {
    /// A ticker whose first tick is `interval` from now; its [`Waker`].
    pub fn start(interval: Duration) -> (Ticker, Waker) {
        // A zero interval is refused where intervals are parsed; never spin on one.
        let interval = interval.max(Duration::from_micros(1));
        match periodic(interval) {
            Ok(fd) => {
                let fd = Arc::new(fd);
                (Ticker::Timer(Arc::clone(&fd)), Waker::Timer(fd))
            }
            Err(_) => (
                Ticker::Park {
                    next: Instant::now() + interval,
                    interval,
                },
                Waker::Park,
            ),
        }
    }

    /// Waits for the next tick (or a wake); returns how many ticks passed
    /// since the last wait (more than 1: the ones missed are skipped).
    pub fn wait(&mut self, stop: &impl Fn() -> bool) -> u64 {
        match self {
            Ticker::Timer(fd) => {
                let mut expirations = [0u8; 8];
                loop {
                    match rustix::io::read(&**fd, &mut expirations) {
                        Ok(8) => return u64::from_ne_bytes(expirations),
                        Err(rustix::io::Errno::INTR) => continue,
                        // Nothing else happens to a timerfd read; if it did,
                        // the thread must not spin: fall back to a sleep.
                        _ => {
                            std::thread::park_timeout(Duration::from_millis(1));
                            return 1;
                        }
                    }
                }
            }
            Ticker::Park { next, interval } => {
                let mut passed = 0;
                loop {
                    let now = Instant::now();
                    while *next <= now {
                        *next += *interval;
                        passed += 1;
                    }
                    if passed > 0 || stop() {
                        return passed;
                    }
                    std::thread::park_timeout(*next - now);
                }
            }
        }
    }
}

impl Waker {
    /// Makes the ticker's current or next wait return at once.
    pub fn wake(&self, thread: &std::thread::Thread) {
        self.fire(thread, Duration::ZERO);
    }

    /// Makes the ticker's current or next wait return at once and the
    /// ticks go on every `interval` from then (a reading asked for now,
    /// `Nudge`). A parked ticker returns where its `stop` says so.
    pub fn nudge(&self, thread: &std::thread::Thread, interval: Duration) {
        self.fire(thread, interval);
    }

    /// The timer fires in a nanosecond, then every `every` (zero: once).
    fn fire(&self, thread: &std::thread::Thread, every: Duration) {
        match self {
            Waker::Timer(fd) => {
                let now = Itimerspec {
                    it_interval: timespec(every),
                    it_value: Timespec {
                        tv_sec: 0,
                        tv_nsec: 1,
                    },
                };
                if timerfd_settime(&**fd, TimerfdTimerFlags::empty(), &now).is_err() {
                    thread.unpark();
                }
            }
            Waker::Park => thread.unpark(),
        }
    }
}

fn timespec(interval: Duration) -> Timespec {
    Timespec {
        tv_sec: i64::try_from(interval.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(interval.subsec_nanos()),
    }
}

/// A timerfd that fires every `interval`, the first time `interval` from now.
fn periodic(interval: Duration) -> io::Result<OwnedFd> {
    let fd = timerfd_create(TimerfdClockId::Monotonic, TimerfdFlags::CLOEXEC)?;
    let every = timespec(interval);
    timerfd_settime(
        &fd,
        TimerfdTimerFlags::empty(),
        &Itimerspec {
            it_interval: every,
            it_value: every,
        },
    )?;
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ticks land on start + k × interval whatever each tick's work
    /// adds: the ticks the timer counts are the time passed over the
    /// interval, where a relative sleep would count fewer (it drifts by the
    /// work), and a thread that falls behind is told how many it missed.
    #[test]
    fn ticks_keep_to_absolute_deadlines_and_count_missed_ones() {
        let interval = Duration::from_millis(2);
        let start = Instant::now();
        let (mut ticker, _waker) = Ticker::start(interval);
        assert!(matches!(ticker, Ticker::Timer(_)), "a timerfd on Linux");
        let mut ticks = 0;
        let mut waits = 0;
        while start.elapsed() < Duration::from_millis(100) {
            // Work of a quarter interval per tick: a relative sleep would drift by it.
            std::thread::sleep(Duration::from_micros(500));
            ticks += ticker.wait(&|| false);
            waits += 1;
        }
        let due = (start.elapsed().as_secs_f64() / interval.as_secs_f64()).floor() as u64;
        assert!(ticks.abs_diff(due) <= 1, "{ticks} ticks, {due} due");
        assert!(waits <= ticks, "{waits} waits for {ticks} ticks");
        std::thread::sleep(Duration::from_millis(11));
        let missed = ticker.wait(&|| false);
        assert!(missed >= 5, "{missed}");
    }

    /// A wake ends a wait on a long interval at once.
    #[test]
    fn a_wake_ends_the_wait_at_once() {
        let (mut ticker, waker) = Ticker::start(Duration::from_secs(60));
        let thread = std::thread::current();
        let start = Instant::now();
        let waking = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            waker.wake(&thread);
        });
        ticker.wait(&|| false);
        assert!(start.elapsed() < Duration::from_secs(5));
        waking.join().expect("the waking thread");
    }
}
