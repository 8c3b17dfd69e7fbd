//! Model sources: synthetic presets, checkpoints laid out like real published
//! ones (other name prefixes, weight/bias LayerNorm names, sharded files), and
//! the hub cache read offline through hf-hub.

use std::collections::HashMap;
use std::path::Path;

use safetensors::tensor::TensorView;

use crate::common::*;

fn gen(preset: &str, dir: &Path) {
    run_ok(memrel().args(["model", "gen", preset]).arg(dir));
}

/// Rewrites `model.safetensors` in `dir` with renamed tensors, split over `shards` files.
fn rewrite(dir: &Path, rename: impl Fn(&str) -> String, shards: usize) {
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut names: Vec<String> = st.names().into_iter().map(str::to_string).collect();
    names.sort();
    std::fs::remove_file(dir.join("model.safetensors")).unwrap();
    let per = names.len().div_ceil(shards);
    let mut weight_map = serde_json::Map::new();
    for (i, chunk) in names.chunks(per).enumerate() {
        let file = if shards == 1 {
            "model.safetensors".to_string()
        } else {
            format!("model-{:05}-of-{shards:05}.safetensors", i + 1)
        };
        let mut views: HashMap<String, TensorView> = HashMap::new();
        for name in chunk {
            let t = st.tensor(name).unwrap();
            let new = rename(name);
            weight_map.insert(new.clone(), serde_json::json!(file));
            views.insert(
                new,
                TensorView::new(t.dtype(), t.shape().to_vec(), t.data()).unwrap(),
            );
        }
        safetensors::serialize_to_file(views, None, &dir.join(&file)).unwrap();
    }
    if shards > 1 {
        let index = serde_json::json!({"metadata": {}, "weight_map": weight_map});
        std::fs::write(dir.join("model.safetensors.index.json"), index.to_string()).unwrap();
    }
}

fn run_on_dir(model_dir: &Path, forward: bool) -> serde_json::Value {
    let work = tempfile::tempdir().unwrap();
    let steps = if forward {
        r#"["load m", "forward m", "unload m", "release"]"#
    } else {
        r#"["load m", "unload m"]"#
    };
    let scenario = write_scenario(
        work.path(),
        "dir",
        &format!(
            "description = \"x\"\nstrategies = [\"malloc-trim\"]\ncycles = 1\n[models.m]\npath = {:?}\n[workload]\nsteps = {steps}\nbatch_size = 1\nseq_len = 8\nbaseline_ms = 20\n",
            model_dir.to_str().unwrap()
        ),
    );
    let out = work.path().join("out");
    run(&scenario).out(&out).ok();
    summary(&only_results_dir(&out, "dir"))
}

#[test]
fn generated_model_is_a_real_huggingface_directory() {
    let dir = tempfile::tempdir().unwrap();
    gen("bert-tiny", dir.path());
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("config.json")).unwrap())
            .unwrap();
    assert_eq!(config["model_type"], "bert");
    let info = run_ok(memrel().args(["model", "info"]).arg(dir.path()));
    let text = String::from_utf8_lossy(&info.stdout);
    assert!(text.contains("architecture  bert"), "{text}");
    assert!(text.contains("name prefix   bert."), "{text}");
    // Same preset, same bytes: the weights are seeded, not random.
    let again = tempfile::tempdir().unwrap();
    gen("bert-tiny", again.path());
    assert_eq!(
        std::fs::read(dir.path().join("model.safetensors")).unwrap(),
        std::fs::read(again.path().join("model.safetensors")).unwrap()
    );
}

#[test]
fn bert_without_prefix_and_with_weight_bias_layernorm_names_loads_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    gen("bert-tiny", dir.path());
    rewrite(
        dir.path(),
        |n| {
            n.trim_start_matches("bert.")
                .replace("LayerNorm.gamma", "LayerNorm.weight")
                .replace("LayerNorm.beta", "LayerNorm.bias")
        },
        1,
    );
    let summary = run_on_dir(dir.path(), true);
    assert_eq!(summary["runs"][0]["status"], "completed", "{summary}");
}

#[test]
fn sharded_checkpoint_with_an_index_loads() {
    let dir = tempfile::tempdir().unwrap();
    gen("qwen2-tiny", dir.path());
    rewrite(dir.path(), |n| n.to_string(), 3);
    assert!(!dir.path().join("model.safetensors").exists());
    let info = run_ok(memrel().args(["model", "info"]).arg(dir.path()));
    assert!(String::from_utf8_lossy(&info.stdout).contains("model-00003-of-00003.safetensors"));
    let summary = run_on_dir(dir.path(), true);
    assert_eq!(summary["runs"][0]["status"], "completed", "{summary}");
}

#[test]
fn hub_model_in_the_local_cache_loads_offline() {
    let hf_home = tempfile::tempdir().unwrap();
    let sha = "0123456789abcdef0123456789abcdef01234567";
    let repo = hf_home
        .path()
        .join("hub")
        .join("models--memrel-test--tiny-bert");
    let snapshot = repo.join("snapshots").join(sha);
    gen("bert-tiny", &snapshot);
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs").join("main"), sha).unwrap();
    let work = tempfile::tempdir().unwrap();
    let scenario = write_scenario(
        work.path(),
        "hub",
        "description = \"x\"\nstrategies = [\"drop\"]\ncycles = 1\n[models.m]\nhub = \"memrel-test/tiny-bert\"\n[workload]\nsteps = [\"load m\", \"unload m\"]\nbaseline_ms = 20\n",
    );
    let out = work.path().join("out");
    run(&scenario).out(&out).env("HF_HOME", hf_home.path()).ok();
    let runs = runs_json(&only_results_dir(&out, "hub"));
    assert_eq!(
        runs["header"]["models"][0]["source"],
        "hub:memrel-test/tiny-bert@main"
    );
    assert!(runs["header"]["models"][0]["dir"]
        .as_str()
        .unwrap()
        .ends_with(sha));
}

#[test]
fn list_shows_every_strategy_scenario_and_preset() {
    let output = run_ok(memrel().args(["list", "--long"]));
    let text = String::from_utf8_lossy(&output.stdout);
    for name in [
        "drop",
        "malloc-trim",
        "trim-threshold-env",
        "mmap-threshold-env",
        "mallopt",
        "tcache-off",
        "arena-max-1",
        "cpu-drop",
        "cpu-trim",
        "cpu-trim-env",
        "cpu-load-only",
        "article-cpu",
        "bert-base",
        "qwen2-small",
    ] {
        assert!(text.contains(name), "{name} missing from memrel list");
    }
    assert!(text.contains("environment: MALLOC_TRIM_THRESHOLD_=-1"));
}
