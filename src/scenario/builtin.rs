//! The built-in scenarios: the files in `scenarios/`, embedded in the binary so
//! `--scenario cpu-trim` works from any directory, with the scripts the
//! program scenarios run.

use std::path::{Path, PathBuf};

/// The scenario `memrel run` runs when given none (and whose workload and
/// strategies `memrel run --model` applies to the model it is given).
pub const DEFAULT: &str = "cpu-trim";

/// (name, file text), in the order `memrel list` shows them.
pub const BUILTINS: &[(&str, &str)] = &[
    ("cpu-trim", include_str!("../../scenarios/cpu-trim.toml")),
    ("cpu-drop", include_str!("../../scenarios/cpu-drop.toml")),
    (
        "cpu-trim-env",
        include_str!("../../scenarios/cpu-trim-env.toml"),
    ),
    (
        "cpu-load-only",
        include_str!("../../scenarios/cpu-load-only.toml"),
    ),
    ("cpu-all", include_str!("../../scenarios/cpu-all.toml")),
    (
        "cpu-page-cache",
        include_str!("../../scenarios/cpu-page-cache.toml"),
    ),
    (
        "cpu-idle-release",
        include_str!("../../scenarios/cpu-idle-release.toml"),
    ),
    (
        "cpu-busy-release",
        include_str!("../../scenarios/cpu-busy-release.toml"),
    ),
    (
        "article-cpu",
        include_str!("../../scenarios/article-cpu.toml"),
    ),
    ("soak", include_str!("../../scenarios/soak.toml")),
    ("ci-smoke", include_str!("../../scenarios/ci-smoke.toml")),
    ("ci-gate", include_str!("../../scenarios/ci-gate.toml")),
    ("cuda-drop", include_str!("../../scenarios/cuda-drop.toml")),
    (
        "cuda-flush",
        include_str!("../../scenarios/cuda-flush.toml"),
    ),
    (
        "cuda-context",
        include_str!("../../scenarios/cuda-context.toml"),
    ),
    (
        "article-gpu",
        include_str!("../../scenarios/article-gpu.toml"),
    ),
    (
        "cuda-sleep",
        include_str!("../../scenarios/cuda-sleep.toml"),
    ),
    (
        "torch-cpu-article",
        include_str!("../../scenarios/torch-cpu-article.toml"),
    ),
    (
        "torch-cpu-article-copy",
        include_str!("../../scenarios/torch-cpu-article-copy.toml"),
    ),
    (
        "torch-cpu-training",
        include_str!("../../scenarios/torch-cpu-training.toml"),
    ),
    (
        "torch-gpu-article",
        include_str!("../../scenarios/torch-gpu-article.toml"),
    ),
    (
        "torch-gpu-accelerate",
        include_str!("../../scenarios/torch-gpu-accelerate.toml"),
    ),
    (
        "torch-gpu-training",
        include_str!("../../scenarios/torch-gpu-training.toml"),
    ),
    (
        "torch-gpu-sync",
        include_str!("../../scenarios/torch-gpu-sync.toml"),
    ),
    (
        "torch-gpu-sleep",
        include_str!("../../scenarios/torch-gpu-sleep.toml"),
    ),
    (
        "torch-gpu-tp",
        include_str!("../../scenarios/torch-gpu-tp.toml"),
    ),
    ("ort-cpu", include_str!("../../scenarios/ort-cpu.toml")),
    ("jax-cpu", include_str!("../../scenarios/jax-cpu.toml")),
    ("jax-gpu", include_str!("../../scenarios/jax-gpu.toml")),
];

/// The files the built-in program scenarios run, by their path under
/// `scenarios/` (where a command's relative paths start).
pub const SCRIPTS: &[(&str, &str)] = &[
    (
        "pytorch/_common.py",
        include_str!("../../scenarios/pytorch/_common.py"),
    ),
    (
        "pytorch/article_cpu.py",
        include_str!("../../scenarios/pytorch/article_cpu.py"),
    ),
    (
        "pytorch/article_gpu.py",
        include_str!("../../scenarios/pytorch/article_gpu.py"),
    ),
    (
        "pytorch/accelerate_release.py",
        include_str!("../../scenarios/pytorch/accelerate_release.py"),
    ),
    (
        "pytorch/training_cleanup.py",
        include_str!("../../scenarios/pytorch/training_cleanup.py"),
    ),
    (
        "pytorch/sync_visibility.py",
        include_str!("../../scenarios/pytorch/sync_visibility.py"),
    ),
    (
        "pytorch/sleep_wake.py",
        include_str!("../../scenarios/pytorch/sleep_wake.py"),
    ),
    (
        "pytorch/tensor_parallel.py",
        include_str!("../../scenarios/pytorch/tensor_parallel.py"),
    ),
    (
        "onnxruntime/ort_cpu.py",
        include_str!("../../scenarios/onnxruntime/ort_cpu.py"),
    ),
    (
        "jax/jax_weights.py",
        include_str!("../../scenarios/jax/jax_weights.py"),
    ),
];

/// Writes [`SCRIPTS`] under `cache/scenarios/<content hash>/` and returns
/// that directory: a built-in program scenario runs there, from any
/// directory and without a checkout.
pub fn extract_scripts(cache: &Path) -> anyhow::Result<PathBuf> {
    crate::fsutil::write_embedded(&cache.join("scenarios"), SCRIPTS)
}

/// The built-in names, in `memrel list` order.
pub fn builtin_names() -> Vec<&'static str> {
    BUILTINS.iter().map(|(name, _)| *name).collect()
}

pub fn builtin_text(name: &str) -> Option<&'static str> {
    BUILTINS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}
