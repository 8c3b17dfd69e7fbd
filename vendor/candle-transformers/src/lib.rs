//! candle-transformers 0.11.1, the families memrel loads; written by
//! scripts/vendor-candle-transformers from the published crate (do not edit).
pub mod models;
pub mod quantized_nn;
pub mod quantized_var_builder;
pub mod utils;
