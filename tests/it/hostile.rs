//! Hostile input (issue 12, Build §6): memrel must refuse bad input with an
//! error that names the file, never panic, never allocate on a file's say-so,
//! and never write outside the results root because of a name.
//!
//! - a generated-input test of the scenario parser: 10 000 seeded inputs
//!   (random TOML from a grammar of the scenario keys, and mutations of the
//!   built-in scenarios) through `parse_str` in-process;
//! - hostile `model.safetensors` and `config.json` files under a scenario's
//!   `path = …`, run end to end through `memrel run`, with the process's peak
//!   RSS (parent and any worker, from `RUSAGE_CHILDREN` of a python3 parent) measured;
//! - a scenario file whose name is `..`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use memrel::scenario::{parse_str, ScenarioError, BUILTINS};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::common::run;

// ---------------------------------------------------------------------------
// The scenario parser under generated input.

/// Fixed so a failure reproduces; `MEMREL_FUZZ_SEED` and `MEMREL_FUZZ_CASES`
/// run other or more inputs.
const DEFAULT_SEED: u64 = 0x6d65_6d72_656c_0012;
const DEFAULT_CASES: usize = 10_000;

const TOP_KEYS: &[&str] = &[
    "description",
    "device",
    "cycles",
    "repeat",
    "strategies",
    "interval_ms",
    "timeout_s",
];
const WORKLOAD_KEYS: &[&str] = &[
    "batch_size",
    "seq_len",
    "load_method",
    "load_thread",
    "dtype",
    "small_allocs_between_loads",
    "settle_ms",
    "baseline_ms",
    "warmup",
];
const THRESHOLD_KEYS: &[&str] = &[
    "retention_mib",
    "noise_percent",
    "noise_mib",
    "max_retained_mib",
    "max_retained_slope_mib_per_cycle",
    "max_peak_mib",
    "max_retained_vram_mib",
    "max_retained_vram_slope_mib_per_cycle",
    "max_peak_vram_mib",
];
/// Values of every TOML type, edge numbers, and strings memrel knows or nearly knows.
const VALUES: &[&str] = &[
    "0",
    "1",
    "2",
    "-1",
    "3.5",
    "0.5",
    "1e309",
    "-0.0",
    "nan",
    "inf",
    "-inf",
    "18446744073709551616",
    "9223372036854775807",
    "4294967296",
    "true",
    "false",
    "\"\"",
    "\"cpu\"",
    "\"cuda\"",
    "\"cuda:1\"",
    "\"cuda:99999999999999999999\"",
    "\"drop\"",
    "\"mmap\"",
    "\"read\"",
    "\"spawned\"",
    "\"f16\"",
    "\"bert-tiny\"",
    "\"../../x\"",
    "\"a\\u0000b\"",
    "\"é\u{200b}\"",
    "[]",
    "[\"drop\"]",
    "[\"drop\", \"malloc-trim\", \"malloc_trm\"]",
    "[1, 2]",
    "{}",
    "{ a = 1 }",
    "1979-05-27T07:32:00Z",
    "'''\nmulti\n'''",
];
const STEPS: &[&str] = &[
    "load m",
    "forward m",
    "unload m",
    "load n",
    "unload n",
    "release",
    "settle",
    "idle 5",
    "idle 99999999999999999999999",
    "idle -1",
    "load",
    "jump m",
    "",
    "load m m",
];
const TOKENS: &[&str] = &[
    "=",
    "[",
    "]",
    "[[",
    "]]",
    "\"",
    "'",
    "'''",
    "\"\"\"",
    "\n",
    "#",
    "{",
    "}",
    ",",
    ".",
    "\\",
    "\\u",
    "\0",
    "\u{feff}",
    "é",
    "\t",
    " = ",
    "models.",
    "[workload]",
    "[models.m]",
];

fn pick<'a>(rng: &mut StdRng, items: &[&'a str]) -> &'a str {
    items[rng.random_range(0..items.len())]
}

/// A value that fits `key` most of the time, anything from `VALUES` otherwise.
fn value_for(rng: &mut StdRng, key: &str) -> String {
    if rng.random_bool(0.35) {
        return pick(rng, VALUES).to_string();
    }
    let good: &[&str] = match key {
        "description" => &["\"x\"", "\"a scenario\""],
        "device" => &["\"cpu\"", "\"cuda\"", "\"cuda:0\"", "\"tpu\""],
        "cycles" | "repeat" => &["1", "2", "0", "3"],
        "strategies" => &[
            "[\"drop\"]",
            "[\"drop\", \"malloc-trim\"]",
            "[\"sync\"]",
            "[]",
        ],
        "interval_ms" => &["5", "10.0", "0.5", "20000"],
        "timeout_s" => &["30", "1", "0", "1e12"],
        "load_method" => &["\"mmap\"", "\"read\"", "\"copy\""],
        "load_thread" => &["\"main\"", "\"spawned\""],
        "dtype" => &["\"f32\"", "\"f16\"", "\"bf16\"", "\"f8\""],
        "warmup" => &["true", "false"],
        "batch_size" | "seq_len" => &["1", "8", "0", "100000000"],
        _ => &["0", "16", "64.5", "-3", "1e300"],
    };
    pick(rng, good).to_string()
}

/// Random TOML shaped like a scenario, valid in about one case in ten.
fn generated_scenario(rng: &mut StdRng) -> String {
    let mut out = String::new();
    for key in TOP_KEYS {
        let chance = if matches!(*key, "description" | "strategies") {
            0.93
        } else {
            0.3
        };
        if rng.random_bool(chance) {
            out += &format!("{key} = {}\n", value_for(rng, key));
        }
    }
    if rng.random_bool(0.05) {
        out += &format!("{} = {}\n", pick(rng, WORKLOAD_KEYS), pick(rng, VALUES));
    }
    let ids: &[&str] = if rng.random_bool(0.8) {
        &["m"]
    } else {
        &["m", "n"]
    };
    for id in ids {
        if rng.random_bool(0.95) {
            out += &format!("[models.{id}]\n");
            let source = match rng.random_range(0..6) {
                0 => "path = \"/nonexistent\"".to_string(),
                1 => format!("hub = {}", pick(rng, &["\"o/n\"", "\"../x\"", "\"a/b/c\""])),
                2 => "preset = \"bert-tiny\"\npath = \"x\"".to_string(),
                3 => format!("preset = {}", pick(rng, VALUES)),
                _ => "preset = \"bert-tiny\"".to_string(),
            };
            out += &source;
            out += "\n";
        }
    }
    if rng.random_bool(0.95) {
        out += "[workload]\n";
        let steps: Vec<String> = if rng.random_bool(0.5) {
            let mut s = vec!["\"load m\"", "\"forward m\"", "\"unload m\"", "\"release\""];
            if ids.len() == 2 {
                s.extend(["\"load n\"", "\"unload n\""]);
            }
            s.into_iter().map(str::to_string).collect()
        } else {
            (0..rng.random_range(0..6))
                .map(|_| format!("{:?}", pick(rng, STEPS)))
                .collect()
        };
        out += &format!("steps = [{}]\n", steps.join(", "));
        for key in WORKLOAD_KEYS {
            if rng.random_bool(0.15) {
                out += &format!("{key} = {}\n", value_for(rng, key));
            }
        }
    }
    if rng.random_bool(0.3) {
        out += "[thresholds]\n";
        for key in THRESHOLD_KEYS {
            if rng.random_bool(0.25) {
                out += &format!("{key} = {}\n", value_for(rng, key));
            }
        }
    }
    out
}

/// A built-in scenario with one to three random edits.
fn mutated_builtin(rng: &mut StdRng) -> String {
    let (_, text) = BUILTINS[rng.random_range(0..BUILTINS.len())];
    let mut chars: Vec<char> = text.chars().collect();
    for _ in 0..rng.random_range(1..=3) {
        let at = rng.random_range(0..=chars.len());
        match rng.random_range(0..7) {
            0 => {
                let end = (at + rng.random_range(1..20)).min(chars.len());
                chars.drain(at..end);
            }
            1 => {
                let token = pick(rng, TOKENS);
                chars.splice(at..at, token.chars());
            }
            2 => chars.truncate(at),
            3 => {
                let c = char::from_u32(rng.random_range(0..0x800)).unwrap_or('?');
                chars.insert(at, c);
            }
            _ => {
                // Replace one `key = value` line's value, or duplicate / drop a line.
                let text: String = chars.iter().collect();
                let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
                if lines.is_empty() {
                    continue;
                }
                let i = rng.random_range(0..lines.len());
                match rng.random_range(0..3) {
                    0 => {
                        if let Some((key, _)) = lines[i].clone().split_once(" = ") {
                            lines[i] = format!("{key} = {}", value_for(rng, key.trim()));
                        }
                    }
                    1 => {
                        let line = lines[i].clone();
                        lines.insert(rng.random_range(0..=lines.len()), line);
                    }
                    _ => {
                        lines.remove(i);
                    }
                }
                chars = (lines.join("\n") + "\n").chars().collect();
            }
        }
    }
    chars.into_iter().collect()
}

/// Checks one parse: no panic, and an error names the file (and its line and
/// column, where it has one); a success is internally consistent.
fn check_one(case: usize, seed: u64, name: &str, origin: &str, text: &str) -> Result<bool, String> {
    let context = || format!("case {case} (seed {seed:#x}), name {name:?}, text:\n{text}");
    let parsed = catch_unwind(AssertUnwindSafe(|| parse_str(name, origin, text)))
        .map_err(|_| format!("parse_str panicked on {}", context()))?;
    match parsed {
        Ok(s) => {
            let consistent = s.name == name
                && memrel::fsutil::check_name("scenario", name).is_ok()
                && s.cycles >= 1
                && s.repeat >= 1
                && !s.strategies.is_empty()
                // A program may bring its own data; memrel's workers need models and steps.
                && match &s.worker {
                    memrel::scenario::WorkerKind::Command(argv) => !argv.is_empty(),
                    _ => !s.models.is_empty() && !s.workload.steps.is_empty(),
                }
                && s.timeout_s.is_finite()
                && s.timeout_s > 0.0
                && s.workload.batch_size >= 1
                && s.workload.seq_len >= 1;
            if !consistent {
                return Err(format!(
                    "accepted an inconsistent scenario {s:?} in {}",
                    context()
                ));
            }
            Ok(true)
        }
        Err(e) => {
            let message = e.to_string();
            if !message.starts_with(origin) {
                return Err(format!(
                    "error {message:?} does not name the file, {}",
                    context()
                ));
            }
            match &e {
                ScenarioError::Invalid { line, column, .. } => {
                    let lines = text.split('\n').count();
                    let prefix = format!("{origin}:{line}:{column}: ");
                    if !message.starts_with(&prefix) || *line < 1 || *column < 1 || *line > lines {
                        return Err(format!(
                            "error {message:?} has no valid line:column ({lines} lines), {}",
                            context()
                        ));
                    }
                    if message.len() <= prefix.len() {
                        return Err(format!("error {message:?} says nothing, {}", context()));
                    }
                }
                ScenarioError::UnusableName { .. } => {}
                other => return Err(format!("parse_str gave {other:?}, {}", context())),
            }
            Ok(false)
        }
    }
}

#[test]
fn the_scenario_parser_survives_generated_input_and_names_the_file_in_every_error() {
    let seed = std::env::var("MEMREL_FUZZ_SEED")
        .ok()
        .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
        .unwrap_or(DEFAULT_SEED);
    let cases = std::env::var("MEMREL_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    let mut rng = StdRng::seed_from_u64(seed);
    let started = Instant::now();
    let (mut accepted, mut named_badly) = (0, 0);
    for case in 0..cases {
        let (kind, text) = if rng.random_bool(0.5) {
            ("generated", generated_scenario(&mut rng))
        } else {
            ("mutated", mutated_builtin(&mut rng))
        };
        let name = if rng.random_bool(0.03) {
            named_badly += 1;
            pick(&mut rng, &["..", "a/b", "x\0y", "", ".hidden", "../up"])
        } else {
            "fuzz"
        };
        let origin = format!("fuzz/{kind}-{case}.toml");
        match check_one(case, seed, name, &origin, &text) {
            Ok(ok) => accepted += usize::from(ok),
            Err(failure) => panic!("{failure}"),
        }
    }
    let elapsed_s = started.elapsed().as_secs_f64();
    eprintln!(
        "scenario parser: {cases} inputs (seed {seed:#x}, {named_badly} with unusable names), \
         {accepted} accepted, in {elapsed_s:.2} s"
    );
    // The generator must reach the validation behind the TOML syntax, not only the syntax.
    assert!(
        accepted * 20 >= cases,
        "only {accepted} of {cases} inputs parsed: the generator no longer exercises validation"
    );
}

// ---------------------------------------------------------------------------
// Hostile model files, end to end.

/// Address-space limit for the memrel under test, so that a missing check
/// fails the test with an allocation error instead of exhausting the machine.
const ADDRESS_SPACE_LIMIT_BYTES: u64 = 4 << 30;
/// The most a rejected model may cost memrel (parent and any worker) in RSS.
const SMALL_RSS_BYTES: u64 = 64 << 20;

struct Outcome {
    /// The exit code, or minus the signal that ended it.
    code: i32,
    stderr: String,
    /// The peak RSS of memrel and every worker it waited for.
    peak_rss_bytes: u64,
}

/// The parent that starts memrel for [`run_measured`]: python3 sets the
/// address-space limit on itself (memrel inherits it), runs memrel, passes
/// its stderr on and prints its exit code (minus the signal) and the peak
/// RSS of memrel and every worker it waited for (`RUSAGE_CHILDREN`'s
/// `ru_maxrss`, KiB). A child of the test process itself would not do:
/// Linux carries the forked copy's peak across `exec`, so the peak would be
/// the test binary's (some 35 MiB here, over 64 MiB on a loaded CI run).
const MEASURE_PY: &str = r#"
import resource, subprocess, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
done = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
sys.stderr.buffer.write(done.stderr)
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"#;

/// Runs `command` under [`ADDRESS_SPACE_LIMIT_BYTES`] and measures its peak
/// RSS, through [`MEASURE_PY`].
fn run_measured(command: &mut Command) -> Outcome {
    let mut measured = Command::new("python3");
    measured
        .args(["-c", MEASURE_PY])
        .arg(ADDRESS_SPACE_LIMIT_BYTES.to_string())
        .arg(command.get_program())
        .args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => measured.env(key, value),
            None => measured.env_remove(key),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        measured.current_dir(dir);
    }
    let output = measured
        .stdin(Stdio::null())
        .output()
        .expect("python3 starts (the hostile tests need python3 on PATH)");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "the measuring python3: {stderr}");
    let printed = String::from_utf8_lossy(&output.stdout);
    let fields: Vec<i64> = printed
        .split_whitespace()
        .map(|field| field.parse().expect("an exit code and a peak in KiB"))
        .collect();
    let [code, peak_kib] = fields[..] else {
        panic!("the measuring python3 printed {printed:?}");
    };
    Outcome {
        code: i32::try_from(code).expect("an exit code"),
        stderr,
        peak_rss_bytes: u64::try_from(peak_kib).expect("a peak") * 1024,
    }
}

/// A qwen2-tiny model directory (0.5 MiB), written in-process.
fn tiny_model(dir: &Path) {
    let preset = memrel::model::preset::lookup("qwen2-tiny").unwrap();
    memrel::model::synth::write_model_dir(preset, dir).unwrap();
}

fn edit_config(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join("config.json");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut config);
    std::fs::write(&path, config.to_string()).unwrap();
}

/// Replaces `model.safetensors` with a declared header length, header text and data.
fn write_safetensors(dir: &Path, declared_len: u64, header: &str, data_bytes: usize) {
    let mut bytes = declared_len.to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.resize(bytes.len() + data_bytes, 0);
    std::fs::write(dir.join("model.safetensors"), bytes).unwrap();
}

/// `memrel run` on a one-cycle scenario over the model in `model_dir`.
fn run_on(work: &Path, model_dir: &Path) -> (Outcome, PathBuf) {
    let scenario = work.join("hostile.toml");
    std::fs::write(
        &scenario,
        format!(
            "description = \"x\"\nstrategies = [\"drop\"]\ncycles = 1\ntimeout_s = 60\n[models.m]\npath = {:?}\n\
             [workload]\nsteps = [\"load m\", \"forward m\", \"unload m\"]\nseq_len = 8\nbaseline_ms = 20\nsettle_ms = 20\n",
            model_dir.to_str().unwrap()
        ),
    )
    .unwrap();
    let out = work.join("out");
    let outcome = run_measured(&mut run(&scenario).out(&out).command());
    (outcome, out)
}

/// Builds a hostile model with `make`, runs memrel on it and checks that it is
/// refused before any worker: exit 2, the file and `needle` in the error,
/// nothing written, peak RSS small.
fn refused(file: &str, needle: &str, make: impl FnOnce(&Path)) {
    let work = tempfile::tempdir().unwrap();
    let model = work.path().join("model");
    tiny_model(&model);
    make(&model);
    let (outcome, out) = run_on(work.path(), &model);
    let shown = model.join(file).display().to_string();
    assert_eq!(
        outcome.code, 2,
        "{needle}: exit code; stderr:\n{}",
        outcome.stderr
    );
    assert!(
        outcome.stderr.contains(&shown) && outcome.stderr.contains(needle),
        "the error should name {shown} and say {needle:?}:\n{}",
        outcome.stderr
    );
    assert!(!out.exists(), "{needle}: a results directory was written");
    assert!(
        outcome.peak_rss_bytes < SMALL_RSS_BYTES,
        "{needle}: peak RSS {} MiB",
        outcome.peak_rss_bytes >> 20
    );
}

const EMBED: &str = "model.embed_tokens.weight";

#[test]
fn the_measuring_harness_lets_a_valid_model_run() {
    // The control for every case below: the same scenario, harness and
    // address-space limit complete on an intact model.
    let work = tempfile::tempdir().unwrap();
    let model = work.path().join("model");
    tiny_model(&model);
    let (outcome, out) = run_on(work.path(), &model);
    assert_eq!(outcome.code, 0, "{}", outcome.stderr);
    assert!(out.join("hostile").is_dir());
    eprintln!(
        "valid qwen2-tiny run: peak RSS {} MiB",
        outcome.peak_rss_bytes >> 20
    );
}

#[test]
fn a_safetensors_header_length_of_2_pow_60_is_refused() {
    refused(
        "model.safetensors",
        "declares a header of 1152921504606846976 bytes, more than safetensors allows",
        |dir| write_safetensors(dir, 1 << 60, "{}", 0),
    );
}

#[test]
fn safetensors_offsets_past_the_end_of_the_file_are_refused() {
    let header =
        format!(r#"{{"{EMBED}":{{"dtype":"F32","shape":[1024,64],"data_offsets":[0,262144]}}}}"#);
    refused("model.safetensors", "past the end of the file", |dir| {
        write_safetensors(dir, header.len() as u64, &header, 1000)
    });
}

#[test]
fn a_safetensors_shape_whose_bytes_overflow_is_refused() {
    let header = format!(
        r#"{{"{EMBED}":{{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}}}}"#
    );
    refused("model.safetensors", "larger than 2^64 bytes", |dir| {
        write_safetensors(dir, header.len() as u64, &header, 16)
    });
}

#[test]
fn a_truncated_safetensors_file_is_refused() {
    refused("model.safetensors", "the file is truncated", |dir| {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("model.safetensors"))
            .unwrap();
        let len = file.metadata().unwrap().len();
        file.set_len(len * 6 / 10).unwrap();
    });
}

#[test]
fn duplicate_safetensors_tensor_names_are_refused() {
    let header = format!(
        r#"{{"{EMBED}":{{"dtype":"F32","shape":[1],"data_offsets":[0,4]}},"{EMBED}":{{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}}}"#
    );
    refused("model.safetensors", "twice", |dir| {
        write_safetensors(dir, header.len() as u64, &header, 8)
    });
}

#[test]
fn a_config_hidden_size_of_10_pow_9_is_refused() {
    refused(
        "config.json",
        "hidden_size = 1000000000 is out of range",
        |dir| {
            edit_config(dir, |c| {
                c["hidden_size"] = serde_json::json!(1_000_000_000u64)
            })
        },
    );
}

#[test]
fn a_config_max_position_embeddings_of_10_pow_9_is_refused() {
    // candle's qwen2 loader would build rotary tables of 10^9 rows from this.
    refused(
        "config.json",
        "max_position_embeddings = 1000000000 is out of range",
        |dir| {
            edit_config(dir, |c| {
                c["max_position_embeddings"] = serde_json::json!(1_000_000_000u64)
            })
        },
    );
}

#[test]
fn negative_sizes_and_missing_keys_in_config_are_refused() {
    refused("config.json", "not a valid qwen2 config.json", |dir| {
        edit_config(dir, |c| c["intermediate_size"] = serde_json::json!(-128))
    });
    refused("config.json", "missing field `hidden_size`", |dir| {
        edit_config(dir, |c| {
            c.as_object_mut().unwrap().remove("hidden_size");
        })
    });
}

#[test]
fn a_config_that_disagrees_with_the_weights_is_refused() {
    refused("config.json", "not of one model", |dir| {
        edit_config(dir, |c| c["vocab_size"] = serde_json::json!(4096))
    });
}

// ---------------------------------------------------------------------------
// Names that would leave the results root.

#[test]
fn a_scenario_file_named_dot_dot_cannot_write_outside_the_results_root() {
    // `...toml` has the stem `..`: its results would go to `<out>/../<stamp>`.
    let work = tempfile::tempdir().unwrap();
    let scenarios = work.path().join("scenarios");
    std::fs::create_dir(&scenarios).unwrap();
    let scenario = scenarios.join("...toml");
    std::fs::write(
        &scenario,
        "description = \"x\"\nstrategies = [\"drop\"]\ncycles = 1\n[models.m]\npreset = \"qwen2-tiny\"\n\
         [workload]\nsteps = [\"load m\", \"unload m\"]\nbaseline_ms = 20\nsettle_ms = 20\n",
    )
    .unwrap();
    let out = work.path().join("results");
    let outcome = run_measured(&mut run(&scenario).out(&out).command());
    assert_eq!(outcome.code, 2, "{}", outcome.stderr);
    assert!(
        outcome.stderr.contains("scenario name \"..\"") && outcome.stderr.contains("...toml"),
        "{}",
        outcome.stderr
    );
    let entries: Vec<String> = std::fs::read_dir(work.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        entries,
        ["scenarios"],
        "something was written beside the results root"
    );
}

#[test]
fn a_results_directory_is_never_made_outside_the_root() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("results");
    for name in ["..", "../x", "/abs", "a/b", "a\0b", ""] {
        let err = memrel::results::create_out_dir(&root, name).unwrap_err();
        assert!(err.to_string().contains("scenario name"), "{name:?}: {err}");
    }
    assert!(!root.exists(), "nothing is created for a refused name");
    let dir = memrel::results::create_out_dir(&root, "ok").unwrap();
    assert_eq!(dir.parent(), Some(root.join("ok").as_path()));
}
