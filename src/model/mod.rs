//! Models: where they come from (synthetic presets, local directories, the
//! hub), what is in them (architecture, tensor bytes) and how the worker loads
//! and runs them through candle-transformers' real loaders.
//!
//! The parent only resolves and inspects; loading happens in the worker.

pub mod arch;
pub mod config;
pub mod header;
pub mod hub;
pub mod inspect;
pub mod preset;
pub mod source;
pub mod synth;

pub use arch::{Architecture, LoadedModel};
pub use inspect::ModelDir;
