//! memrel: measures whether, how fast and at what cost ML model memory goes
//! back to the system after a model is unloaded.
//!
//! The data flows one way: scenario → plan → worker (a child process: the
//! candle worker, the fake worker or any program) + sampler → run record →
//! metrics → exporters → gate. See README.md and each module's docs.

pub mod attach;
pub mod baseline;
pub mod build_info;
pub mod calibrate;
pub mod cgroup;
pub mod cli;
pub mod commands;
pub mod drive;
pub mod export;
pub mod fsutil;
pub mod gate;
pub mod hint;
pub mod host;
pub mod machine;
pub mod metrics;
pub mod model;
pub mod orchestrator;
pub mod plan;
pub mod protocol;
pub mod record;
pub mod results;
pub mod sampler;
pub mod scenario;
pub mod session;
pub mod signals;
pub mod stats;
pub mod strategy;
pub mod textutil;
pub mod worker;
