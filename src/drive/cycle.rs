//! What `memrel drive` sends: a cycle of HTTP requests, each marking a
//! phase, read from a small TOML file (`--cycle FILE`) or made by a preset
//! (`--server vllm|sglang|ollama`). A server of any other shape needs a TOML
//! file, no code. Only words live here: nothing is sent.
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

/// How long a request may take unless the file says (`timeout_s`).
pub const DEFAULT_TIMEOUT_S: f64 = 300.0;

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

/// `GET path` polled until its answer says so.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Until {
    pub path: String,
    /// A JSON pointer (RFC 6901) into the answer, with `equals`; the whole
    /// answer where none is given.
    #[serde(default)]
    pub pointer: Option<String>,
    #[serde(default)]
    pub equals: Option<serde_json::Value>,
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

fn ok_status() -> u16 {
    200
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
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

    pub fn timeout_s(&self) -> f64 {
        self.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S)
    }

    fn check(&self) -> Result<()> {
        self.phase()?;
        if !matches!(
            self.method.as_str(),
            "GET" | "POST" | "PUT" | "DELETE" | "PATCH"
        ) {
            bail!(
                "method {:?} of {} is not one memrel sends: use GET, POST, PUT, DELETE or PATCH",
                self.method,
                self.path
            );
        }
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
            if until.pointer.is_some() != until.equals.is_some() {
                bail!(
                    "until of {} needs both pointer and equals (or neither)",
                    self.line()
                );
            }
        }
        Ok(())
    }
}

impl Until {
    /// Whether `body` (a GET's answer) says what is waited for.
    pub fn met(&self, body: &str) -> bool {
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
        match (&self.pointer, &self.equals) {
            (Some(pointer), Some(want)) => serde_json::from_str::<serde_json::Value>(body)
                .ok()
                .and_then(|v| v.pointer(pointer).cloned())
                .is_some_and(|got| &got == want),
            _ => true,
        }
    }

    pub fn timeout_s(&self) -> f64 {
        self.timeout_s.unwrap_or(DEFAULT_UNTIL_TIMEOUT_S)
    }
}

impl Cycle {
    /// A cycle file, checked; errors name the file.
    pub fn read(path: &Path) -> Result<Cycle> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--cycle {}: cannot read it", path.display()))?;
        Cycle::parse(&text).with_context(|| format!("--cycle {}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Cycle> {
        let file: File = toml::from_str(text).map_err(|e| {
            anyhow::anyhow!(
                "not a cycle file: {}",
                e.to_string().trim().replace('\n', " ")
            )
        })?;
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

/// The servers memrel knows the API of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    Vllm,
    Sglang,
    Ollama,
}

/// What a preset needs beyond its name.
#[derive(Debug, Clone, Default)]
pub struct PresetArgs {
    /// vLLM's sleep level (1: weights to host memory, 2: dropped).
    pub sleep_level: u8,
    /// Ollama's model to load and unload.
    pub model: Option<String>,
    pub settle_s: f64,
}

impl Server {
    pub fn parse(name: &str) -> Result<Server> {
        match name {
            "vllm" => Ok(Server::Vllm),
            "sglang" => Ok(Server::Sglang),
            "ollama" => Ok(Server::Ollama),
            other => bail!("--server {other:?} is not a preset: use vllm, sglang or ollama, or --cycle FILE for another shape"),
        }
    }

    /// The preset's cycle (docs/servers.md: the endpoints and their sources).
    pub fn cycle(self, args: &PresetArgs) -> Result<Cycle> {
        let settle_s = Some(args.settle_s);
        let request = |phase: &str, method: &str, path: String| Request {
            phase: phase.into(),
            method: method.into(),
            path,
            body: None,
            status: 200,
            json: false,
            until: None,
            settle_s,
            timeout_s: None,
            model: None,
        };
        let until_sleeping = |asleep: bool| Until {
            path: "/is_sleeping".into(),
            pointer: Some("/is_sleeping".into()),
            equals: Some(serde_json::Value::Bool(asleep)),
            contains: None,
            absent: None,
            timeout_s: None,
        };
        Ok(match self {
            // vLLM's dev-mode endpoints (VLLM_SERVER_DEV_MODE=1).
            Server::Vllm => {
                if !matches!(args.sleep_level, 1 | 2) {
                    bail!(
                        "--sleep-level {} is not one vLLM has: use 1 (weights to host memory) or 2 (weights dropped)",
                        args.sleep_level
                    );
                }
                let mut sleep = request(
                    "sleep",
                    "POST",
                    format!("/sleep?level={}", args.sleep_level),
                );
                sleep.until = Some(until_sleeping(true));
                let mut wake = request("wake", "POST", "/wake_up".into());
                wake.until = Some(until_sleeping(false));
                Cycle {
                    ready: Some("GET /health".into()),
                    requests: vec![sleep, wake],
                }
            }
            Server::Sglang => {
                let mut release = request("sleep", "POST", "/release_memory_occupation".into());
                release.body = Some(serde_json::json!({}));
                let mut resume = request("wake", "POST", "/resume_memory_occupation".into());
                resume.body = Some(serde_json::json!({}));
                Cycle {
                    ready: Some("GET /health".into()),
                    requests: vec![release, resume],
                }
            }
            Server::Ollama => {
                let Some(model) = args.model.clone() else {
                    bail!("--server ollama needs --model NAME (the model to load and unload, e.g. llama3.2)");
                };
                let mut load = request("load", "POST", "/api/generate".into());
                load.body = Some(serde_json::json!({ "model": model }));
                load.json = true;
                load.model = Some(model.clone());
                let mut unload = request("unload", "POST", "/api/generate".into());
                unload.body = Some(serde_json::json!({ "model": model, "keep_alive": 0 }));
                unload.json = true;
                unload.model = Some(model.clone());
                // The runner exits after the answer: wait until /api/ps no
                // longer lists the model.
                unload.until = Some(Until {
                    path: "/api/ps".into(),
                    pointer: None,
                    equals: None,
                    contains: None,
                    absent: Some(format!("\"{model}")),
                    timeout_s: None,
                });
                Cycle {
                    ready: Some("GET /api/version".into()),
                    requests: vec![load, unload],
                }
            }
        })
    }
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
        assert!(until.met(r#"{"is_sleeping": true}"#));
        assert!(!until.met(r#"{"is_sleeping": false}"#));
        assert!(!until.met("not json"));

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
    fn presets_use_the_servers_own_endpoints() {
        let args = PresetArgs {
            sleep_level: 2,
            model: Some("llama3.2".into()),
            settle_s: 2.0,
        };
        let vllm = Server::parse("vllm")
            .and_then(|s| s.cycle(&args))
            .expect("vllm");
        let lines: Vec<String> = vllm.requests.iter().map(Request::line).collect();
        assert_eq!(lines, ["POST /sleep?level=2", "POST /wake_up"]);
        let sglang = Server::Sglang.cycle(&args).expect("sglang");
        assert_eq!(sglang.requests[0].path, "/release_memory_occupation");
        let ollama = Server::Ollama.cycle(&args).expect("ollama");
        assert_eq!(
            ollama.requests[1].body,
            Some(serde_json::json!({"model": "llama3.2", "keep_alive": 0}))
        );
        let until = ollama.requests[1].until.as_ref().expect("until");
        assert!(!until.met(r#"{"models":[{"name":"llama3.2:latest"}]}"#));
        assert!(until.met(r#"{"models":[]}"#));
        let e = Server::Ollama
            .cycle(&PresetArgs::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("--model"), "{e}");
        let e = Server::parse("tgi").unwrap_err().to_string();
        assert!(e.contains("--cycle FILE"), "{e}");
    }
}
