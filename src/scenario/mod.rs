//! Scenarios: what one cycle of work is, on which device, for how many cycles,
//! under which strategies.
//!
//! A scenario is a TOML file (`scenarios/*.toml`, embedded in the binary as the
//! built-ins, or any path). This module turns text into a validated
//! [`Scenario`]; it runs nothing and knows nothing about processes.

mod builtin;
mod from_model;
mod header;
mod overrides;
mod parse;
mod types;

pub use builtin::{builtin_names, builtin_text, extract_scripts, BUILTINS, DEFAULT};
pub use from_model::for_model;
pub use overrides::Overrides;
pub use parse::{check_devices, load, parse_str, thresholds_table, ScenarioError};
pub use types::*;
