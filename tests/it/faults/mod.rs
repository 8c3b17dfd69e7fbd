//! The fault suite: every case drives the real binary and checks that each
//! result file is complete, parseable and re-renderable by `memrel report`.
//! `channel`: a noisy stdout, a hung worker, a foreign kill, SIGINT/SIGTERM to
//! memrel; `limits`: 20 random SIGKILLs, out of memory, a full results disk,
//! two runs into one `--out`. Helpers in `crate::common`.

mod channel;
mod limits;
