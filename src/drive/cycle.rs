//! What `memrel drive` sends: a cycle of HTTP requests, each marking a
//! phase, read from a small TOML file (`--cycle FILE`) or from a preset
//! (`--server NAME`): a cycle file of the same shape kept in
//! `src/drive/presets/NAME.toml` and embedded in the binary (the build
//! script lists the folder, so adding a preset is adding its file). A
//! server of any other shape needs a TOML file, no code. `{model}` and
//! `{sleep_level}` in a request's strings are `--model` and
//! `--sleep-level`. Only words live here: nothing is sent.
//!
//! ```toml
//! ready = "GET /health"            # answered 200 once the server is up
//! [[request]]
//! phase = "sleep"                  # load, forward, unload, sleep or wake
//! method = "POST"
//! path = "/sleep?level=1"
//! body = { tags = ["weights"] }    # sent as JSON (optional)
//! status = 200                     # expected (default 200)
//! json = true                      # the answer must be JSON (default false)
//! until = { path = "/is_sleeping", pointer = "/is_sleeping", equals = true }
//! # or: until = { method = "POST", path = "/v2/repository/index", body = {},
//! #   item = { name = "m" }, pointer = "/state", equals = "UNAVAILABLE",
//! #   missing = true }            (the array's item named m: gone or unavailable)
//! # or: until = { path = "/v2/models/m/ready", status = 404 }
//! settle_s = 2                     # memory read until then after the answer
//!
//! [thresholds]                     # budgets, as a scenario's (optional)
//! max_retained_mib = 64
//! ```
//!
//! The presets' endpoints are the servers' own (docs/servers.md says where
//! each comes from).

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use crate::protocol::Phase;

/// The phases a request may mark.
pub const REQUEST_PHASES: [Phase; 5] = [
    Phase::Load,
    Phase::Forward,
    Phase::Unload,
    Phase::Sleep,
    Phase::Wake,
];

/// How long a request may take unless the file (`timeout_s`) or
/// `--request-timeout` says.
pub const DEFAULT_TIMEOUT_S: f64 = 300.0;

/// The presets: `(name, cycle file text)` of every
/// `src/drive/presets/*.toml`, sorted by name (made by build.rs).
pub const PRESETS: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/presets.rs"));

/// How long an `until` polls unless it says (`timeout_s`).
pub const DEFAULT_UNTIL_TIMEOUT_S: f64 = 120.0;

/// One cycle and how to tell the server is up.
#[derive(Debug, Clone, PartialEq)]
pub struct Cycle {
    /// `GET PATH` that answers 2xx once the server serves.
    pub ready: Option<String>,
    pub requests: Vec<Request>,
}

/// One request of the cycle.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// load, forward, unload, sleep or wake.
    pub phase: String,
    #[serde(default = "post")]
    pub method: String,
    pub path: String,
    /// Sent as JSON (`Content-Type: application/json`).
    #[serde(default)]
    pub body: Option<serde_json::Value>,
    #[serde(default = "ok_status")]
    pub status: u16,
    /// The answer must be a JSON document.
    #[serde(default)]
    pub json: bool,
    /// After the answer, poll a GET until it says so (before settling).
    #[serde(default)]
    pub until: Option<Until>,
    /// After the answer (and `until`), read memory until this many seconds
    /// passed: the settled reading and the late bytes.
    #[serde(default)]
    pub settle_s: Option<f64>,
    #[serde(default)]
    pub timeout_s: Option<f64>,
    /// The model the phase is about (recorded with its edges).
    #[serde(default)]
    pub model: Option<String>,
}

/// A request (`GET path` unless it says) polled until its answer says so.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Until {
    #[serde(default = "get")]
    pub method: String,
    pub path: String,
    /// Sent as JSON with each poll (optional).
    #[serde(default)]
    pub body: Option<serde_json::Value>,
    /// The status that meets it (e.g. 404: the model is gone); default:
    /// any 2xx.
    #[serde(default)]
    pub status: Option<u16>,
    /// The answer is a JSON array: the pointer is read in its first item
    /// whose fields have these values (none such: every pointer is absent).
    #[serde(default)]
    pub item: Option<serde_json::Map<String, serde_json::Value>>,
    /// A JSON pointer (RFC 6901) into the answer (or the item), with
    /// `equals` or `missing`.
    #[serde(default)]
    pub pointer: Option<String>,
    #[serde(default)]
    pub equals: Option<serde_json::Value>,
    /// An absent pointer (or item) meets it too (alone: only that does).
    #[serde(default)]
    pub missing: bool,
    /// The answer's text holds this.
    #[serde(default)]
    pub contains: Option<String>,
    /// The answer's text does not hold this.
    #[serde(default)]
    pub absent: Option<String>,
    #[serde(default)]
    pub timeout_s: Option<f64>,
}

fn post() -> String {
    "POST".into()
}

fn get() -> String {
    "GET".into()
}

fn ok_status() -> u16 {
    200
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    /// One line on what the preset drives (`--server`'s list).
    #[serde(default, rename = "about")]
    _about: Option<String>,
    #[serde(default)]
    ready: Option<String>,
    #[serde(default)]
    request: Vec<Request>,
    /// The drive's budgets: a scenario's `[thresholds]` keys, read and
    /// checked by the scenario parser (`attach::header::budgets`), not here.
    #[serde(default, rename = "thresholds")]
    _thresholds: Option<toml::Table>,
}

impl Request {
    /// The phase, checked.
    pub fn phase(&self) -> Result<Phase> {
        Phase::parse(&self.phase)
            .filter(|p| REQUEST_PHASES.contains(p))
            .with_context(|| {
                format!(
                    "phase {:?} is not one a request marks: use load, forward, unload, sleep or wake",
                    self.phase
                )
            })
    }

    /// `POST /sleep?level=1`: how the request is named in messages.
    pub fn line(&self) -> String {
        format!("{} {}", self.method, self.path)
    }

    /// Its own `timeout_s`, else `default_s` (`--request-timeout`).
    pub fn timeout_s(&self, default_s: f64) -> f64 {
        self.timeout_s.unwrap_or(default_s)
    }

    fn check(&self) -> Result<()> {
        self.phase()?;
        check_method(&self.method, &self.path)?;
        if !self.path.starts_with('/') {
            bail!("path {:?} must start with /", self.path);
        }
        for (name, value) in [("settle_s", self.settle_s), ("timeout_s", self.timeout_s)] {
            if value.is_some_and(|s| !(s.is_finite() && s >= 0.0)) {
                bail!(
                    "{name} of {} must be a number of seconds, 0 or more",
                    self.line()
                );
            }
        }
        if let Some(until) = &self.until {
            if !until.path.starts_with('/') {
                bail!("until's path {:?} must start with /", until.path);
            }
            check_method(&until.method, &until.path)?;
            if until.equals.is_some() && until.pointer.is_none() {
                bail!(
                    "until of {} has equals without a pointer: add pointer = \"/field\"",
                    self.line()
                );
            }
            if until.missing && until.pointer.is_none() && until.item.is_none() {
                bail!(
                    "until of {} has missing = true with neither a pointer nor an item to miss",
                    self.line()
                );
            }
            if until.pointer.is_some() && until.equals.is_none() && !until.missing {
                bail!(
                    "until of {} has a pointer with neither equals nor missing = true",
                    self.line()
                );
            }
        }
        Ok(())
    }
}

fn check_method(method: &str, path: &str) -> Result<()> {
    if !matches!(method, "GET" | "POST" | "PUT" | "DELETE" | "PATCH") {
        bail!(
            "method {method:?} of {path} is not one memrel sends: use GET, POST, PUT, DELETE or PATCH"
        );
    }
    Ok(())
}

impl Until {
    /// Whether an answer (`status`, `body`) says what is waited for.
    pub fn met(&self, status: u16, body: &str) -> bool {
        let status_met = match self.status {
            Some(want) => status == want,
            None => (200..300).contains(&status),
        };
        if !status_met {
            return false;
        }
        if self
            .contains
            .as_ref()
            .is_some_and(|c| !body.contains(c.as_str()))
        {
            return false;
        }
        if self
            .absent
            .as_ref()
            .is_some_and(|a| body.contains(a.as_str()))
        {
            return false;
        }
        if self.pointer.is_none() && self.item.is_none() && !self.missing {
            return true;
        }
        let Ok(answer) = serde_json::from_str::<serde_json::Value>(body) else {
            return false;
        };
        let within = match &self.item {
            Some(fields) => answer.as_array().and_then(|items| {
                items.iter().find(|item| {
                    fields
                        .iter()
                        .all(|(key, want)| item.get(key).is_some_and(|got| got == want))
                })
            }),
            None => Some(&answer),
        };
        let got = within.and_then(|v| v.pointer(self.pointer.as_deref().unwrap_or("")));
        match (got, &self.equals) {
            (None, _) => self.missing,
            (Some(got), Some(want)) => got == want,
            // An item (or pointer) that is there, with nothing to equal:
            // met unless only its absence is waited for.
            (Some(_), None) => !self.missing,
        }
    }

    pub fn timeout_s(&self) -> f64 {
        self.timeout_s.unwrap_or(DEFAULT_UNTIL_TIMEOUT_S)
    }
}

impl Cycle {
    /// A cycle file, checked; errors name the file.
    pub fn read(path: &Path, args: &PresetArgs) -> Result<Cycle> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--cycle {}: cannot read it", path.display()))?;
        Cycle::parse_with(&text, args).with_context(|| format!("--cycle {}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Cycle> {
        Cycle::parse_with(text, &PresetArgs::default())
    }

    /// A cycle file's text, its `{model}` and `{sleep_level}` replaced by
    /// `args` in the requests' and `ready`'s strings; one it uses and
    /// `args` lacks is an error naming the flag.
    pub fn parse_with(text: &str, args: &PresetArgs) -> Result<Cycle> {
        let not_a_cycle = |e: &dyn std::fmt::Display| {
            anyhow::anyhow!(
                "not a cycle file: {}",
                e.to_string().trim().replace('\n', " ")
            )
        };
        let mut table: toml::Table = toml::from_str(text).map_err(|e| not_a_cycle(&e))?;
        for key in ["ready", "request"] {
            if let Some(value) = table.get_mut(key) {
                substitute(value, args)?;
            }
        }
        let file: File = toml::Value::Table(table)
            .try_into()
            .map_err(|e| not_a_cycle(&e))?;
        let cycle = Cycle {
            ready: file.ready,
            requests: file.request,
        };
        cycle.check()?;
        Ok(cycle)
    }

    fn check(&self) -> Result<()> {
        if self.requests.is_empty() {
            bail!("no [[request]]: list the cycle's requests, e.g. [[request]] phase = \"load\" path = \"/load\"");
        }
        if let Some(ready) = &self.ready {
            ready_path(ready)?;
        }
        for (i, r) in self.requests.iter().enumerate() {
            r.check().with_context(|| format!("request {}", i + 1))?;
        }
        Ok(())
    }

    /// The readiness request's path.
    pub fn ready_path(&self) -> Option<Result<&str>> {
        self.ready.as_deref().map(ready_path)
    }
}

/// `GET /health` → `/health`.
fn ready_path(ready: &str) -> Result<&str> {
    let path = ready.strip_prefix("GET ").unwrap_or(ready).trim();
    if !path.starts_with('/') {
        bail!("ready {ready:?} must be a GET of a path, e.g. \"GET /health\"");
    }
    Ok(path)
}

/// What the placeholders of a cycle file stand for.
#[derive(Debug, Clone, Default)]
pub struct PresetArgs {
    /// `{sleep_level}`: vLLM's sleep level (1: weights to host memory, 2:
    /// dropped).
    pub sleep_level: Option<u8>,
    /// `{model}`: the model to load and unload (Ollama, the v2 API).
    pub model: Option<String>,
}

/// Replaces `{model}` and `{sleep_level}` in every string of `value`.
fn substitute(value: &mut toml::Value, args: &PresetArgs) -> Result<()> {
    match value {
        toml::Value::String(text) => {
            if text.contains("{model}") {
                let Some(model) = &args.model else {
                    bail!("it needs --model NAME (the model to load and unload, e.g. llama3.2)");
                };
                *text = text.replace("{model}", model);
            }
            if text.contains("{sleep_level}") {
                let level = args.sleep_level.unwrap_or(1);
                if !matches!(level, 1 | 2) {
                    bail!(
                        "--sleep-level {level} is not one vLLM has: use 1 (weights to host memory) or 2 (weights dropped)"
                    );
                }
                *text = text.replace("{sleep_level}", &level.to_string());
            }
        }
        toml::Value::Array(items) => {
            for item in items {
                substitute(item, args)?;
            }
        }
        toml::Value::Table(table) => {
            for (_, item) in table.iter_mut() {
                substitute(item, args)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// The names of the presets, for messages: `v2, ollama or vllm`.
pub fn preset_names() -> String {
    let names: Vec<&str> = PRESETS.iter().map(|(name, _)| *name).collect();
    match names.split_last() {
        Some((last, [])) => (*last).to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => "none (this build has no presets)".to_string(),
    }
}

/// `--server NAME`'s cycle: its preset file with `args`.
pub fn preset(name: &str, args: &PresetArgs) -> Result<Cycle> {
    let Some((_, text)) = PRESETS.iter().find(|(n, _)| *n == name) else {
        bail!(
            "--server {name:?} is not a preset: use {}, or --cycle FILE for another shape",
            preset_names()
        );
    };
    Cycle::parse_with(text, args).with_context(|| format!("--server {name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cycle_file_reads_and_its_mistakes_are_named() {
        let cycle = Cycle::parse(
            r#"
ready = "GET /health"
[[request]]
phase = "load"
path = "/load"
body = { mib = 64 }
json = true
[[request]]
phase = "sleep"
path = "/sleep?level=1"
until = { path = "/is_sleeping", pointer = "/is_sleeping", equals = true }
settle_s = 1.5
"#,
        )
        .expect("a valid cycle");
        assert_eq!(cycle.requests.len(), 2);
        assert_eq!(cycle.requests[0].method, "POST");
        assert_eq!(cycle.requests[0].body, Some(serde_json::json!({"mib": 64})));
        assert_eq!(cycle.requests[1].settle_s, Some(1.5));
        assert_eq!(cycle.ready_path().map(|r| r.ok()), Some(Some("/health")));
        let until = cycle.requests[1].until.as_ref().expect("until");
        assert!(until.met(200, r#"{"is_sleeping": true}"#));
        assert!(!until.met(200, r#"{"is_sleeping": false}"#));
        assert!(!until.met(200, "not json"));
        assert!(!until.met(500, r#"{"is_sleeping": true}"#));

        let e = format!(
            "{:#}",
            Cycle::parse("[[request]]\nphase = \"lunch\"\npath = \"/x\"\n").unwrap_err()
        );
        assert!(e.contains("request 1") && e.contains("\"lunch\""), "{e}");
        let e = format!("{:#}", Cycle::parse("ready = \"GET /\"\n").unwrap_err());
        assert!(e.contains("no [[request]]"), "{e}");
        let e = format!(
            "{:#}",
            Cycle::parse("[[request]]\nphase = \"load\"\npath = \"/x\"\nbodyy = 1\n").unwrap_err()
        );
        assert!(e.contains("not a cycle file") && e.contains("bodyy"), "{e}");
    }

    #[test]
    fn every_preset_file_is_embedded_and_parses() {
        let names: Vec<&str> = PRESETS.iter().map(|(name, _)| *name).collect();
        let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/drive/presets");
        let mut files: Vec<String> = std::fs::read_dir(&folder)
            .expect("the presets folder")
            .flatten()
            .filter_map(|e| {
                let path = e.path();
                (path.extension()? == "toml")
                    .then(|| path.file_stem()?.to_str().map(String::from))?
            })
            .collect();
        files.sort();
        assert_eq!(
            names,
            files,
            "build.rs embeds every file of {}",
            folder.display()
        );
        for name in ["ollama", "sglang", "v2", "vllm", "vllm-tags"] {
            assert!(names.contains(&name), "{name} in {names:?}");
        }
        let args = PresetArgs {
            sleep_level: Some(1),
            model: Some("m".into()),
        };
        for (name, _) in PRESETS {
            let cycle = preset(name, &args).unwrap_or_else(|e| panic!("{name}: {e:#}"));
            assert!(cycle.ready.is_some(), "{name} says how it is ready");
        }
    }

    #[test]
    fn presets_use_the_servers_own_endpoints() {
        let args = PresetArgs {
            sleep_level: Some(2),
            model: Some("llama3.2".into()),
        };
        let lines = |name: &str| -> Vec<String> {
            preset(name, &args)
                .expect(name)
                .requests
                .iter()
                .map(Request::line)
                .collect()
        };
        assert_eq!(lines("vllm"), ["POST /sleep?level=2", "POST /wake_up"]);
        assert_eq!(
            lines("vllm-tags"),
            [
                "POST /sleep?level=2",
                "POST /wake_up?tags=weights",
                "POST /wake_up?tags=kv_cache"
            ]
        );
        assert_eq!(
            lines("v2"),
            [
                "POST /v2/repository/models/llama3.2/load",
                "POST /v2/repository/models/llama3.2/unload"
            ]
        );
        let sglang = preset("sglang", &args).expect("sglang");
        assert_eq!(sglang.requests[0].path, "/release_memory_occupation");
        let ollama = preset("ollama", &args).expect("ollama");
        assert_eq!(
            ollama.requests[1].body,
            Some(serde_json::json!({"model": "llama3.2", "keep_alive": 0}))
        );
        assert_eq!(ollama.requests[1].model.as_deref(), Some("llama3.2"));
        let until = ollama.requests[1].until.as_ref().expect("until");
        assert!(!until.met(200, r#"{"models":[{"name":"llama3.2:latest"}]}"#));
        assert!(until.met(200, r#"{"models":[]}"#));
        let e = format!(
            "{:#}",
            preset("ollama", &PresetArgs::default()).unwrap_err()
        );
        assert!(
            e.contains("--server ollama") && e.contains("--model"),
            "{e}"
        );
        let e = format!(
            "{:#}",
            preset(
                "vllm",
                &PresetArgs {
                    sleep_level: Some(3),
                    model: None
                }
            )
            .unwrap_err()
        );
        assert!(e.contains("--sleep-level 3"), "{e}");
        let e = preset("tgi", &args).unwrap_err().to_string();
        assert!(e.contains("--cycle FILE") && e.contains("v2"), "{e}");
    }

    #[test]
    fn until_waits_for_a_status_an_absence_or_an_item_of_a_list() {
        let v2 = preset(
            "v2",
            &PresetArgs {
                sleep_level: None,
                model: Some("iris".into()),
            },
        )
        .expect("v2");
        let until = v2.requests[1].until.as_ref().expect("until");
        assert_eq!(until.method, "POST");
        assert_eq!(until.body, Some(serde_json::json!({})));
        let index = |state: &str| {
            format!(
                r#"[{{"name":"other","state":"READY"}},{{"name":"iris","version":"1","state":"{state}"}}]"#
            )
        };
        assert!(!until.met(200, &index("READY")));
        assert!(!until.met(200, &index("UNLOADING")));
        assert!(until.met(200, &index("UNAVAILABLE")));
        assert!(until.met(200, r#"[{"name":"other","state":"READY"}]"#));
        assert!(until.met(200, "[]"));
        assert!(!until.met(400, "[]"));

        let gone = Cycle::parse(
            "[[request]]\nphase = \"unload\"\npath = \"/u\"\nuntil = { path = \"/v2/models/iris/ready\", status = 404 }\n",
        )
        .expect("valid");
        let until = gone.requests[0].until.as_ref().expect("until");
        assert!(until.met(404, "not found"));
        assert!(!until.met(200, "{}"));
        let absent = Cycle::parse(
            "[[request]]\nphase = \"unload\"\npath = \"/u\"\nuntil = { path = \"/s\", pointer = \"/models/0\", missing = true }\n",
        )
        .expect("valid");
        let until = absent.requests[0].until.as_ref().expect("until");
        assert!(until.met(200, r#"{"models":[]}"#));
        assert!(!until.met(200, r#"{"models":["m"]}"#));
        let e = format!(
            "{:#}",
            Cycle::parse("[[request]]\nphase = \"unload\"\npath = \"/u\"\nuntil = { path = \"/s\", pointer = \"/x\" }\n")
                .unwrap_err()
        );
        assert!(e.contains("neither equals nor missing"), "{e}");
        let e = format!(
            "{:#}",
            Cycle::parse("[[request]]\nphase = \"unload\"\npath = \"/u\"\nuntil = { path = \"/s\", missing = true }\n")
                .unwrap_err()
        );
        assert!(e.contains("neither a pointer nor an item"), "{e}");
    }
}
