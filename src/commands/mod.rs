//! One module per subcommand: each builds typed options from the parsed
//! arguments, then drives the one-way flow (scenario → worker + sampler →
//! record → metrics → exporters).

pub mod check;
pub mod compare;
pub mod list;
pub mod model;
pub mod report;
pub mod run;
