//! One thin adapter per subcommand: options in, one call, outcome out. What
//! they share lives outside: running runs in `plan`, results directories in
//! `results`; no command calls into another command's module.

pub mod calibrate;
pub mod check;
pub mod compare;
pub mod exec;
pub mod list;
pub mod model;
pub mod report;
pub mod run;
