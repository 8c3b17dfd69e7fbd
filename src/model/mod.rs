//! Models: where they come from (synthetic presets, local directories, the
//! hub), what is in them (architecture, tensor bytes) and how the worker loads
//! and runs them through candle-transformers' real loaders.
//!
//! The parent only resolves and inspects; loading happens in the worker.

pub mod arch;
pub mod backend;
pub mod config;
pub mod files;
pub mod fit;
pub mod gguf;
pub mod gguf_gen;
pub mod header;
pub mod hub;
pub mod inspect;
pub mod layout;
pub mod load;
pub mod net;
pub mod normalise;
pub mod preset;
pub mod source;
pub mod spec;
pub mod synth;

pub use arch::Architecture;
pub use inspect::ModelDir;
pub use load::LoadedModel;
