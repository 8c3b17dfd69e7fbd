//! What a preset's checkpoint holds: the config.json transformers would
//! write for its shape, and every tensor by name, shape and fill, per family.
//!
//! bert-* and qwen2-* keep the transformers 4.x config they always had (their
//! files must not change under a cache); the newer decoder presets write the
//! 5.x shape (`rope_parameters`, `dtype`, `layer_types`, `sliding_window:
//! null`), so the normal tests read both. Writing files is `synth`'s job.

use serde_json::{json, Value};

use super::arch::Architecture;
use super::preset::{Fill, Preset, TensorSpec};

fn t(name: String, shape: &[usize], fill: Fill) -> TensorSpec {
    TensorSpec {
        name,
        shape: shape.to_vec(),
        fill,
    }
}

impl Preset {
    fn head_dim(&self) -> usize {
        self.hidden_size / self.heads
    }

    /// The transformers class `architectures` names.
    fn class(&self) -> &'static str {
        match self.architecture {
            Architecture::Bert => "BertForMaskedLM",
            Architecture::Qwen2 => "Qwen2ForCausalLM",
            Architecture::Llama => "LlamaForCausalLM",
            Architecture::Qwen3 => "Qwen3ForCausalLM",
            Architecture::Mistral => "MistralForCausalLM",
            Architecture::Gemma2 => "Gemma2ForCausalLM",
            Architecture::Gemma3 => "Gemma3ForCausalLM",
            Architecture::Phi3 => "Phi3ForCausalLM",
        }
    }

    /// Whether the checkpoint writes an `lm_head` of its own.
    pub fn untied_head(&self) -> bool {
        matches!(
            self.architecture,
            Architecture::Mistral | Architecture::Phi3
        )
    }

    /// The config.json a HuggingFace checkpoint of this shape would have.
    pub fn config_json(&self) -> Value {
        match self.architecture {
            Architecture::Bert => json!({
                "architectures": ["BertForMaskedLM"],
                "model_type": "bert",
                "vocab_size": self.vocab_size,
                "hidden_size": self.hidden_size,
                "num_hidden_layers": self.layers,
                "num_attention_heads": self.heads,
                "intermediate_size": self.intermediate_size,
                "hidden_act": "gelu",
                "hidden_dropout_prob": 0.1,
                "attention_probs_dropout_prob": 0.1,
                "max_position_embeddings": self.max_positions,
                "type_vocab_size": 2,
                "initializer_range": 0.02,
                "layer_norm_eps": 1e-12,
                "pad_token_id": 0,
                "position_embedding_type": "absolute",
                "use_cache": true,
                "classifier_dropout": null,
                "torch_dtype": "float32",
                "memrel_preset": self.name,
            }),
            Architecture::Qwen2 => json!({
                "architectures": ["Qwen2ForCausalLM"],
                "model_type": "qwen2",
                "vocab_size": self.vocab_size,
                "hidden_size": self.hidden_size,
                "intermediate_size": self.intermediate_size,
                "num_hidden_layers": self.layers,
                "num_attention_heads": self.heads,
                "num_key_value_heads": self.kv_heads,
                "max_position_embeddings": self.max_positions,
                "sliding_window": self.max_positions,
                "max_window_layers": self.layers,
                "tie_word_embeddings": true,
                "rope_theta": 10000.0,
                "rms_norm_eps": 1e-6,
                "use_sliding_window": false,
                "hidden_act": "silu",
                "torch_dtype": "float32",
                "memrel_preset": self.name,
            }),
            _ => self.decoder_config_v5(),
        }
    }

    /// A transformers 5.x config.json for the newer decoder families.
    fn decoder_config_v5(&self) -> Value {
        let gemma = matches!(
            self.architecture,
            Architecture::Gemma2 | Architecture::Gemma3
        );
        let window = 128;
        let mut config = json!({
            "architectures": [self.class()],
            "model_type": match self.architecture {
                Architecture::Gemma3 => "gemma3_text",
                other => other.as_str(),
            },
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.layers,
            "num_attention_heads": self.heads,
            "num_key_value_heads": self.kv_heads,
            "head_dim": self.head_dim(),
            "max_position_embeddings": self.max_positions,
            "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
            "rms_norm_eps": 1e-6,
            "attention_bias": false,
            "tie_word_embeddings": !self.untied_head(),
            "sliding_window": null,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "use_cache": true,
            "dtype": "float32",
            "transformers_version": "5.0.0",
            "memrel_preset": self.name,
        });
        let layer_types = |pattern: &[&'static str]| -> Vec<&'static str> {
            (0..self.layers)
                .map(|i| pattern[i % pattern.len()])
                .collect()
        };
        let extra = match self.architecture {
            Architecture::Qwen3 => json!({
                "hidden_act": "silu",
                "max_window_layers": self.layers,
                "use_sliding_window": false,
                "layer_types": layer_types(&["full_attention"]),
            }),
            Architecture::Phi3 => json!({
                "hidden_act": "silu",
                "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default", "partial_rotary_factor": 1.0},
                "original_max_position_embeddings": self.max_positions,
                "pad_token_id": 0,
            }),
            Architecture::Gemma2 => json!({
                "hidden_activation": "gelu_pytorch_tanh",
                "query_pre_attn_scalar": self.head_dim(),
                "attn_logit_softcapping": 50.0,
                "final_logit_softcapping": 30.0,
                "sliding_window": window,
                "layer_types": layer_types(&["sliding_attention", "full_attention"]),
            }),
            Architecture::Gemma3 => json!({
                "hidden_activation": "gelu_pytorch_tanh",
                "query_pre_attn_scalar": self.head_dim(),
                "attn_logit_softcapping": null,
                "final_logit_softcapping": null,
                "sliding_window": window,
                "layer_types": layer_types(&["sliding_attention", "full_attention"]),
                "rope_parameters": {
                    "full_attention": {"rope_theta": 1000000.0, "rope_type": "default"},
                    "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"},
                },
            }),
            _ => json!({"hidden_act": "silu"}),
        };
        if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
            for (key, value) in extra {
                config.insert(key.clone(), value.clone());
            }
            if gemma {
                config.insert("pad_token_id".into(), json!(0));
            }
        }
        config
    }

    /// Every tensor the checkpoint holds, in file order.
    pub fn tensors(&self) -> Vec<TensorSpec> {
        match self.architecture {
            Architecture::Bert => self.bert_tensors(),
            _ => self.decoder_tensors(),
        }
    }

    fn bert_tensors(&self) -> Vec<TensorSpec> {
        let h = self.hidden_size;
        let mut out = Vec::new();
        let p = "bert.";
        out.push(t(
            format!("{p}embeddings.word_embeddings.weight"),
            &[self.vocab_size, h],
            Fill::Noise,
        ));
        out.push(t(
            format!("{p}embeddings.position_embeddings.weight"),
            &[self.max_positions, h],
            Fill::Noise,
        ));
        out.push(t(
            format!("{p}embeddings.token_type_embeddings.weight"),
            &[2, h],
            Fill::Noise,
        ));
        out.push(t(
            format!("{p}embeddings.LayerNorm.gamma"),
            &[h],
            Fill::Ones,
        ));
        out.push(t(
            format!("{p}embeddings.LayerNorm.beta"),
            &[h],
            Fill::Zeros,
        ));
        for i in 0..self.layers {
            let l = format!("{p}encoder.layer.{i}");
            for part in ["query", "key", "value"] {
                out.push(t(
                    format!("{l}.attention.self.{part}.weight"),
                    &[h, h],
                    Fill::Noise,
                ));
                out.push(t(
                    format!("{l}.attention.self.{part}.bias"),
                    &[h],
                    Fill::Noise,
                ));
            }
            out.push(t(
                format!("{l}.attention.output.dense.weight"),
                &[h, h],
                Fill::Noise,
            ));
            out.push(t(
                format!("{l}.attention.output.dense.bias"),
                &[h],
                Fill::Noise,
            ));
            out.push(t(
                format!("{l}.attention.output.LayerNorm.gamma"),
                &[h],
                Fill::Ones,
            ));
            out.push(t(
                format!("{l}.attention.output.LayerNorm.beta"),
                &[h],
                Fill::Zeros,
            ));
            out.push(t(
                format!("{l}.intermediate.dense.weight"),
                &[self.intermediate_size, h],
                Fill::Noise,
            ));
            out.push(t(
                format!("{l}.intermediate.dense.bias"),
                &[self.intermediate_size],
                Fill::Noise,
            ));
            out.push(t(
                format!("{l}.output.dense.weight"),
                &[h, self.intermediate_size],
                Fill::Noise,
            ));
            out.push(t(format!("{l}.output.dense.bias"), &[h], Fill::Noise));
            out.push(t(format!("{l}.output.LayerNorm.gamma"), &[h], Fill::Ones));
            out.push(t(format!("{l}.output.LayerNorm.beta"), &[h], Fill::Zeros));
        }
        out
    }

    /// A decoder's tensors as its `*ForCausalLM` checkpoint names them.
    fn decoder_tensors(&self) -> Vec<TensorSpec> {
        let arch = self.architecture;
        let (h, inter, hd) = (self.hidden_size, self.intermediate_size, self.head_dim());
        let q = self.heads * hd;
        let kv = self.kv_heads * hd;
        let gemma = matches!(arch, Architecture::Gemma2 | Architecture::Gemma3);
        let qk_norms = matches!(arch, Architecture::Qwen3 | Architecture::Gemma3);
        let mut out = vec![t(
            "model.embed_tokens.weight".into(),
            &[self.vocab_size, h],
            Fill::Noise,
        )];
        for i in 0..self.layers {
            let l = format!("model.layers.{i}");
            let a = format!("{l}.self_attn");
            if arch == Architecture::Phi3 {
                out.push(t(
                    format!("{a}.qkv_proj.weight"),
                    &[q + 2 * kv, h],
                    Fill::Noise,
                ));
            } else {
                for (part, rows) in [("q", q), ("k", kv), ("v", kv)] {
                    out.push(t(
                        format!("{a}.{part}_proj.weight"),
                        &[rows, h],
                        Fill::Noise,
                    ));
                    if arch == Architecture::Qwen2 {
                        out.push(t(format!("{a}.{part}_proj.bias"), &[rows], Fill::Noise));
                    }
                }
            }
            out.push(t(format!("{a}.o_proj.weight"), &[h, q], Fill::Noise));
            if qk_norms {
                out.push(t(format!("{a}.q_norm.weight"), &[hd], Fill::Ones));
                out.push(t(format!("{a}.k_norm.weight"), &[hd], Fill::Ones));
            }
            if arch == Architecture::Phi3 {
                out.push(t(
                    format!("{l}.mlp.gate_up_proj.weight"),
                    &[2 * inter, h],
                    Fill::Noise,
                ));
            } else {
                out.push(t(
                    format!("{l}.mlp.gate_proj.weight"),
                    &[inter, h],
                    Fill::Noise,
                ));
                out.push(t(
                    format!("{l}.mlp.up_proj.weight"),
                    &[inter, h],
                    Fill::Noise,
                ));
            }
            out.push(t(
                format!("{l}.mlp.down_proj.weight"),
                &[h, inter],
                Fill::Noise,
            ));
            // Gemma's norms scale by 1 + weight: zeros are its identity.
            let norm = if gemma { Fill::Zeros } else { Fill::Ones };
            out.push(t(format!("{l}.input_layernorm.weight"), &[h], norm));
            out.push(t(
                format!("{l}.post_attention_layernorm.weight"),
                &[h],
                norm,
            ));
            if gemma {
                for name in ["pre_feedforward_layernorm", "post_feedforward_layernorm"] {
                    out.push(t(format!("{l}.{name}.weight"), &[h], norm));
                }
            }
        }
        let norm = if gemma { Fill::Zeros } else { Fill::Ones };
        out.push(t("model.norm.weight".into(), &[h], norm));
        if self.untied_head() {
            out.push(t(
                "lm_head.weight".into(),
                &[self.vocab_size, h],
                Fill::Noise,
            ));
        }
        out
    }
}
