//! The model families memrel loads (scripts/vendor-candle-transformers).
pub mod bert;
pub mod gemma2;
pub mod gemma3;
pub mod llama;
pub mod mistral;
pub mod phi3;
pub mod qwen2;
pub mod qwen3;
pub mod quantized_llama;
pub mod with_tracing;
