//! Every integration test, in one test binary. Each `tests/*.rs` or
//! `tests/*/main.rs` would be a binary of its own, each linking memrel and its
//! dependencies again; one binary links once, and its modules share one
//! helper module, `common`, instead of each keeping its own copy of how to
//! start memrel, run it into a temp dir or read runs.json.
//!
//! Run one module with `cargo test --release --test it run::` (or
//! `faults::`, `cli::`, `compare::`, `gate::`, `can_fail::`, `hostile::`, `cuda_cli::`, `program::`,
//! `report::`, `rerun::`, `attach::`, `exec_unmarked::`, `exec_io::`, `fake::`,
//! `calibrate::`, `cgroup::`, `model_arg::`, `shm::`,
//! `checkpoints::`, `settle::`, `sleep::`, `pytest_plugin::`, `page_cache::`, `gpus::`, `launcher::`,
//! `peaks::`, `matrix::`, `drive::`, `python_module::`, `advise::`, `light::`, `readme::`,
//! `trace_allocations::`, `openmetrics::`, `examples::`, `alone::`).

mod common;

mod advise;
mod alone;
mod attach;
mod baseline;
mod calibrate;
mod can_fail;
mod cgroup;
mod checkpoints;
mod cli;
mod compare;
mod cuda_cli;
mod drive;
mod examples;
mod exec_io;
mod exec_unmarked;
mod fake;
mod fake_nvml;
mod faults;
mod gate;
mod gguf;
mod gpu;
mod gpus;
mod hostile;
mod jax;
mod launcher;
mod light;
mod machine;
mod mappings;
mod matrix;
mod mlserver;
mod model_arg;
mod openmetrics;
mod ort;
mod page_cache;
mod peaks;
mod program;
mod pytest_plugin;
mod python_module;
mod readme;
mod report;
mod rerun;
mod run;
mod settle;
mod shm;
mod sleep;
mod trace_allocations;
mod views;
mod watch;
mod watch_disk;
mod watch_servers;
mod why_chart;
