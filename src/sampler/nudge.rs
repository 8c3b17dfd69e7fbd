//! A reading asked for now, from another thread, and waited for: what holds
//! a program at its exit (`orchestrator::exit_stop`) uses it so that the
//! run's last sample is read while the program's memory is still there.
//!
//! The reading answers only if it began after it was asked for (a tick
//! already under way when the program stopped does not count), and a
//! sampler that has ended answers every wait at once with `false`.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::Thread;
use std::time::{Duration, Instant};

use super::tick::Waker;

/// Asks the sampler for a reading now (clone it to hand it on).
#[derive(Clone, Default)]
pub struct Nudge(Arc<Shared>);

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    answered: Condvar,
    /// The sampler's ticker and thread, once it runs (`attach`).
    wake: Mutex<Option<(Waker, Thread, Duration)>>,
}

#[derive(Default)]
struct State {
    /// Asked for and not yet begun.
    wanted: bool,
    /// Readings begun after an ask, and written.
    answers: u64,
    /// The sampler has ended: nothing more will be read.
    closed: bool,
}

impl Nudge {
    /// A nudge no sampler will answer (for a process nothing samples).
    pub fn ended() -> Nudge {
        let nudge = Nudge::default();
        nudge.close();
        nudge
    }

    /// Asks for a reading and waits at most `limit` for it; `true` when it
    /// was taken.
    pub fn read_now(&self, limit: Duration) -> bool {
        let Ok(mut state) = self.0.state.lock() else {
            return false;
        };
        if state.closed {
            return false;
        }
        let before = state.answers;
        state.wanted = true;
        if let Ok(wake) = self.0.wake.lock() {
            if let Some((waker, thread, interval)) = wake.as_ref() {
                waker.nudge(thread, *interval);
            }
        }
        let deadline = Instant::now() + limit;
        while state.answers == before && !state.closed {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = match self.0.answered.wait_timeout(state, left) {
                Ok((state, _)) => state,
                Err(_) => return false,
            };
        }
        state.answers != before
    }

    /// Whether a reading is asked for (the parked ticker's `stop`).
    pub(super) fn wanted(&self) -> bool {
        self.0.state.lock().map(|s| s.wanted).unwrap_or(false)
    }

    /// A reading begins: `true` when it answers an ask.
    pub(super) fn begin(&self) -> bool {
        self.0
            .state
            .lock()
            .map(|mut s| std::mem::take(&mut s.wanted))
            .unwrap_or(false)
    }

    /// The reading that [`Nudge::begin`] said answers an ask is written.
    pub(super) fn answer(&self) {
        if let Ok(mut state) = self.0.state.lock() {
            state.answers += 1;
        }
        self.0.answered.notify_all();
    }

    /// The sampler runs: its ticker can be woken.
    pub(super) fn attach(&self, waker: Waker, thread: Thread, interval: Duration) {
        if let Ok(mut wake) = self.0.wake.lock() {
            *wake = Some((waker, thread, interval));
        }
    }

    /// The sampler has ended, or no reading is wanted any more (memrel is
    /// stopping the process): every wait, now and later, ends at once.
    pub fn close(&self) {
        if let Ok(mut state) = self.0.state.lock() {
            state.closed = true;
        }
        self.0.answered.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ask_is_answered_only_by_a_reading_begun_after_it() {
        let nudge = Nudge::default();
        // A reading under way before the ask: it does not answer.
        assert!(!nudge.begin());
        let asking = {
            let nudge = nudge.clone();
            std::thread::spawn(move || nudge.read_now(Duration::from_secs(30)))
        };
        while !nudge.wanted() {
            std::thread::yield_now();
        }
        assert!(nudge.begin());
        nudge.answer();
        assert!(asking.join().expect("the asking thread"));
    }

    #[test]
    fn a_closed_sampler_answers_at_once_with_false() {
        let nudge = Nudge::default();
        nudge.close();
        assert!(!nudge.read_now(Duration::from_secs(30)));
    }

    #[test]
    fn an_unanswered_ask_gives_up_at_its_limit() {
        let nudge = Nudge::default();
        assert!(!nudge.read_now(Duration::from_millis(20)));
    }
}
