//! The preloaded-allocator strategies and `respawn`, end to end on ci-smoke:
//! each allocator really serves the worker's malloc (its took-effect checks
//! pass and runs.json names it), none leaks from memrel's environment, and a
//! missing library is an error that names its Debian package.
//!
//! Needs the Debian packages libjemalloc2, libtcmalloc-minimal4 and
//! libmimalloc2.0 (`scripts/test` installs them); without them these tests
//! fail first thing, naming the missing library, its package and
//! `scripts/test` ([`needs_allocators`]), never skip.

use crate::common::{memrel, run, run_scenario, runs_json, stderr};

/// Each preloaded allocator's library file and its Debian package.
const LIBRARIES: &[(&str, &str)] = &[
    ("libjemalloc.so.2", "libjemalloc2"),
    ("libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"),
    ("libmimalloc.so.2", "libmimalloc2.0"),
];

/// The path of `file` in the folders memrel searches by default (the
/// machine's multiarch ones first), if it is there.
fn library(file: &str) -> Option<std::path::PathBuf> {
    memrel::strategy::system_library_dirs()
        .iter()
        .map(|d| d.join(file))
        .find(|p| p.is_file())
}

/// Fails the calling test, naming what is missing and how to get it, unless
/// every allocator library is installed; returns the jemalloc library's path.
pub(crate) fn needs_allocators() -> std::path::PathBuf {
    let missing: Vec<&(&str, &str)> = LIBRARIES
        .iter()
        .filter(|(f, _)| library(f).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "this test needs the allocator libraries {} (Debian packages {}): run the tests with \
         scripts/test, which installs them, or `apt-get install {}`",
        missing
            .iter()
            .map(|(f, _)| *f)
            .collect::<Vec<_>>()
            .join(", "),
        missing
            .iter()
            .map(|(_, p)| *p)
            .collect::<Vec<_>>()
            .join(", "),
        LIBRARIES
            .iter()
            .map(|(_, p)| *p)
            .collect::<Vec<_>>()
            .join(" "),
    );
    library(LIBRARIES[0].0).expect("checked above")
}

/// Every preloaded-allocator strategy with the allocator it must report.
const PRELOADED: &[(&str, &str)] = &[
    ("jemalloc", "jemalloc"),
    ("jemalloc-decay0", "jemalloc"),
    ("jemalloc-bg-thread", "jemalloc"),
    ("jemalloc-purge", "jemalloc"),
    ("tcmalloc", "tcmalloc"),
    ("tcmalloc-release-rate", "tcmalloc"),
    ("tcmalloc-aggressive", "tcmalloc"),
    ("tcmalloc-release", "tcmalloc"),
    ("mimalloc", "mimalloc"),
    ("mimalloc-purge0", "mimalloc"),
    ("mimalloc-collect", "mimalloc"),
];

#[test]
fn every_allocator_strategy_takes_effect_on_ci_smoke() {
    needs_allocators();
    let strategies: Vec<&str> = PRELOADED.iter().map(|(s, _)| *s).collect();
    let (_out, dir, _) = run_scenario(memrel(), "ci-smoke", &strategies);
    let runs = runs_json(&dir);
    let runs = runs["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), PRELOADED.len());
    for (run, (strategy, allocator)) in runs.iter().zip(PRELOADED) {
        assert_eq!(run["strategy"], *strategy);
        assert_eq!(run["status"], "completed", "{run}");
        assert_eq!(run["allocator"]["name"], *allocator, "{strategy}: {run}");
        assert_eq!(run["allocator"]["mapped"], true, "{strategy}");
        let library = run["allocator"]["library"].as_str().expect("library");
        assert!(library.contains(allocator), "{strategy}: {library}");
        let checks = run["checks"].as_array().expect("checks");
        let took_effect = checks
            .iter()
            .find(|c| c["name"] == format!("allocator {allocator}"))
            .unwrap_or_else(|| panic!("{strategy} has no allocator check: {checks:?}"));
        assert_eq!(took_effect["ok"], true, "{strategy}: {took_effect}");
        assert!(
            checks.iter().all(|c| c["ok"] == true),
            "{strategy}: {checks:?}"
        );
    }
    // The tuned settings read back as set (the checks above passed; here the values).
    let settings = |name: &str| {
        let run = runs.iter().find(|r| r["strategy"] == name).expect("run");
        run["allocator"]["settings"].clone()
    };
    assert_eq!(settings("jemalloc")["opt.dirty_decay_ms"], "10000");
    assert_eq!(settings("jemalloc-decay0")["opt.dirty_decay_ms"], "0");
    assert_eq!(settings("jemalloc-bg-thread")["background_thread"], "true");
    assert_eq!(settings("tcmalloc")["release_rate"], "1");
    assert_eq!(settings("tcmalloc-release-rate")["release_rate"], "10");
    assert_eq!(
        settings("tcmalloc-aggressive")["aggressive_memory_decommit"],
        "1"
    );
    assert_ne!(settings("mimalloc")["purge_delay"], "0");
    assert_eq!(settings("mimalloc-purge0")["purge_delay"], "0");
    // The forced releases ran the allocator's own call, timed in the release note.
    let events = std::fs::read_to_string(dir.join("events.csv")).expect("events.csv");
    for call in [
        "arena.4096.purge",
        "MallocExtension_ReleaseFreeMemory()",
        "mi_collect(true)",
    ] {
        assert!(events.contains(call), "no release note with {call}");
    }
}

#[test]
fn an_allocator_preloaded_in_memrels_environment_is_ignored_and_said() {
    // A real preload in memrel's own environment.
    let jemalloc = needs_allocators();
    let mut command = memrel();
    command
        .env("LD_PRELOAD", &jemalloc)
        .env("MALLOC_CONF", "dirty_decay_ms:0");
    let (_out, dir, output) = run_scenario(command, "ci-smoke", &["drop"]);
    let said = stderr(&output);
    assert!(
        said.contains("ignoring LD_PRELOAD=") && said.contains("MALLOC_CONF=dirty_decay_ms:0"),
        "{said}"
    );
    let runs = runs_json(&dir);
    let run = &runs["runs"][0];
    assert_eq!(run["allocator"]["name"], "glibc", "{run}");
    let ignored = run["ignored_env"].as_array().expect("ignored_env");
    assert!(
        ignored
            .iter()
            .any(|v| v.as_str().is_some_and(|v| v.starts_with("LD_PRELOAD="))),
        "{ignored:?}"
    );
}

#[test]
fn a_hidden_allocator_library_is_an_error_naming_its_debian_package() {
    let out = tempfile::tempdir().expect("tempdir");
    let empty = tempfile::tempdir().expect("tempdir");
    for (strategy, package) in [
        ("tcmalloc", "libtcmalloc-minimal4"),
        ("jemalloc-purge", "libjemalloc2"),
        ("mimalloc-collect", "libmimalloc2.0"),
    ] {
        let output = run("ci-smoke")
            .strategy(strategy)
            .out(out.path())
            .env("MEMREL_ALLOCATOR_PATH", empty.path())
            .output();
        assert_eq!(output.status.code(), Some(2), "{strategy}");
        let said = stderr(&output);
        assert!(
            said.contains(&format!("apt-get install {package}")) && said.contains(strategy),
            "{said}"
        );
        assert!(!said.contains("panicked"), "{said}");
    }
    // Nothing ran: no results directory was made.
    assert!(!out.path().join("ci-smoke").exists());
}

#[test]
fn respawn_ends_the_worker_at_each_release_and_gives_everything_back() {
    let (_out, dir, _) = run_scenario(memrel(), "ci-smoke", &["respawn"]);
    let runs = runs_json(&dir);
    let run = &runs["runs"][0];
    assert_eq!(run["status"], "completed", "{run}");
    // ci-smoke has 3 cycles, each with one release: three new processes.
    let pids = run["respawned_pids"].as_array().expect("respawned_pids");
    assert_eq!(pids.len(), 3, "{run}");
    assert!(pids.iter().all(|p| p != &run["pid"]));
    let summary = crate::common::summary(&dir);
    let host = &summary["strategies"][0]["resources"][0];
    assert_eq!(host["cycles_retaining"], 0, "{host}");
    // Each release (exit + new process) is timed by the parent's clock, and
    // the time until the next model is ready includes it: cycle by cycle.
    let cycles = summary["runs"][0]["cycles"].as_array().expect("cycles");
    assert_eq!(cycles.len(), 3);
    for (i, cycle) in cycles.iter().enumerate() {
        let release_s = cycle["release_action_s"].as_f64().expect("release timed");
        assert!(release_s > 0.0, "{cycle}");
        if i + 1 < cycles.len() {
            let ready_s = cycle["ready_s"].as_f64().expect("ready");
            assert!(ready_s > release_s, "{cycle}");
        } else {
            assert!(cycle.get("ready_s").is_none(), "no next cycle: {cycle}");
        }
    }
}
