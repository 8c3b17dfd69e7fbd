//! The Python module's public calls as the docs show them (issue 36):
//! `memrel.baseline()` works without an argument, and every
//! `memrel.baseline(…)` written in the docs, the README, the sources, the
//! module and the example programs fits the signature the module defines
//! (read from `python/memrel/__init__.py`, not copied here).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::common::*;

/// Where `memrel.baseline(` calls are looked for, from the repository root.
const SCANNED: &[&str] = &[
    "README.md",
    "docs",
    "src",
    "python",
    "scenarios",
    "examples",
    "tests",
];

/// One parameter of a Python `def`: its name and whether it has a default.
#[derive(Debug)]
struct Param {
    name: String,
    optional: bool,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The parameters of `def baseline(…)` in the module.
fn baseline_signature() -> Vec<Param> {
    let module = std::fs::read_to_string(root().join("python/memrel/__init__.py"))
        .expect("the module is readable");
    let line = module
        .lines()
        .find(|l| l.starts_with("def baseline("))
        .expect("the module defines baseline");
    let inside = &line["def baseline(".len()..line.rfind(')').expect("a closing parenthesis")];
    split_args(inside)
        .into_iter()
        .map(|p| match p.split_once('=') {
            Some((name, _)) => Param {
                name: name.trim().to_string(),
                optional: true,
            },
            None => Param {
                name: p.trim().to_string(),
                optional: false,
            },
        })
        .collect()
}

/// Top-level comma-separated parts of an argument list (empty for none).
fn split_args(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut current = String::new();
    for c in text.chars() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parts.push(current);
    parts
        .into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

/// Whether a call's arguments fit the parameters; the reason where not.
fn fits(args: &[String], params: &[Param]) -> Result<(), String> {
    let mut given = vec![false; params.len()];
    let mut keywords = false;
    for arg in args {
        let keyword = arg
            .split_once('=')
            .filter(|(name, value)| {
                let name = name.trim();
                !value.starts_with('=')
                    && !name.is_empty()
                    && name.chars().all(|c| c.is_alphanumeric() || c == '_')
            })
            .map(|(name, _)| name.trim());
        match keyword {
            Some(name) => {
                keywords = true;
                let i = params
                    .iter()
                    .position(|p| p.name == name)
                    .ok_or(format!("no parameter named {name}"))?;
                given[i] = true;
            }
            None if keywords => return Err("a positional argument after a keyword".into()),
            None => {
                let i = given
                    .iter()
                    .position(|g| !g)
                    .filter(|&i| i < params.len())
                    .ok_or("more arguments than parameters")?;
                given[i] = true;
            }
        }
    }
    match params.iter().zip(&given).find(|(p, g)| !p.optional && !**g) {
        Some((p, _)) => Err(format!("{} is required", p.name)),
        None => Ok(()),
    }
}

/// Every file under `path` (itself where it is a file), build outputs aside.
fn files_under(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_file() {
        out.push(path.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    for entry in entries.flatten() {
        let p = entry.path();
        let name = entry.file_name();
        if name == "target" || name == "__pycache__" || name == ".git" {
            continue;
        }
        files_under(&p, out);
    }
}

#[test]
fn every_baseline_call_in_the_repository_fits_the_modules_signature() {
    let params = baseline_signature();
    assert!(
        params.iter().all(|p| p.optional),
        "baseline() must work without an argument: {params:?}"
    );
    // This file names the call in its own code; `file!()` is from the package root.
    let me = root().join(file!());
    let mut files = Vec::new();
    for part in SCANNED {
        files_under(&root().join(part), &mut files);
    }
    let needle = "memrel.baseline(";
    let mut calls = 0;
    let mut bad = Vec::new();
    for file in files.iter().filter(|f| **f != me) {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for (at, _) in text.match_indices(needle) {
            let rest = &text[at + needle.len()..];
            let mut depth = 1;
            let Some(end) = rest.char_indices().find_map(|(i, c)| {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                (depth == 0).then_some(i)
            }) else {
                bad.push(format!("{}: an unclosed call", file.display()));
                continue;
            };
            calls += 1;
            let args = split_args(&rest[..end]);
            if let Err(why) = fits(&args, &params) {
                bad.push(format!(
                    "{}: {needle}{}): {why}",
                    file.display(),
                    &rest[..end]
                ));
            }
        }
    }
    assert!(
        calls >= 10,
        "only {calls} calls found: is the scan looking in the right places?"
    );
    assert!(
        bad.is_empty(),
        "calls that do not fit {params:?}:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_fit_check_refuses_what_python_would() {
    let params = baseline_signature();
    let args = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(fits(&args(&[]), &params).is_ok());
    assert!(fits(&args(&["0.5"]), &params).is_ok());
    assert!(fits(&args(&["seconds=0.5"]), &params).is_ok());
    assert!(fits(&args(&["0.5", "1"]), &params).is_err());
    assert!(fits(&args(&["secs=0.5"]), &params).is_err());
}

#[test]
fn baseline_without_an_argument_is_a_baseline_phase_of_its_default_length() {
    let out = tempfile::tempdir().expect("tempdir");
    let script = "import memrel\nmemrel.baseline()\nwith memrel.phase('load', model='m'):\n    b = bytearray(1 << 20)\n";
    let output = memrel()
        .arg("exec")
        .arg("--out")
        .arg(out.path())
        .args(["--", "python3", "-c", script])
        .output()
        .expect("memrel starts");
    assert!(output.status.success(), "{}", streams(&output));
    let dir = only_results_dir(out.path(), "exec");
    let events = csv_rows(&dir.join("events.csv"));
    let time_of = |edge: &str| -> f64 {
        events
            .iter()
            .find(|e| e["phase"] == "baseline" && e["edge"] == edge)
            .unwrap_or_else(|| panic!("no baseline {edge}: {events:?}"))["t_s"]
            .parse()
            .expect("t_s")
    };
    // It slept its default (0.5 s): at least that long, however busy the machine.
    let length_s = time_of("end") - time_of("begin");
    assert!(length_s >= 0.45, "baseline of {length_s} s");
    assert_eq!(runs(&dir)[0]["status"], "completed");
}

/// Allocates 128 MiB in 120 KiB chunks during the load and frees every
/// other chunk during the unload: 64 MiB free but kept by glibc (the live
/// chunks between them stop any coalescing or trim).
const FRAGMENTS_ITS_HEAP: &str = r#"
import ctypes, memrel
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
with memrel.phase("load", model="m"):
    ptrs = [libc.malloc(120 << 10) for _ in range(1092)]
    for p in ptrs:
        libc.memset(p, 1, 120 << 10)
with memrel.phase("unload", model="m"):
    for p in ptrs[0::2]:
        libc.free(p)
"#;

/// `memrel exec` of [`FRAGMENTS_ITS_HEAP`]; events.csv's rows by "phase edge".
fn heap_edges(args: &[&str], env: &[(&str, &str)]) -> HashMap<String, HashMap<String, String>> {
    let out = tempfile::tempdir().expect("tempdir");
    let mut command = memrel();
    command.arg("exec").arg("--out").arg(out.path()).args(args);
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command
        .args(["--", "python3", "-c", FRAGMENTS_ITS_HEAP])
        .output()
        .expect("memrel starts");
    assert!(output.status.success(), "{}", streams(&output));
    let dir = only_results_dir(out.path(), "exec");
    csv_rows(&dir.join("events.csv"))
        .into_iter()
        .map(|row| (format!("{} {}", row["phase"], row["edge"]), row))
        .collect()
}

/// Issue 49, item 2: the memrel module sends glibc's own view (mallinfo2)
/// at every edge, as the candle worker does, so a program's retained heap
/// splits into live and free-but-kept; not where another allocator serves
/// malloc, nor with MEMREL_HEAP_VIEW=0.
#[test]
fn the_python_module_sends_glibcs_view_at_each_edge_where_glibc_serves_malloc() {
    let edges = heap_edges(&[], &[]);
    let mib = |edge: &str, column: &str| -> f64 {
        let row = edges
            .get(edge)
            .unwrap_or_else(|| panic!("no {edge}: {edges:?}"));
        let bytes: f64 = row[column]
            .parse()
            .unwrap_or_else(|_| panic!("{edge} {column}: {:?}", row[column]));
        bytes / (1u64 << 20) as f64
    };
    let near = |what: &str, got: f64, want: f64| {
        let slack = (want * 0.05).max(8.0);
        assert!(
            (got - want).abs() <= slack,
            "{what}: {got:.1} MiB, want {want:.1} ± {slack:.1}"
        );
    };
    near(
        "in use after the load",
        mib("load end", "glibc_in_use_bytes") - mib("load begin", "glibc_in_use_bytes"),
        128.0,
    );
    near(
        "free but kept after the unload",
        mib("unload end", "glibc_free_bytes") - mib("load begin", "glibc_free_bytes"),
        64.0,
    );
    near(
        "held (heap_held_bytes) after the unload",
        mib("unload end", "heap_held_bytes") - mib("load begin", "heap_held_bytes"),
        128.0,
    );
    let off = heap_edges(&[], &[("MEMREL_HEAP_VIEW", "0")]);
    assert!(
        off.values().all(|r| r["glibc_free_bytes"].is_empty()),
        "{off:?}"
    );
    crate::run::allocators::needs_allocators();
    let jemalloc = heap_edges(&["--strategy", "jemalloc"], &[]);
    assert!(
        jemalloc.values().all(|r| r["glibc_free_bytes"].is_empty()),
        "glibc's view where jemalloc serves malloc: {jemalloc:?}"
    );
}
