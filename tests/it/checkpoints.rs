//! Checkpoints as users bring them (issue 22): every decoder family's tiny
//! preset, config.json in the transformers 4.x and 5.x shapes, base models
//! and `*ForCausalLM` heads, and bad input (a missing key, a tensor of the
//! wrong shape, integer weights, an unsupported architecture, `model gen`
//! over a directory that holds files), each through the memrel binary.
//!
//! The `torch_` test writes real checkpoints with transformers'
//! `save_pretrained` (scripts/write_checkpoints.py) and is ignored without a
//! python that has torch: `MEMREL_TEST_PYTHON=<python> cargo test --release
//! --test it torch -- --ignored` (.ci/run runs it).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::common::*;

/// The decoder presets, one per family, and bert's.
const TINY: &[(&str, &str)] = &[
    ("bert-tiny", "bert"),
    ("llama-tiny", "llama"),
    ("qwen2-tiny", "qwen2"),
    ("qwen3-tiny", "qwen3"),
    ("mistral-tiny", "mistral"),
    ("gemma2-tiny", "gemma2"),
    ("gemma3-tiny", "gemma3"),
    ("phi3-tiny", "phi3"),
];

fn gen(preset: &str, dir: &Path) {
    run_ok(memrel().args(["model", "gen", preset]).arg(dir));
}

fn info(dir: &Path) -> std::process::Output {
    memrel()
        .args(["model", "info"])
        .arg(dir)
        .output()
        .expect("memrel starts")
}

fn info_ok(dir: &Path) -> String {
    text(&run_ok(memrel().args(["model", "info"]).arg(dir)).stdout)
}

/// `model info DIR` fails; its stderr, checked for a panic.
fn info_err(dir: &Path) -> String {
    let output = info(dir);
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    let err = stderr(&output);
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn read_config(dir: &Path) -> Value {
    read_json(&dir.join("config.json"))
}

fn write_config(dir: &Path, config: &Value) {
    std::fs::write(dir.join("config.json"), config.to_string()).expect("config written");
}

/// One run that loads, forwards and unloads each `(name, model line)` in
/// turn; returns the results directory (its runs must have completed).
fn load_and_forward(models: &[(String, String)]) -> (tempfile::TempDir, PathBuf) {
    let work = tempfile::tempdir().expect("temp dir");
    let mut toml = String::from(
        "description = \"checkpoints\"\nstrategies = [\"drop\"]\ncycles = 1\ntimeout_s = 600\n",
    );
    let mut steps = Vec::new();
    for (name, line) in models {
        toml += &format!("[models.{name}]\n{line}\n");
        for step in ["load", "forward", "unload"] {
            steps.push(format!("\"{step} {name}\""));
        }
    }
    toml += &format!(
        "[workload]\nsteps = [{}]\nbatch_size = 2\nseq_len = 8\nbaseline_ms = 20\nsettle_ms = 0\n",
        steps.join(", ")
    );
    let scenario = write_scenario(work.path(), "checkpoints", &toml);
    let out = work.path().join("out");
    let output = run(&scenario).out(&out).output();
    let dir = only_results_dir(&out, "checkpoints");
    let runs = runs(&dir);
    assert!(
        runs.iter().all(|r| r["status"] == "completed"),
        "{runs:?}\n{}",
        streams(&output)
    );
    let forwards: Vec<String> = csv_rows(&dir.join("events.csv"))
        .into_iter()
        .filter(|e| e["phase"] == "forward" && e["edge"] == "end")
        .map(|e| e["model"].clone())
        .collect();
    for (name, _) in models {
        assert!(
            forwards.contains(name),
            "no forward of {name}: {forwards:?}"
        );
    }
    (work, dir)
}

#[test]
fn every_tiny_preset_loads_and_forwards_and_lists_its_family() {
    let listed = text(&run_ok(memrel().arg("list")).stdout);
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut models = Vec::new();
    for (i, (preset, family)) in TINY.iter().enumerate() {
        let line = listed
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{preset} ")))
            .unwrap_or_else(|| panic!("{preset} is not in memrel list:\n{listed}"));
        assert_eq!(line.split_whitespace().nth(1), Some(*family), "{line}");
        let dir = tmp.path().join(preset);
        gen(preset, &dir);
        let shown = info_ok(&dir);
        assert!(
            shown.contains(&format!("architecture  {family}\n")),
            "{shown}"
        );
        models.push((
            format!("m{i}"),
            format!("path = {:?}", dir.to_str().expect("utf-8")),
        ));
    }
    load_and_forward(&models);
}

/// The tiny Qwen2 checkpoint with config.json as transformers 5.x writes it
/// (`rope_parameters`, `sliding_window: null`, `dtype`, `layer_types`), and
/// Gemma 3's (`gemma3_text`, per-attention rope parameters, no pattern).
#[test]
fn transformers_5x_configs_parse_and_load() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let qwen2 = tmp.path().join("qwen2");
    gen("qwen2-tiny", &qwen2);
    write_config(
        &qwen2,
        &json!({"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": null,
            "dtype": "bfloat16", "eos_token_id": null, "hidden_act": "silu", "hidden_size": 64,
            "initializer_range": 0.02, "intermediate_size": 128,
            "layer_types": ["full_attention", "full_attention"], "max_position_embeddings": 512,
            "max_window_layers": 28, "model_type": "qwen2", "num_attention_heads": 4,
            "num_hidden_layers": 2, "num_key_value_heads": 2, "pad_token_id": null,
            "rms_norm_eps": 1e-06, "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
            "sliding_window": null, "tie_word_embeddings": true, "transformers_version": "5.24.0",
            "use_cache": true, "use_sliding_window": false, "vocab_size": 1024}),
    );
    let gemma3 = tmp.path().join("gemma3");
    gen("gemma3-tiny", &gemma3);
    write_config(
        &gemma3,
        &json!({"architectures": ["Gemma3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
            "attn_logit_softcapping": null, "bos_token_id": 2, "dtype": "float32", "eos_token_id": 1,
            "final_logit_softcapping": null, "head_dim": 16, "hidden_activation": "gelu_pytorch_tanh",
            "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 128,
            "layer_types": ["sliding_attention", "full_attention"], "max_position_embeddings": 512,
            "model_type": "gemma3_text", "num_attention_heads": 4, "num_hidden_layers": 2,
            "num_key_value_heads": 2, "pad_token_id": 0, "query_pre_attn_scalar": 16,
            "rms_norm_eps": 1e-06,
            "rope_parameters": {"full_attention": {"rope_theta": 1000000.0, "rope_type": "default"},
                                "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}},
            "sliding_window": 32, "tie_word_embeddings": true, "transformers_version": "5.24.0",
            "use_bidirectional_attention": false, "use_cache": true, "vocab_size": 1024}),
    );
    for dir in [&qwen2, &gemma3] {
        info_ok(dir);
    }
    load_and_forward(&[
        (
            "q".into(),
            format!("path = {:?}", qwen2.to_str().expect("utf-8")),
        ),
        (
            "g".into(),
            format!("path = {:?}", gemma3.to_str().expect("utf-8")),
        ),
    ]);
}

#[test]
fn an_unsupported_architecture_lists_the_supported_ones() {
    let tmp = tempfile::tempdir().expect("temp dir");
    gen("llama-tiny", tmp.path());
    let mut config = read_config(tmp.path());
    config["model_type"] = json!("falcon");
    config["architectures"] = json!(["FalconForCausalLM"]);
    write_config(tmp.path(), &config);
    let err = info_err(tmp.path());
    assert!(err.contains("\"falcon\""), "{err}");
    for (_, family) in TINY {
        assert!(err.contains(family), "{family} is not listed: {err}");
    }
}

#[test]
fn model_gen_refuses_a_directory_that_holds_files_unless_forced() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("real-model");
    std::fs::create_dir(&dir).expect("dir");
    std::fs::write(dir.join("model.safetensors"), b"someone's weights").expect("file");
    let output = memrel()
        .args(["model", "gen", "bert-tiny"])
        .arg(&dir)
        .output()
        .expect("memrel starts");
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    let err = stderr(&output);
    assert!(err.contains(dir.to_str().expect("utf-8")), "{err}");
    assert!(err.contains("--force"), "{err}");
    assert_eq!(
        std::fs::read(dir.join("model.safetensors")).expect("still there"),
        b"someone's weights"
    );
    run_ok(
        memrel()
            .args(["model", "gen", "bert-tiny", "--force"])
            .arg(&dir),
    );
    assert!(info_ok(&dir).contains("architecture  bert"));
}

#[test]
fn a_missing_key_is_named_with_the_file() {
    let tmp = tempfile::tempdir().expect("temp dir");
    for (preset, key) in [
        ("llama-tiny", "num_hidden_layers"),
        ("gemma2-tiny", "head_dim"),
        ("phi3-tiny", "rms_norm_eps"),
        ("qwen3-tiny", "num_key_value_heads"),
    ] {
        let dir = tmp.path().join(preset);
        gen(preset, &dir);
        let mut config = read_config(&dir);
        config.as_object_mut().expect("object").remove(key);
        write_config(&dir, &config);
        let err = info_err(&dir);
        assert!(err.contains(key), "{preset}: {err}");
        assert!(
            err.contains(dir.join("config.json").to_str().expect("utf-8")),
            "{preset}: {err}"
        );
    }
}

#[test]
fn a_tensor_that_does_not_fit_the_config_is_named_with_both_shapes() {
    let tmp = tempfile::tempdir().expect("temp dir");
    for preset in ["mistral-tiny", "gemma3-tiny", "phi3-tiny"] {
        let dir = tmp.path().join(preset);
        gen(preset, &dir);
        let mut config = read_config(&dir);
        config["intermediate_size"] = json!(96);
        write_config(&dir, &config);
        let err = info_err(&dir);
        let (tensor, shape, want) = if preset == "phi3-tiny" {
            (
                "model.layers.0.mlp.gate_up_proj.weight",
                "[256, 64]",
                "[192, 64]",
            )
        } else {
            (
                "model.layers.0.mlp.gate_proj.weight",
                "[128, 64]",
                "[96, 64]",
            )
        };
        for part in [tensor, shape, want, "model.safetensors"] {
            assert!(err.contains(part), "{preset}: {part} missing from {err}");
        }
    }
}

#[test]
fn integer_weights_are_refused() {
    let tmp = tempfile::tempdir().expect("temp dir");
    gen("llama-tiny", tmp.path());
    let path = tmp.path().join("model.safetensors");
    let bytes = std::fs::read(&path).expect("weights");
    let st = safetensors::SafeTensors::deserialize(&bytes).expect("safetensors");
    let ints = vec![0u8; 64 * 4];
    let mut views = HashMap::new();
    for name in st.names() {
        let t = st.tensor(name).expect("tensor");
        let view = if name == "model.norm.weight" {
            safetensors::tensor::TensorView::new(safetensors::Dtype::I32, vec![64], &ints)
        } else {
            safetensors::tensor::TensorView::new(t.dtype(), t.shape().to_vec(), t.data())
        };
        views.insert(name.to_string(), view.expect("view"));
    }
    let rewritten = safetensors::serialize(views, None).expect("serialize");
    std::fs::write(&path, rewritten).expect("rewrite");
    let err = info_err(tmp.path());
    for part in ["model.norm.weight", "I32", "float"] {
        assert!(err.contains(part), "{part} missing from {err}");
    }
}

#[test]
#[ignore = "needs torch and transformers: MEMREL_TEST_PYTHON=<python> cargo test --release --test it torch -- --ignored (CI runs it)"]
fn torch_checkpoints_of_every_family_load_and_forward() {
    let python = torch_python();
    let tmp = tempfile::tempdir().expect("temp dir");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/write_checkpoints.py");
    let output = std::process::Command::new(&python)
        .arg(&script)
        .arg(tmp.path())
        .output()
        .expect("python starts");
    assert!(output.status.success(), "{}", streams(&output));
    let dirs: Vec<PathBuf> = text(&output.stdout).lines().map(PathBuf::from).collect();
    // 7 families × (base f32, base bf16 sharded, causal f32, causal f32 tied,
    // causal bf16, causal f16 sharded tied).
    assert_eq!(dirs.len(), 7 * 6, "{}", streams(&output));
    let mut models = Vec::new();
    for (i, dir) in dirs.iter().enumerate() {
        let name = dir.file_name().and_then(|n| n.to_str()).expect("name");
        let family = name.split('-').next().expect("family");
        let shown = info_ok(dir);
        assert!(
            shown.contains(&format!("architecture  {family}\n")),
            "{name}: {shown}"
        );
        let prefix = if name.contains("-base-") {
            "(none)"
        } else {
            "model."
        };
        assert!(
            shown.contains(&format!("name prefix   {prefix}\n")),
            "{name}: {shown}"
        );
        if name.contains("sharded") {
            assert!(dir.join("model.safetensors.index.json").is_file(), "{name}");
        }
        models.push((
            format!("m{i}"),
            format!("path = {:?}", dir.to_str().expect("utf-8")),
        ));
        eprintln!("{name}: model info ok");
    }
    load_and_forward(&models);
    for dir in &dirs {
        eprintln!("{}: loaded and forwarded", dir.display());
    }
}

/// Issue 36: a config.json that does not fit its weights (more layers than
/// they hold, another hidden size, vocabulary or head count), for every
/// family: exit 2, no panic, the tensor named with its shape and the
/// expected one. llama's loader builds its blocks with `unwrap()`, so its
/// layers and blocks are checked before it runs (`model::fit`).
#[test]
fn every_family_names_the_tensor_a_config_that_does_not_fit_its_weights_misses() {
    let tmp = tempfile::tempdir().expect("temp dir");
    for (preset, family) in TINY {
        let bert = *family == "bert";
        let embedding = if bert {
            "bert.embeddings.word_embeddings.weight"
        } else {
            "model.embed_tokens.weight"
        };
        let layer2 = if bert {
            "bert.encoder.layer.2."
        } else {
            "model.layers.2."
        };
        let cases: [(&str, Value, Vec<&str>); 4] = [
            (
                "num_hidden_layers",
                json!(3),
                vec![
                    "num_hidden_layers = 3",
                    "hold 2 layers",
                    layer2,
                    "expected shape [",
                ],
            ),
            (
                "hidden_size",
                json!(if bert { 192 } else { 96 }),
                vec![embedding, "has shape [", "(expected ["],
            ),
            (
                "vocab_size",
                json!(2048),
                vec![embedding, "has shape [", "(expected [2048, "],
            ),
            // bert's head count shapes no tensor (every head count that
            // divides the hidden size loads): one that does not is refused.
            if bert {
                (
                    "num_attention_heads",
                    json!(3),
                    vec!["hidden_size 128 is not a multiple of num_attention_heads 3"],
                )
            } else {
                (
                    "num_attention_heads",
                    json!(8),
                    vec![
                        "model.layers.0.self_attn.",
                        "has shape [",
                        "config.json implies [",
                    ],
                )
            },
        ];
        for (key, value, wanted) in cases {
            let dir = tmp.path().join(format!("{preset}-{key}"));
            gen(preset, &dir);
            let mut config = read_config(&dir);
            config[key] = value.clone();
            if key == "num_hidden_layers" {
                if let Some(types) = config["layer_types"].as_array().cloned() {
                    let three: Vec<Value> = types.iter().cycle().take(3).cloned().collect();
                    config["layer_types"] = json!(three);
                }
            }
            write_config(&dir, &config);
            let err = info_err(&dir);
            assert!(
                err.contains(dir.to_str().expect("utf-8")),
                "{preset} {key}={value}: the directory is not named: {err}"
            );
            for part in wanted {
                assert!(
                    err.contains(part),
                    "{preset} {key}={value}: {part:?} missing from {err}"
                );
            }
        }
    }
}

/// The case issue 36 found: llama's loader panicked (exit 101) on a config
/// with more layers than the weights; `run --model` now stops at exit 2.
#[test]
fn run_model_with_more_layers_than_the_weights_exits_2_without_a_panic() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("llama");
    gen("llama-tiny", &dir);
    let mut config = read_config(&dir);
    config["num_hidden_layers"] = json!(4);
    config["layer_types"] = json!(vec!["full_attention"; 4]);
    write_config(&dir, &config);
    let output = memrel()
        .args(["run", "--model"])
        .arg(&dir)
        .arg("--out")
        .arg(tmp.path().join("out"))
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("memrel starts");
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    let err = stderr(&output);
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains("no tensor model.layers.2.self_attn.q_proj.weight (expected shape [64, 64]"),
        "{err}"
    );
}
