#[path = "../run/common.rs"]
mod common;
mod fake;
mod program;
