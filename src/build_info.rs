//! What memrel was built from, recorded in every run's header next to its
//! version so a number can be traced to the code that measured it.
//! `build.rs` captures the commit; this module only exposes it.

/// The git commit memrel was built from (12 hex digits), or `unknown` for
/// a build outside git.
pub const COMMIT: &str = env!("MEMREL_COMMIT");
