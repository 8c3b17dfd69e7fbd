//! Brings a config.json of any transformers version to the one shape
//! candle-transformers' config types read (the 4.x shape).
//!
//! transformers 5.x writes `rope_parameters` (`rope_theta`, `rope_type`, and
//! for Gemma 3 one set per attention kind) instead of a top-level
//! `rope_theta`, `sliding_window: null` where a model has no window,
//! `layer_types` instead of Gemma 3's `sliding_window_pattern`, and `dtype`
//! instead of `torch_dtype` (which no loader reads). Only keys that are
//! missing are filled in: a key the file sets is never overwritten, so a 4.x
//! file passes through unchanged. It must not invent a value a loader needs
//! and the file does not imply: a key missing from both shapes stays missing,
//! and the typed parse names it.

use serde_json::{Map, Value};

use super::arch::Architecture;

/// The config as candle's type for `architecture` wants it.
pub fn normalise(architecture: Architecture, config: &Value) -> Value {
    let Some(object) = config.as_object() else {
        return config.clone();
    };
    let mut out = object.clone();
    let rope = object.get("rope_parameters").and_then(Value::as_object);
    if let Some(rope) = rope {
        let (global, local) = match (rope.get("full_attention"), rope.get("sliding_attention")) {
            // Gemma 3: one set for full attention, one for sliding-window layers.
            (Some(Value::Object(full)), local) => (full.clone(), local.and_then(Value::as_object)),
            _ => (rope.clone(), None),
        };
        fill(&mut out, "rope_theta", global.get("rope_theta"));
        fill(
            &mut out,
            "partial_rotary_factor",
            global.get("partial_rotary_factor"),
        );
        if let Some(local) = local {
            fill(&mut out, "rope_local_base_freq", local.get("rope_theta"));
        }
        let scaled = global
            .get("rope_type")
            .and_then(Value::as_str)
            .is_some_and(|t| t != "default");
        if scaled {
            fill(
                &mut out,
                "rope_scaling",
                Some(&Value::Object(global.clone())),
            );
        }
    }
    let no_window = matches!(out.get("sliding_window"), None | Some(Value::Null));
    // candle's qwen2 and gemma3 configs want a number: a model without a
    // window attends over every position it has.
    if no_window && matches!(architecture, Architecture::Qwen2 | Architecture::Gemma3) {
        out.remove("sliding_window");
        fill(
            &mut out,
            "sliding_window",
            object.get("max_position_embeddings"),
        );
    }
    if architecture == Architecture::Gemma3 {
        let pattern = object
            .get("_sliding_window_pattern")
            .cloned()
            .or_else(|| pattern_of(object.get("layer_types")?.as_array()?));
        fill(&mut out, "sliding_window_pattern", pattern.as_ref());
    }
    Value::Object(out)
}

/// Sets `key` to `value` where the file has no (or a null) `key`.
fn fill(out: &mut Map<String, Value>, key: &str, value: Option<&Value>) {
    let missing = matches!(out.get(key), None | Some(Value::Null));
    if let (true, Some(value)) = (missing, value) {
        out.insert(key.to_string(), value.clone());
    }
}

/// Gemma 3's `sliding_window_pattern` p (candle: layer i slides unless
/// `(i + 1) % p == 0`) from `layer_types`: the first full-attention layer's
/// position, or one past the last layer when every layer slides.
fn pattern_of(layer_types: &[Value]) -> Option<Value> {
    let first_full = layer_types
        .iter()
        .position(|t| t.as_str() == Some("full_attention"));
    Some(Value::from(first_full.unwrap_or(layer_types.len()) + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rope_parameters_give_rope_theta_and_a_null_window_gets_the_context_length() {
        let v5 = json!({"rope_parameters": {"rope_theta": 1e6, "rope_type": "default"},
                        "sliding_window": null, "max_position_embeddings": 4096});
        let out = normalise(Architecture::Qwen2, &v5);
        assert_eq!(out["rope_theta"], 1e6);
        assert_eq!(out["sliding_window"], 4096);
        assert!(out.get("rope_scaling").is_none());
        // Mistral's and Qwen 3's loaders read a missing window as none.
        assert_eq!(
            normalise(Architecture::Mistral, &v5)["sliding_window"],
            Value::Null
        );
    }

    #[test]
    fn a_4x_config_passes_through_unchanged() {
        let v4 = json!({"rope_theta": 5e5, "sliding_window": 128, "max_position_embeddings": 4096,
                        "rope_parameters": {"rope_theta": 1.0}});
        let out = normalise(Architecture::Qwen2, &v4);
        assert_eq!(out, v4);
    }

    #[test]
    fn gemma3_takes_both_thetas_and_its_pattern_from_layer_types() {
        let v5 = json!({
            "rope_parameters": {"full_attention": {"rope_theta": 1e6, "rope_type": "default"},
                                "sliding_attention": {"rope_theta": 1e4, "rope_type": "default"}},
            "layer_types": ["sliding_attention", "sliding_attention", "full_attention",
                            "sliding_attention", "sliding_attention", "full_attention"],
            "sliding_window": 512, "max_position_embeddings": 4096});
        let out = normalise(Architecture::Gemma3, &v5);
        assert_eq!(out["rope_theta"], 1e6);
        assert_eq!(out["rope_local_base_freq"], 1e4);
        assert_eq!(out["sliding_window_pattern"], 3);
        let all_sliding = json!({"layer_types": ["sliding_attention", "sliding_attention"]});
        assert_eq!(
            normalise(Architecture::Gemma3, &all_sliding)["sliding_window_pattern"],
            3
        );
    }

    #[test]
    fn a_scaled_rope_becomes_rope_scaling() {
        let v5 =
            json!({"rope_parameters": {"rope_theta": 5e5, "rope_type": "llama3", "factor": 8.0}});
        let out = normalise(Architecture::Llama, &v5);
        assert_eq!(out["rope_scaling"]["rope_type"], "llama3");
        assert_eq!(out["rope_scaling"]["factor"], 8.0);
    }
}
