//! `memrel attach PID`: measuring a process memrel did not start (a server,
//! a notebook kernel, a test run) and its descendants, with phases marked
//! from outside it, into a results directory of the same shape as a run's.
//!
//! Parts: `target` (which process, may memrel read it, has it ended),
//! `live` (how `memrel mark DIR PHASE` reaches the live attach), `follow`
//! (a log file followed like `tail -F`, `--mark-on` rules), `header` (the
//! record header and scenario text), `watch` (wakes the loop as a mark or a
//! log line is written), `session` (the measuring loop). The
//! sampler, the record writer and the exporters are the ones every run uses.

pub mod follow;
pub mod header;
pub mod live;
pub mod live_metrics;
pub mod proxy;
pub mod segments;
pub mod session;
pub mod target;
pub mod watch;

/// The model files named with `--model-files`, whose page cache is read.
pub use crate::model::files::model_files;
