//! The built-in scenarios: the files in `scenarios/`, embedded in the binary so
//! `--scenario cpu-trim` works from any directory.

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
];

/// The built-in names, in `memrel list` order.
pub fn builtin_names() -> Vec<&'static str> {
    BUILTINS.iter().map(|(name, _)| *name).collect()
}

pub fn builtin_text(name: &str) -> Option<&'static str> {
    BUILTINS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}
