//! End-to-end tests of `memrel run`, `list` and `model` through the real
//! binary: real worker processes, real /proc readings, real candle loaders.

pub(crate) mod allocators;
mod bad_input;
mod measurement;
mod models;
