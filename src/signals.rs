//! SIGINT (Ctrl-C) and SIGTERM to memrel while it measures: one flag every
//! loop polls (the orchestrator's, attach's and drive's), at the bottom of
//! the house so none of them borrows it from another.
//!
//! The first one only sets a flag: the orchestrator polls it, kills the
//! running worker's process group, reaps it and returns the run marked as
//! interrupted; `memrel run`/`compare` save it with everything measured
//! before, start no further run and exit 128 + the signal (130, 143). A second
//! one exits at once with that code; the worker then dies with memrel
//! (PR_SET_PDEATHSIG). signal-hook does the handler: no hand-written unsafe
//! signal code.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use anyhow::{Context, Result};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::flag;

/// The signal received (0: none), once [`install`] has run.
static RECEIVED: OnceLock<Arc<AtomicUsize>> = OnceLock::new();

/// Catches SIGINT and SIGTERM from now on (idempotent).
pub fn install() -> Result<()> {
    if RECEIVED.get().is_some() {
        return Ok(());
    }
    let received = Arc::new(AtomicUsize::new(0));
    let any = Arc::new(AtomicBool::new(false));
    for sig in [SIGINT, SIGTERM] {
        // Order matters: the shutdown checks the flag before this signal sets it,
        // so only a second signal exits at once.
        flag::register_conditional_shutdown(sig, exit_code(sig), Arc::clone(&any))
            .and_then(|_| flag::register(sig, Arc::clone(&any)))
            .and_then(|_| flag::register_usize(sig, Arc::clone(&received), sig as usize))
            .with_context(|| format!("cannot catch signal {sig} to stop workers cleanly"))?;
    }
    let _ = RECEIVED.set(received);
    Ok(())
}

/// The signal that asked memrel to stop, if any.
pub fn received() -> Option<i32> {
    let sig = RECEIVED.get()?.load(Ordering::SeqCst);
    i32::try_from(sig).ok().filter(|s| *s != 0)
}

/// The signal's name, for messages.
pub fn name(sig: i32) -> String {
    match sig {
        SIGINT => "SIGINT".to_string(),
        SIGTERM => "SIGTERM".to_string(),
        _ => format!("signal {sig}"),
    }
}

/// The shell's convention: 128 + the signal number (SIGINT 130, SIGTERM 143).
pub fn exit_code(sig: i32) -> i32 {
    128 + sig
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_shell() {
        assert_eq!(exit_code(SIGINT), 130);
        assert_eq!(exit_code(SIGTERM), 143);
    }
}
