//! End-to-end tests of `memrel run`, `list` and `model` through the real
//! binary: real worker processes, real /proc readings, real candle loaders.
//! One test binary with modules keeps link time down.

mod common;

mod allocators;
mod bad_input;
mod measurement;
mod models;
