//! `memrel watch --proxy LISTEN` (issue 50, item 1): a forwarding HTTP/1.1
//! proxy in front of a model server that marks an edge at each request that
//! is one of a cycle's load, unload, sleep or wake requests, so real
//! clients' requests give exact edges in production. Everything is
//! forwarded; a request that matches no route is forwarded without marks.
//!
//! # Routes: what a request must be to mark an edge
//!
//! Each `[[request]]` of a cycle (a preset or a cycle file, `drive::cycle`)
//! is a route, read from its `method`, `path`, `body`, `phase` and `model`.
//! A `{name}` in a template (`{model}`, `{sleep_level}`, any other) is a
//! placeholder that matches any value; [`Routes::of_text`] and
//! [`Routes::of_preset`] keep the placeholders that [`PresetArgs`] does not
//! fill, [`Routes::of_cycle`] takes a cycle whose placeholders were already
//! filled. An incoming request matches a route when:
//!
//! - **method**: equal, case-sensitive (`POST`);
//! - **path** (the target before `?`): equal byte for byte, no
//!   percent-decoding, a trailing `/` counts; a placeholder matches one or
//!   more characters other than `/`;
//! - **query**: every key of the template's query is among the request's
//!   keys with an equal value (a placeholder: any value, empty included);
//!   the request may carry other keys; order does not matter; values are
//!   compared as sent (no percent-decoding); a key sent twice matches when
//!   either value does;
//! - **body**, only where the template has one with at least one key: the
//!   request's body is a JSON object holding each of the template's keys
//!   with an equal value, where a string that is a lone placeholder
//!   (`"{model}"`) matches any value, a string with a placeholder inside
//!   matches strings of that shape, numbers are equal as numbers (`0` and
//!   `0.0`), nested objects are compared the same way (their extra keys
//!   allowed) and arrays item by item. A template body of no keys (`{}`)
//!   asks nothing of the request's body. Bodies of more than
//!   [`MAX_MATCHED_BODY_BYTES`] are not read for matching (they match no
//!   route with a body) and are forwarded all the same.
//!
//! When several routes match, the most specific wins: the most body keys,
//! then the most query keys, then the most literal characters in the path,
//! then the first in the cycle. So Ollama's unload (`POST /api/generate`
//! with `{model, keep_alive = 0}`) beats its load (`{model}`) for a body
//! with `"keep_alive": 0`, and any other `/api/generate` is the load.
//!
//! The route gives the phase and the model: the template's `model` with its
//! placeholders replaced by what they matched in the request (`{model}` in a
//! body's `"model"` field: that field's value; in a path segment: that
//! segment), else its literal text, else none.
//!
//! # What is called, and when
//!
//! [`ProxyHooks::before`] is called once the request's head (and its body,
//! where a route needs it) is read, and before anything of it is sent
//! upstream: it blocks (the mark's handshake) and only then does the
//! upstream see the request. [`ProxyHooks::after`] is called once the
//! upstream's answer is complete and its last byte was relayed to the
//! client, with its status, or with `None` when the upstream failed (then
//! before the client gets its 502, so the failure is marked before the
//! client can act on it). A hook
//! that panics is reported on stderr and counted; the request is forwarded
//! all the same.
//!
//! # Failures are never silent
//!
//! The upstream unreachable, refusing, closing before its answer's head or
//! sending a malformed head: the client gets a `502 Bad Gateway` whose body
//! names memrel's proxy, the upstream and the error. The upstream breaking
//! off mid-answer (the head already relayed): the client's connection is
//! closed, so the client sees a cut answer, never a short one that looks
//! whole. Either way a warning goes to stderr, `after` gets `None` and
//! [`ProxyStats::upstream_failures`] counts it. More than
//! [`MAX_CONNECTIONS`] connections at once: the next ones get `503 Service
//! Unavailable` with a body saying so. A request memrel cannot read (bad
//! head, both `Content-Length` and `Transfer-Encoding`): `400`.
//!
//! # HTTP
//!
//! Hand-written on `std::net` (HTTP/1.0 and 1.1, no TLS, no `Upgrade`): a
//! proxy must stream an answer as it comes (a generate stream, SSE) and
//! relay its bytes exactly: a server crate writes the answer it is given in
//! framing of its own (tiny_http re-chunks a body of unknown length in
//! chunks of its size), hyper would bring an async runtime into a
//! synchronous program, and neither is in the lock (no new dependency). One acceptor thread, one thread per
//! client connection (at most [`MAX_CONNECTIONS`]), each holding one
//! upstream connection kept alive between its requests. Request bodies
//! (`Content-Length` or chunked) are streamed upstream, or read whole first
//! where a route needs the body; a chunked one is sent on chunked. Answers
//! are relayed as they arrive, byte for byte (chunked framing included;
//! de-chunked for an HTTP/1.0 client): what the upstream sent is written to
//! the client before the proxy waits for more, so nothing is held back
//! (bytes already at hand go out in one write, the head with them).
//! `Host` is set to the upstream's; hop-by-hop headers (`Connection`,
//! `Keep-Alive`, `Proxy-Connection`, `TE`, `Upgrade`, `Expect`, and those
//! named in `Connection`) are not forwarded; `Expect: 100-continue` is
//! answered by the proxy.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::drive::cycle::{Cycle, PresetArgs, Request, PRESETS};
use crate::protocol::Phase;

/// Client connections served at once; the next get a 503.
pub const MAX_CONNECTIONS: usize = 256;
/// The longest request or response head read.
const MAX_HEAD_BYTES: u64 = 64 * 1024;
/// The largest request body read whole to be matched against routes.
pub const MAX_MATCHED_BODY_BYTES: usize = 16 << 20;
/// How often an idle keep-alive connection looks whether the proxy stops.
const IDLE_POLL: Duration = Duration::from_millis(50);
/// An idle keep-alive client connection is closed after this.
const IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// Reading a request the client began sending, writing to a client.
const CLIENT_IO_TIMEOUT: Duration = Duration::from_secs(60);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long [`Proxy::stop`] waits for exchanges in flight to end: short,
/// so that memrel stops within a second of SIGINT or SIGTERM.
pub const STOP_GRACE: Duration = Duration::from_millis(500);
/// Added times kept for the median.
const ADDED_KEPT: usize = 1024;
const RELAY_BUFFER_BYTES: usize = 64 * 1024;

// ---------------------------------------------------------------- routes

/// The requests that mark edges, from a cycle.
#[derive(Debug, Clone, Default)]
pub struct Routes {
    routes: Vec<Route>,
}

#[derive(Debug, Clone)]
struct Route {
    phase: Phase,
    method: String,
    /// `POST /sleep?level={sleep_level}`, for messages.
    line: String,
    path: Pattern,
    query: Vec<(String, Pattern)>,
    /// Only a body of at least one key (or not an object) asks anything.
    body: Option<Value>,
    model: Option<String>,
    literal_chars: usize,
}

/// A template: literal text with `{name}` placeholders, matched by hand
/// (the regex crates are built unoptimised in this crate's release profile,
/// and a request's path is matched against every route).
#[derive(Debug, Clone)]
struct Pattern {
    parts: Vec<Part>,
    /// A placeholder matches one or more characters other than `/` (a
    /// path); otherwise any text, empty included.
    segment: bool,
}

#[derive(Debug, Clone)]
enum Part {
    Literal(String),
    Placeholder(String),
}

/// What a placeholder matched: `(name, value)`.
type Captures = Vec<(String, String)>;

impl Pattern {
    fn new(template: &str, segment: bool) -> Pattern {
        let mut parts = Vec::new();
        let mut rest = template;
        while let Some((start, name, end)) = next_placeholder(rest) {
            if start > 0 {
                parts.push(Part::Literal(rest[..start].to_string()));
            }
            parts.push(Part::Placeholder(name.to_string()));
            rest = &rest[end..];
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.to_string()));
        }
        Pattern { parts, segment }
    }

    fn literal_len(&self) -> usize {
        self.parts
            .iter()
            .map(|p| match p {
                Part::Literal(l) => l.len(),
                Part::Placeholder(_) => 0,
            })
            .sum()
    }

    fn captures(&self, text: &str, into: &mut Captures) -> bool {
        match_parts(&self.parts, text, self.segment, into)
    }
}

/// The parts against the text, each placeholder tried at every length
/// (templates and targets are short).
fn match_parts(parts: &[Part], text: &str, segment: bool, caps: &mut Captures) -> bool {
    match parts.split_first() {
        None => text.is_empty(),
        Some((Part::Literal(literal), rest)) => text
            .strip_prefix(literal.as_str())
            .is_some_and(|t| match_parts(rest, t, segment, caps)),
        Some((Part::Placeholder(name), rest)) => {
            let (min, max) = if segment {
                (1, text.find('/').unwrap_or(text.len()))
            } else {
                (0, text.len())
            };
            for end in (min..=max).filter(|&i| text.is_char_boundary(i)) {
                let mark = caps.len();
                if match_parts(rest, &text[end..], segment, caps) {
                    caps.insert(mark, (name.clone(), text[..end].to_string()));
                    return true;
                }
                caps.truncate(mark);
            }
            false
        }
    }
}

/// The first `{name}` of a text: (its start, the name, its end).
fn next_placeholder(text: &str) -> Option<(usize, &str, usize)> {
    let mut from = 0;
    while let Some(open) = text[from..].find('{').map(|i| from + i) {
        let close = open + text[open..].find('}')?;
        if lone_placeholder(&text[open..=close]).is_some() {
            return Some((open, &text[open + 1..close], close + 1));
        }
        from = open + 1;
    }
    None
}

/// The placeholder a whole string is (`"{model}"` → `model`).
fn lone_placeholder(text: &str) -> Option<&str> {
    let name = text.strip_prefix('{')?.strip_suffix('}')?;
    let mut chars = name.chars();
    let first = chars.next()?;
    ((first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_'))
    .then_some(name)
}

/// What matched a request: the edge to mark.
#[derive(Debug, Clone, PartialEq)]
pub struct Matched {
    pub phase: Phase,
    pub model: Option<String>,
    /// The route's template line (`POST /sleep?level={sleep_level}`).
    pub route: String,
}

impl Routes {
    /// A cycle's requests, its placeholders already filled (`Cycle::read`,
    /// `drive::cycle::preset`); a request of a phase no request marks
    /// (a checked cycle has none) is left out.
    pub fn of_cycle(cycle: &Cycle) -> Routes {
        Routes::of_requests(&cycle.requests)
    }

    pub fn of_requests(requests: &[Request]) -> Routes {
        Routes {
            routes: requests.iter().filter_map(Route::of_request).collect(),
        }
    }

    /// A cycle file's text: the placeholders `args` fills are replaced
    /// (`--model`: only that model's requests mark), the others match any
    /// value.
    pub fn of_text(text: &str, args: &PresetArgs) -> Result<Routes> {
        let mut table: toml::Table = toml::from_str(text).context("not a cycle file")?;
        let requests = table
            .remove("request")
            .context("no [[request]] in the cycle file")?;
        let mut requests: Vec<Request> = requests
            .try_into()
            .context("not a cycle file's [[request]] list")?;
        for request in &mut requests {
            request.phase()?;
            fill(&mut request.path, args);
            if let Some(model) = &mut request.model {
                fill(model, args);
            }
            if let Some(body) = &mut request.body {
                fill_value(body, args);
            }
        }
        Ok(Routes::of_requests(&requests))
    }

    /// A preset's routes (`vllm`, `ollama`, …), as [`Routes::of_text`].
    pub fn of_preset(name: &str, args: &PresetArgs) -> Result<Routes> {
        let Some((_, text)) = PRESETS.iter().find(|(n, _)| *n == name) else {
            bail!(
                "{name:?} is not a preset: use {}",
                crate::drive::cycle::preset_names()
            );
        };
        Routes::of_text(text, args).with_context(|| format!("preset {name}"))
    }

    pub fn len(&self) -> usize {
        self.routes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// `POST /sleep?level={sleep_level} → sleep`, one per route.
    pub fn describe(&self) -> Vec<String> {
        self.routes
            .iter()
            .map(|r| {
                let body = r.body.as_ref().map(|b| format!(" {b}")).unwrap_or_default();
                format!("{}{body} → {}", r.line, r.phase.as_str())
            })
            .collect()
    }

    /// Whether a route of this method and target looks at the body.
    pub fn needs_body(&self, method: &str, target: &str) -> bool {
        let (path, query) = split_target(target);
        self.routes
            .iter()
            .any(|r| r.body.is_some() && r.head_matches(method, path, &query, &mut Vec::new()))
    }

    /// The route a request matches, the most specific; `body`: the whole
    /// body where it was read.
    pub fn find(&self, method: &str, target: &str, body: Option<&[u8]>) -> Option<Matched> {
        let (path, query) = split_target(target);
        let mut parsed: Option<Option<Value>> = None;
        let mut best: Option<((usize, usize, usize), &Route, Captures)> = None;
        for route in &self.routes {
            let mut caps = Vec::new();
            if !route.head_matches(method, path, &query, &mut caps) {
                continue;
            }
            let mut body_keys = 0;
            if let Some(template) = &route.body {
                let got = parsed.get_or_insert_with(|| {
                    body.and_then(|b| serde_json::from_slice::<Value>(b).ok())
                });
                let Some(got) = got else { continue };
                if !match_value(template, got, &mut caps) {
                    continue;
                }
                body_keys = template.as_object().map_or(1, |o| o.len());
            }
            let score = (body_keys, route.query.len(), route.literal_chars);
            if best.as_ref().is_none_or(|(s, _, _)| score > *s) {
                best = Some((score, route, caps));
            }
        }
        let (_, route, caps) = best?;
        Some(Matched {
            phase: route.phase,
            model: route.model.as_deref().and_then(|m| model_of(m, &caps)),
            route: route.line.clone(),
        })
    }
}

impl Route {
    fn of_request(request: &Request) -> Option<Route> {
        let phase = request.phase().ok()?;
        let (path, query) = split_target(&request.path);
        let body = request
            .body
            .clone()
            .filter(|b| b.as_object().is_none_or(|o| !o.is_empty()));
        let path = Pattern::new(path, true);
        Some(Route {
            phase,
            method: request.method.clone(),
            line: request.line(),
            literal_chars: path.literal_len(),
            path,
            query: query
                .into_iter()
                .map(|(k, v)| (k.to_string(), Pattern::new(v, false)))
                .collect(),
            body,
            model: request.model.clone(),
        })
    }

    fn head_matches(
        &self,
        method: &str,
        path: &str,
        query: &[(&str, &str)],
        caps: &mut Captures,
    ) -> bool {
        self.method == method
            && self.path.captures(path, caps)
            && self.query.iter().all(|(key, want)| {
                query
                    .iter()
                    .any(|(k, v)| k == key && want.captures(v, caps))
            })
    }
}

/// `/a/b?x=1&y` → (`/a/b`, [(x, 1), (y, "")]).
fn split_target(target: &str) -> (&str, Vec<(&str, &str)>) {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let pairs = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .collect();
    (path, pairs)
}

/// A template value against a request's: the rules of the module doc.
fn match_value(template: &Value, got: &Value, caps: &mut Captures) -> bool {
    match (template, got) {
        (Value::String(t), _) if lone_placeholder(t).is_some() => {
            let value = match got {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            caps.push((lone_placeholder(t).unwrap_or_default().to_string(), value));
            true
        }
        (Value::String(t), Value::String(g)) if next_placeholder(t).is_some() => {
            Pattern::new(t, false).captures(g, caps)
        }
        (Value::Object(t), Value::Object(g)) => t
            .iter()
            .all(|(k, tv)| g.get(k).is_some_and(|gv| match_value(tv, gv, caps))),
        (Value::Array(t), Value::Array(g)) => {
            t.len() == g.len() && t.iter().zip(g).all(|(tv, gv)| match_value(tv, gv, caps))
        }
        (Value::Number(a), Value::Number(b)) => a == b || a.as_f64() == b.as_f64(),
        _ => template == got,
    }
}

/// The model template with its placeholders replaced; one that matched
/// nothing: no model.
fn model_of(template: &str, caps: &Captures) -> Option<String> {
    Pattern::new(template, false)
        .parts
        .iter()
        .map(|part| match part {
            Part::Literal(l) => Some(l.as_str()),
            Part::Placeholder(name) => caps
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str()),
        })
        .collect()
}

/// `{model}` and `{sleep_level}` replaced where `args` gives them.
fn fill(text: &mut String, args: &PresetArgs) {
    if let Some(model) = &args.model {
        *text = text.replace("{model}", model);
    }
    if let Some(level) = args.sleep_level {
        *text = text.replace("{sleep_level}", &level.to_string());
    }
}

fn fill_value(value: &mut Value, args: &PresetArgs) {
    match value {
        Value::String(text) => fill(text, args),
        Value::Array(items) => items.iter_mut().for_each(|v| fill_value(v, args)),
        Value::Object(map) => map.values_mut().for_each(|v| fill_value(v, args)),
        _ => {}
    }
}

// ---------------------------------------------------------------- hooks, stats

/// What the proxy calls at a matched request (`watch`: a mark).
pub trait ProxyHooks: Send + Sync {
    /// Before the request is sent upstream; the proxy waits for it.
    fn before(&self, phase: Phase, model: Option<&str>, request_line: &str);
    /// Once the answer's last byte was relayed; `status`: `None` when the
    /// upstream failed.
    fn after(&self, phase: Phase, model: Option<&str>, request_line: &str, status: Option<u16>);
}

/// Hooks that do nothing (a proxy that only forwards, the bench).
pub struct NoHooks;

impl ProxyHooks for NoHooks {
    fn before(&self, _: Phase, _: Option<&str>, _: &str) {}
    fn after(&self, _: Phase, _: Option<&str>, _: &str, _: Option<u16>) {}
}

/// What the proxy did so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProxyStats {
    /// Client connections accepted and served.
    pub connections: u64,
    /// Requests forwarded upstream (or tried: failures included).
    pub requests: u64,
    /// Of those, requests that matched a route (hooks called).
    pub matched: u64,
    /// Upstream unreachable, or failing before or during its answer.
    pub upstream_failures: u64,
    /// Connections refused with 503 (over [`MAX_CONNECTIONS`]).
    pub rejected_busy: u64,
    /// Requests refused with 400 (a head memrel cannot read).
    pub bad_requests: u64,
    /// Clients gone before their answer was relayed whole.
    pub client_aborts: u64,
    pub hook_panics: u64,
    /// Request bytes sent upstream (heads and bodies).
    pub request_bytes: u64,
    /// Answer bytes relayed to clients (heads and bodies).
    pub response_bytes: u64,
    /// memrel's own time added to each forwarded request.
    pub added: AddedTime,
}

/// memrel's own time per request: from the request read (its head, and its
/// body where a route needed it) to it sent upstream, less `before`'s
/// blocking, plus from the answer's head read to it handed to the client.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AddedTime {
    pub count: u64,
    pub total_s: f64,
    pub max_s: f64,
    /// The median of the last 1,024.
    pub median_s: Option<f64>,
}

#[derive(Default)]
struct Counters {
    connections: AtomicU64,
    requests: AtomicU64,
    matched: AtomicU64,
    upstream_failures: AtomicU64,
    rejected_busy: AtomicU64,
    bad_requests: AtomicU64,
    client_aborts: AtomicU64,
    hook_panics: AtomicU64,
    request_bytes: AtomicU64,
    response_bytes: AtomicU64,
}

#[derive(Default)]
struct AddedLog {
    count: u64,
    total_s: f64,
    max_s: f64,
    last: Vec<f64>,
    next: usize,
}

impl AddedLog {
    fn push(&mut self, s: f64) {
        self.count += 1;
        self.total_s += s;
        self.max_s = self.max_s.max(s);
        if self.last.len() < ADDED_KEPT {
            self.last.push(s);
        } else {
            self.last[self.next] = s;
        }
        self.next = (self.next + 1) % ADDED_KEPT;
    }

    fn summary(&self) -> AddedTime {
        let mut sorted = self.last.clone();
        sorted.sort_by(f64::total_cmp);
        AddedTime {
            count: self.count,
            total_s: self.total_s,
            max_s: self.max_s,
            median_s: sorted.get(sorted.len() / 2).copied(),
        }
    }
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

// ---------------------------------------------------------------- the proxy

/// A running proxy; stops on [`Proxy::stop`] or when dropped.
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

struct Shared {
    /// `host:port`, the `Host` sent upstream.
    authority: String,
    /// `http://host:port`, for messages.
    upstream: String,
    routes: Routes,
    hooks: Arc<dyn ProxyHooks>,
    /// [`MAX_CONNECTIONS`] (fewer in tests).
    max_connections: usize,
    stopping: AtomicBool,
    active: AtomicUsize,
    counters: Counters,
    added: Mutex<AddedLog>,
    /// Each connection's sockets, shut down by a stop that outlasts its grace.
    open: Mutex<HashMap<u64, Vec<TcpStream>>>,
    next_id: AtomicU64,
}

impl Proxy {
    /// Listens on `listen` (`127.0.0.1:8001`, `0.0.0.0:8001`, port 0: any)
    /// and forwards to `upstream` (`http://host:port`).
    pub fn start(
        listen: &str,
        upstream: &str,
        routes: Routes,
        hooks: Arc<dyn ProxyHooks>,
    ) -> Result<Proxy> {
        Proxy::start_with(listen, upstream, routes, hooks, MAX_CONNECTIONS)
    }

    fn start_with(
        listen: &str,
        upstream: &str,
        routes: Routes,
        hooks: Arc<dyn ProxyHooks>,
        max_connections: usize,
    ) -> Result<Proxy> {
        let authority = upstream_authority(upstream)?;
        let listener = TcpListener::bind(listen)
            .with_context(|| format!("--proxy {listen}: cannot listen there"))?;
        let addr = listener.local_addr().context("the proxy's address")?;
        let shared = Arc::new(Shared {
            upstream: format!("http://{authority}"),
            authority,
            routes,
            hooks,
            max_connections,
            stopping: AtomicBool::new(false),
            active: AtomicUsize::new(0),
            counters: Counters::default(),
            added: Mutex::new(AddedLog::default()),
            open: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
        });
        let acceptor = std::thread::Builder::new()
            .name("memrel-proxy".into())
            .spawn({
                let shared = Arc::clone(&shared);
                move || accept_loop(&listener, &shared)
            })
            .context("cannot start the proxy's thread")?;
        Ok(Proxy {
            addr,
            shared,
            acceptor: Some(acceptor),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn stats(&self) -> ProxyStats {
        let c = &self.shared.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ProxyStats {
            connections: get(&c.connections),
            requests: get(&c.requests),
            matched: get(&c.matched),
            upstream_failures: get(&c.upstream_failures),
            rejected_busy: get(&c.rejected_busy),
            bad_requests: get(&c.bad_requests),
            client_aborts: get(&c.client_aborts),
            hook_panics: get(&c.hook_panics),
            request_bytes: get(&c.request_bytes),
            response_bytes: get(&c.response_bytes),
            added: lock(&self.shared.added).summary(),
        }
    }

    /// Stops accepting, closes idle connections, lets exchanges in flight
    /// end for up to [`STOP_GRACE`], then cuts those left (said on stderr).
    pub fn stop(&mut self) {
        let Some(acceptor) = self.acceptor.take() else {
            return;
        };
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wakes the blocking accept.
        let _ = TcpStream::connect_timeout(&wake_addr(self.addr), Duration::from_secs(1));
        let _ = acceptor.join();
        if !wait_idle(&self.shared, STOP_GRACE) {
            let cut = self.shared.active.load(Ordering::SeqCst);
            eprintln!(
                "memrel: proxy: stopping with {cut} exchange(s) still in flight after {} s: their connections are closed",
                STOP_GRACE.as_secs_f64()
            );
            for socket in lock(&self.shared.open).values().flatten() {
                let _ = socket.shutdown(Shutdown::Both);
            }
            wait_idle(&self.shared, Duration::from_secs(1));
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop();
    }
}

fn wait_idle(shared: &Shared, within: Duration) -> bool {
    let until = Instant::now() + within;
    while shared.active.load(Ordering::SeqCst) > 0 {
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

/// The address that reaches a listener bound to `addr` (0.0.0.0: loopback).
fn wake_addr(addr: SocketAddr) -> SocketAddr {
    let mut to = addr;
    if addr.ip().is_unspecified() {
        to.set_ip(match addr {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    to
}

/// `http://host:port[/]` → `host:port`.
fn upstream_authority(upstream: &str) -> Result<String> {
    let Some(rest) = upstream.strip_prefix("http://") else {
        bail!("the upstream {upstream:?} must be http://HOST:PORT (the proxy speaks plain HTTP)");
    };
    let authority = rest.trim_end_matches('/');
    if authority.is_empty() || authority.contains('/') {
        bail!("the upstream {upstream:?} must be http://HOST:PORT, without a path");
    }
    let port_ok = authority
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
    if !port_ok {
        bail!("the upstream {upstream:?} must name its port: http://HOST:PORT");
    }
    Ok(authority.to_string())
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            break;
        }
        let stream = match stream {
            Ok(stream) => stream,
            Err(e) => {
                eprintln!("memrel: proxy: accepting a connection failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if shared.active.load(Ordering::SeqCst) >= shared.max_connections {
            reject_busy(shared, stream);
            continue;
        }
        shared.active.fetch_add(1, Ordering::SeqCst);
        bump(&shared.counters.connections, 1);
        let Ok(served) = stream.try_clone() else {
            shared.active.fetch_sub(1, Ordering::SeqCst);
            reject_busy(shared, stream);
            continue;
        };
        let spawned = std::thread::Builder::new()
            .name("memrel-proxy-conn".into())
            .spawn({
                let shared = Arc::clone(shared);
                move || {
                    serve(&shared, served);
                    shared.active.fetch_sub(1, Ordering::SeqCst);
                }
            });
        if let Err(e) = spawned {
            shared.active.fetch_sub(1, Ordering::SeqCst);
            eprintln!("memrel: proxy: cannot start a connection's thread: {e}");
            reject_busy(shared, stream);
        }
    }
}

/// A 503 to a connection over the limit (its request read briefly first,
/// so the answer is not lost to a reset).
fn reject_busy(shared: &Shared, mut stream: TcpStream) {
    bump(&shared.counters.rejected_busy, 1);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
    let _ = stream.read(&mut [0u8; 8192]);
    let max = shared.max_connections;
    let body = format!(
        "memrel proxy: {max} connections are open, the most it serves at once; this one is refused, retry shortly (upstream {})\n",
        shared.upstream
    );
    let _ = stream.write_all(&plain_answer(
        503,
        "Service Unavailable",
        &body,
        "Retry-After: 1\r\n",
    ));
    let _ = stream.shutdown(Shutdown::Write);
    eprintln!("memrel: proxy: a connection was refused with 503: {max} are open");
}

/// A whole answer with a text body; the connection closes after it.
fn plain_answer(status: u16, reason: &str, body: &str, extra_headers: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\nX-Memrel-Proxy: {status}\r\n{extra_headers}\r\n{body}",
        body.len()
    )
    .into_bytes()
}

// ---------------------------------------------------------------- one connection

/// One upstream connection, kept between a client connection's requests.
struct Upstream {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

/// A client connection: its requests one after another.
fn serve(shared: &Shared, client: TcpStream) {
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let _ = client.set_nodelay(true);
    let _ = client.set_write_timeout(Some(CLIENT_IO_TIMEOUT));
    let (Ok(read_half), Ok(registered)) = (client.try_clone(), client.try_clone()) else {
        return;
    };
    lock(&shared.open).insert(id, vec![registered]);
    let mut reader = BufReader::new(read_half);
    let mut writer = client;
    let mut upstream: Option<Upstream> = None;
    while wait_for_request(shared, &mut reader) {
        let head = match read_head(&mut reader) {
            Ok(Some(head)) => head,
            Ok(None) => break,
            Err(e) => {
                bad_request(shared, &mut writer, &e);
                break;
            }
        };
        let keep = match RequestHead::parse(&head) {
            Ok(request) => exchange(
                shared,
                id,
                &request,
                &mut reader,
                &mut writer,
                &mut upstream,
            ),
            Err(e) => {
                bad_request(shared, &mut writer, &e);
                false
            }
        };
        if !keep {
            break;
        }
    }
    let _ = writer.shutdown(Shutdown::Write);
    lock(&shared.open).remove(&id);
}

/// Waits for the first byte of a request; false: the client closed, the
/// connection idled too long or the proxy stops.
fn wait_for_request(shared: &Shared, reader: &mut BufReader<TcpStream>) -> bool {
    let _ = reader.get_ref().set_read_timeout(Some(IDLE_POLL));
    let idle_since = Instant::now();
    loop {
        if shared.stopping.load(Ordering::SeqCst) {
            return false;
        }
        match reader.fill_buf() {
            Ok(bytes) => {
                let started = !bytes.is_empty();
                let _ = reader.get_ref().set_read_timeout(Some(CLIENT_IO_TIMEOUT));
                return started;
            }
            Err(e) if is_timeout(&e) && idle_since.elapsed() < IDLE_TIMEOUT => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

fn bad_request(shared: &Shared, writer: &mut TcpStream, why: &str) {
    bump(&shared.counters.bad_requests, 1);
    eprintln!("memrel: proxy: a request was refused with 400: {why}");
    let body = format!("memrel proxy: cannot read this request: {why}\n");
    let _ = writer.write_all(&plain_answer(400, "Bad Request", &body, ""));
}

/// A head's lines up to the empty one (CRLF or LF), at most
/// [`MAX_HEAD_BYTES`]; `None`: the connection closed before any.
fn read_head(reader: &mut impl BufRead) -> Result<Option<Vec<String>>, String> {
    let mut lines = Vec::new();
    let mut total = 0u64;
    loop {
        let mut line = Vec::new();
        let n = reader
            .take(MAX_HEAD_BYTES - total)
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("reading its head failed: {e}"))?;
        total += n as u64;
        if n == 0 || !line.ends_with(b"\n") {
            if lines.is_empty() && line.is_empty() {
                return Ok(None);
            }
            return Err(if total >= MAX_HEAD_BYTES {
                format!("its head is longer than {MAX_HEAD_BYTES} bytes")
            } else {
                "the connection closed inside its head".into()
            });
        }
        let text = String::from_utf8(line).map_err(|_| "its head is not text".to_string())?;
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            if lines.is_empty() {
                continue; // a stray empty line between requests
            }
            return Ok(Some(lines));
        }
        lines.push(text.to_string());
    }
}

/// How a body is delimited.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Framing {
    Empty,
    Length(u64),
    Chunked,
    /// Until the connection closes (answers only).
    Close,
}

type Headers = Vec<(String, String)>;

fn parse_headers(lines: &[String]) -> Result<Headers, String> {
    lines
        .iter()
        .map(|line| {
            let (name, value) = line
                .split_once(':')
                .ok_or_else(|| format!("the header line {line:?} has no ':'"))?;
            if name.is_empty() || name.contains(char::is_whitespace) {
                return Err(format!("the header line {line:?} has no valid name"));
            }
            Ok((name.to_string(), value.trim().to_string()))
        })
        .collect()
}

fn header<'a>(headers: &'a Headers, name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// The lowercase tokens of every `Connection` header.
fn connection_tokens(headers: &Headers) -> Vec<String> {
    headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, v)| v.split(',').map(|t| t.trim().to_ascii_lowercase()))
        .collect()
}

/// Headers never forwarded (hop-by-hop), besides those `Connection` names.
const HOP_BY_HOP: [&str; 7] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "upgrade",
    "expect",
    "trailer",
];

fn forwarded_headers<'a>(
    headers: &'a Headers,
    also_drop: &'a [&'a str],
) -> impl Iterator<Item = &'a (String, String)> {
    let named = connection_tokens(headers);
    headers.iter().filter(move |(n, _)| {
        let lower = n.to_ascii_lowercase();
        !HOP_BY_HOP.contains(&lower.as_str())
            && !named.contains(&lower)
            && !also_drop.contains(&lower.as_str())
    })
}

/// Content-Length / Transfer-Encoding: the framing both say (ambiguous:
/// an error, a request smuggling guard).
fn body_framing(headers: &Headers) -> Result<Option<Framing>, String> {
    let chunked = match header(headers, "transfer-encoding") {
        Some(te) if te.to_ascii_lowercase().trim_end().ends_with("chunked") => true,
        Some(te) => return Err(format!("Transfer-Encoding {te:?} is not one memrel relays")),
        None => false,
    };
    let lengths: Vec<&str> = headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .map(|(_, v)| v.as_str())
        .collect();
    match (chunked, lengths.as_slice()) {
        (true, []) => Ok(Some(Framing::Chunked)),
        (true, _) => Err("both Content-Length and Transfer-Encoding".into()),
        (false, []) => Ok(None),
        (false, [first, rest @ ..]) => {
            if rest.iter().any(|v| v != first) {
                return Err("Content-Length headers that differ".into());
            }
            first
                .parse::<u64>()
                .map(|n| Some(Framing::Length(n)))
                .map_err(|_| format!("Content-Length {first:?} is not a number"))
        }
    }
}

struct RequestHead {
    method: String,
    target: String,
    http10: bool,
    headers: Headers,
    framing: Framing,
}

impl RequestHead {
    fn parse(lines: &[String]) -> Result<RequestHead, String> {
        let first = lines.first().map_or("", String::as_str);
        let mut parts = first.split(' ');
        let (Some(method), Some(target), Some(version), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(format!("{first:?} is not a request line"));
        };
        let http10 = match version {
            "HTTP/1.1" => false,
            "HTTP/1.0" => true,
            other => return Err(format!("{other:?} is not HTTP/1.0 or HTTP/1.1")),
        };
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
            return Err(format!("{method:?} is not a method"));
        }
        // An absolute-form target (`http://host/path`): its path.
        let target = match target.strip_prefix("http://") {
            Some(rest) => rest.find('/').map_or("/", |i| &rest[i..]),
            None => target,
        };
        if !target.starts_with('/') && target != "*" {
            return Err(format!("{target:?} is not a path"));
        }
        let headers = parse_headers(&lines[1..])?;
        let framing = body_framing(&headers)?.unwrap_or(Framing::Empty);
        Ok(RequestHead {
            method: method.to_string(),
            target: target.to_string(),
            http10,
            headers,
            framing,
        })
    }

    fn line(&self) -> String {
        format!("{} {}", self.method, self.target)
    }

    /// Whether the client keeps the connection after this exchange.
    fn keeps_alive(&self) -> bool {
        let tokens = connection_tokens(&self.headers);
        if self.http10 {
            tokens.iter().any(|t| t == "keep-alive")
        } else {
            !tokens.iter().any(|t| t == "close")
        }
    }

    /// The head sent upstream.
    fn upstream_head(&self, authority: &str) -> Vec<u8> {
        let mut head = format!(
            "{} {} HTTP/1.1\r\nHost: {authority}\r\n",
            self.method, self.target
        );
        for (name, value) in forwarded_headers(&self.headers, &["host"]) {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        head.into_bytes()
    }
}

/// A body's bytes, decoded (Content-Length or chunked), read as they come.
struct BodyReader<'a, R: BufRead> {
    inner: &'a mut R,
    framing: Framing,
    /// Bytes left of the body (Length) or of the current chunk (Chunked).
    left: u64,
    done: bool,
}

impl<'a, R: BufRead> BodyReader<'a, R> {
    fn new(inner: &'a mut R, framing: Framing) -> Self {
        let (left, done) = match framing {
            Framing::Length(n) => (n, n == 0),
            Framing::Empty => (0, true),
            Framing::Chunked | Framing::Close => (0, false),
        };
        BodyReader {
            inner,
            framing,
            left,
            done,
        }
    }

    fn next_chunk(&mut self) -> io::Result<()> {
        let line = read_line(self.inner)?;
        let size = line.split(';').next().unwrap_or("").trim();
        self.left = u64::from_str_radix(size, 16)
            .map_err(|_| bad_data(format!("{size:?} is not a chunk size")))?;
        if self.left == 0 {
            // Trailers, dropped, up to the empty line.
            while !read_line(self.inner)?.is_empty() {}
            self.done = true;
        }
        Ok(())
    }
}

impl<R: BufRead> Read for BodyReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.done || buf.is_empty() {
            return Ok(0);
        }
        if self.framing == Framing::Chunked && self.left == 0 {
            self.next_chunk()?;
            if self.done {
                return Ok(0);
            }
        }
        let want = if self.framing == Framing::Close {
            buf.len()
        } else {
            buf.len()
                .min(usize::try_from(self.left).unwrap_or(usize::MAX))
        };
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 {
            if self.framing == Framing::Close {
                self.done = true;
                return Ok(0);
            }
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        if self.framing != Framing::Close {
            self.left -= n as u64;
        }
        if self.left == 0 {
            match self.framing {
                Framing::Length(_) => self.done = true,
                Framing::Chunked => {
                    read_line(self.inner)?; // the CRLF after the data
                }
                Framing::Empty | Framing::Close => {}
            }
        }
        Ok(n)
    }
}

fn bad_data(text: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, text)
}

/// One line (at most 4 KiB) without its line end.
fn read_line(reader: &mut impl BufRead) -> io::Result<String> {
    let mut line = Vec::new();
    reader.take(4096).read_until(b'\n', &mut line)?;
    if !line.ends_with(b"\n") {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    let text = String::from_utf8(line).map_err(|_| bad_data("a line that is not text".into()))?;
    Ok(text.trim_end_matches(['\r', '\n']).to_string())
}

// ---------------------------------------------------------------- one exchange

/// Why an exchange went wrong, and on whose side.
enum Failure {
    /// The client broke off (its request or its reading).
    Client(String),
    /// The upstream, before its answer's head was relayed: a 502 is due.
    UpstreamBefore(String),
    /// The upstream, after the head was relayed: the connection is cut.
    UpstreamMidway(String),
}

/// What one exchange did, for the stats and `after`.
struct Outcome {
    status: Option<u16>,
    keep: bool,
    /// The proxy's own answer still to send (a 502), after `after`: the
    /// client learns of the failure once it is marked.
    answer: Option<Vec<u8>>,
}

/// One request forwarded and its answer relayed; whether the client
/// connection is kept.
fn exchange(
    shared: &Shared,
    id: u64,
    request: &RequestHead,
    reader: &mut BufReader<TcpStream>,
    writer: &mut TcpStream,
    upstream: &mut Option<Upstream>,
) -> bool {
    if header(&request.headers, "expect").is_some_and(|e| e.eq_ignore_ascii_case("100-continue"))
        && writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").is_err()
    {
        return false;
    }
    let line = request.line();
    let mut body = BodyReader::new(reader, request.framing);
    let mut prefix = Vec::new();
    if shared.routes.needs_body(&request.method, &request.target) {
        if let Err(e) = (&mut body)
            .take(MAX_MATCHED_BODY_BYTES as u64 + 1)
            .read_to_end(&mut prefix)
        {
            bad_request(shared, writer, &format!("reading its body failed: {e}"));
            return false;
        }
    }
    let read_at = Instant::now();
    let whole = body.done.then_some(prefix.as_slice());
    let matched = shared.routes.find(&request.method, &request.target, whole);
    bump(&shared.counters.requests, 1);
    let mut hooks_s = 0.0;
    if let Some(m) = &matched {
        bump(&shared.counters.matched, 1);
        let hooks_at = Instant::now();
        call_hook(shared, "before", || {
            shared.hooks.before(m.phase, m.model.as_deref(), &line)
        });
        hooks_s = hooks_at.elapsed().as_secs_f64();
    }
    let result = forward(
        shared, id, request, &mut body, &prefix, writer, upstream, read_at, hooks_s,
    );
    let outcome = settle(shared, &line, result, upstream);
    if let Some(m) = &matched {
        call_hook(shared, "after", || {
            shared
                .hooks
                .after(m.phase, m.model.as_deref(), &line, outcome.status)
        });
    }
    if let Some(answer) = &outcome.answer {
        let _ = writer.write_all(answer);
    }
    outcome.keep && body.done && request.keeps_alive()
}

/// The stats and stderr of an exchange's end, and the client's 502 due.
fn settle(
    shared: &Shared,
    line: &str,
    result: Result<(u16, bool), Failure>,
    upstream: &mut Option<Upstream>,
) -> Outcome {
    let failed = |why: &str| {
        bump(&shared.counters.upstream_failures, 1);
        eprintln!("memrel: proxy: {line}: {why}");
    };
    match result {
        Ok((status, keep)) => Outcome {
            status: Some(status),
            keep,
            answer: None,
        },
        Err(Failure::Client(why)) => {
            bump(&shared.counters.client_aborts, 1);
            eprintln!("memrel: proxy: {line}: the client broke off ({why})");
            *upstream = None;
            Outcome {
                status: None,
                keep: false,
                answer: None,
            }
        }
        Err(Failure::UpstreamBefore(why)) => {
            let text = format!("the upstream {} did not answer: {why}", shared.upstream);
            failed(&format!("{text}; the client gets a 502"));
            *upstream = None;
            let body = format!("memrel proxy: {line}: {text}\n");
            Outcome {
                status: None,
                keep: false,
                answer: Some(plain_answer(502, "Bad Gateway", &body, "")),
            }
        }
        Err(Failure::UpstreamMidway(why)) => {
            failed(&format!(
                "the upstream {} broke off its answer: {why}; the client's connection is closed (its answer is cut)",
                shared.upstream
            ));
            *upstream = None;
            Outcome {
                status: None,
                keep: false,
                answer: None,
            }
        }
    }
}

fn call_hook(shared: &Shared, which: &str, hook: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(hook)).is_err() {
        bump(&shared.counters.hook_panics, 1);
        eprintln!(
            "memrel: proxy: the {which} hook panicked; the request is forwarded all the same"
        );
    }
}

/// Sends the request upstream and relays its answer: `(status, whether
/// both connections may be kept)`.
#[allow(clippy::too_many_arguments)]
fn forward<R: BufRead>(
    shared: &Shared,
    id: u64,
    request: &RequestHead,
    body: &mut BodyReader<'_, R>,
    prefix: &[u8],
    writer: &mut TcpStream,
    upstream: &mut Option<Upstream>,
    read_at: Instant,
    hooks_s: f64,
) -> Result<(u16, bool), Failure> {
    let conn = connected(shared, id, upstream).map_err(Failure::UpstreamBefore)?;
    let head = request.upstream_head(&shared.authority);
    let chunked = request.framing == Framing::Chunked;
    let mut sent = head.len() as u64;
    let mut first = head;
    if chunked && !prefix.is_empty() {
        first.extend_from_slice(format!("{:x}\r\n", prefix.len()).as_bytes());
        first.extend_from_slice(prefix);
        first.extend_from_slice(b"\r\n");
    } else {
        first.extend_from_slice(prefix);
    }
    sent += prefix.len() as u64;
    let up = |e: io::Error| Failure::UpstreamBefore(format!("sending the request failed: {e}"));
    conn.writer.write_all(&first).map_err(up)?;
    let send_s = (read_at.elapsed().as_secs_f64() - hooks_s).max(0.0);
    sent += stream_body(body, &mut conn.writer, chunked)?;
    bump(&shared.counters.request_bytes, sent);
    relay_answer(shared, request, conn, writer, send_s)
}

/// The rest of a request's body upstream, as it comes.
fn stream_body<R: BufRead>(
    body: &mut BodyReader<'_, R>,
    to: &mut TcpStream,
    chunked: bool,
) -> Result<u64, Failure> {
    let mut buf = vec![0u8; RELAY_BUFFER_BYTES];
    let mut sent = 0u64;
    let up =
        |e: io::Error| Failure::UpstreamBefore(format!("sending the request's body failed: {e}"));
    loop {
        let n = body
            .read(&mut buf)
            .map_err(|e| Failure::Client(format!("reading its request's body failed: {e}")))?;
        if n == 0 {
            break;
        }
        if chunked {
            to.write_all(format!("{n:x}\r\n").as_bytes()).map_err(up)?;
        }
        to.write_all(&buf[..n]).map_err(up)?;
        if chunked {
            to.write_all(b"\r\n").map_err(up)?;
        }
        sent += n as u64;
    }
    if chunked {
        to.write_all(b"0\r\n\r\n").map_err(up)?;
        sent += 5;
    }
    Ok(sent)
}

/// The connection kept from the last exchange if still open, else a new one.
fn connected<'a>(
    shared: &Shared,
    id: u64,
    upstream: &'a mut Option<Upstream>,
) -> Result<&'a mut Upstream, String> {
    if upstream.as_ref().is_some_and(|u| !still_open(&u.writer)) {
        *upstream = None;
    }
    if upstream.is_none() {
        let stream = connect(&shared.authority)?;
        let (Ok(read_half), Ok(registered)) = (stream.try_clone(), stream.try_clone()) else {
            return Err("cannot use the connection's socket".into());
        };
        if let Some(open) = lock(&shared.open).get_mut(&id) {
            open.truncate(1); // the client's socket; the old upstream's goes
            open.push(registered);
        }
        *upstream = Some(Upstream {
            reader: BufReader::new(read_half),
            writer: stream,
        });
    }
    upstream
        .as_mut()
        .ok_or_else(|| "no upstream connection".to_string())
}

/// An idle kept connection the upstream has not closed (nothing to read).
fn still_open(stream: &TcpStream) -> bool {
    if stream.set_nonblocking(true).is_err() {
        return false;
    }
    let open =
        matches!(stream.peek(&mut [0u8; 1]), Err(e) if e.kind() == io::ErrorKind::WouldBlock);
    stream.set_nonblocking(false).is_ok() && open
}

fn connect(authority: &str) -> Result<TcpStream, String> {
    let addrs = authority
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {authority}: {e}"))?;
    let mut last = format!("{authority} resolves to no address");
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Err(e) => last = format!("cannot connect to {addr}: {e}"),
        }
    }
    Err(last)
}

/// The upstream's answer relayed to the client: its informational heads,
/// its head, its body as it comes.
fn relay_answer(
    shared: &Shared,
    request: &RequestHead,
    conn: &mut Upstream,
    writer: &mut TcpStream,
    send_s: f64,
) -> Result<(u16, bool), Failure> {
    let before = |e: String| Failure::UpstreamBefore(e);
    let (status, reason, headers, http10, head_at) = loop {
        let lines = read_head(&mut conn.reader)
            .map_err(|e| before(format!("its answer's head: {e}")))?
            .ok_or_else(|| before("it closed the connection without an answer".into()))?;
        let head_at = Instant::now();
        let (status, reason, http10) = status_line(&lines[0]).map_err(before)?;
        let headers = parse_headers(&lines[1..]).map_err(before)?;
        if status == 101 {
            return Err(before(
                "101 Switching Protocols: the proxy relays no upgrades".into(),
            ));
        }
        if (100..200).contains(&status) {
            let head = client_head(status, &reason, &headers, "", &[]);
            writer
                .write_all(&head)
                .map_err(|e| Failure::Client(e.to_string()))?;
            continue;
        }
        break (status, reason, headers, http10, head_at);
    };
    let no_body = request.method == "HEAD" || status == 204 || status == 304;
    let framing = if no_body {
        Framing::Empty
    } else {
        body_framing(&headers)
            .map_err(before)?
            .unwrap_or(Framing::Close)
    };
    let upstream_keeps = !http10
        && framing != Framing::Close
        && !connection_tokens(&headers).iter().any(|t| t == "close");
    // An HTTP/1.0 client reads no chunks: de-chunked, then closed.
    let dechunk = request.http10 && framing == Framing::Chunked;
    let client_keeps = request.keeps_alive() && framing != Framing::Close && !dechunk;
    let connection = match (client_keeps, request.http10) {
        (false, _) => "Connection: close\r\n",
        (true, true) => "Connection: keep-alive\r\n",
        (true, false) => "",
    };
    let drop: &[&str] = if dechunk { &["transfer-encoding"] } else { &[] };
    let mut out = ClientOut {
        writer,
        shared,
        pending: client_head(status, &reason, &headers, connection, drop),
        relayed: 0,
        added: Some((head_at, send_s)),
    };
    let relayed = if framing == Framing::Chunked && !dechunk {
        relay_chunked(&mut conn.reader, &mut out)
    } else {
        relay_plain(&mut conn.reader, framing, &mut out)
    };
    // Even after a failure midway: the bytes that came reach the client.
    let flushed = out.flush();
    relayed?;
    flushed?;
    Ok((status, upstream_keeps && client_keeps))
}

/// What goes to the client: pieces gathered while the upstream's bytes are
/// at hand, written in one go before a read that may wait, so an answer
/// already read is one write (its head with it) and a stream's piece
/// leaves as soon as it came.
struct ClientOut<'a> {
    writer: &'a mut TcpStream,
    shared: &'a Shared,
    pending: Vec<u8>,
    /// Body bytes taken from the upstream.
    relayed: u64,
    /// When the answer's head was read, and the request's own time: the
    /// added time, counted as the head is handed to the client.
    added: Option<(Instant, f64)>,
}

impl ClientOut<'_> {
    fn push(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
        self.relayed += bytes.len() as u64;
    }

    /// Writes what is pending unless the upstream's next bytes are at hand
    /// (`line`: the next read is of a line, which a partial one would
    /// make wait).
    fn flush_before(&mut self, upstream: &BufReader<TcpStream>, line: bool) -> Result<(), Failure> {
        let at_hand = if line {
            upstream.buffer().contains(&b'\n')
        } else {
            !upstream.buffer().is_empty()
        };
        if at_hand && self.pending.len() < RELAY_BUFFER_BYTES {
            return Ok(());
        }
        self.flush()
    }

    fn flush(&mut self) -> Result<(), Failure> {
        if self.pending.is_empty() {
            return Ok(());
        }
        // Counted as the head is handed over: the client may read the
        // stats as soon as it has its answer.
        if let Some((head_at, send_s)) = self.added.take() {
            lock(&self.shared.added).push(send_s + head_at.elapsed().as_secs_f64());
        }
        bump(
            &self.shared.counters.response_bytes,
            self.pending.len() as u64,
        );
        self.writer
            .write_all(&self.pending)
            .map_err(|e| Failure::Client(e.to_string()))?;
        self.pending.clear();
        Ok(())
    }

    fn midway(&self, e: &io::Error) -> Failure {
        let what = match e.kind() {
            io::ErrorKind::UnexpectedEof => "it closed the connection".to_string(),
            _ => e.to_string(),
        };
        Failure::UpstreamMidway(format!("{what} after {} bytes of its body", self.relayed))
    }
}

/// `HTTP/1.1 200 OK` → (200, `OK`, HTTP/1.0?).
fn status_line(line: &str) -> Result<(u16, String, bool), String> {
    let mut parts = line.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    let http10 = match version {
        "HTTP/1.1" => false,
        "HTTP/1.0" => true,
        _ => return Err(format!("{line:?} is not an HTTP/1.x status line")),
    };
    let status = parts
        .next()
        .and_then(|s| s.parse::<u16>().ok())
        .filter(|s| (100..1000).contains(s))
        .ok_or_else(|| format!("{line:?} has no status"))?;
    Ok((status, parts.next().unwrap_or("").to_string(), http10))
}

/// The head written to the client.
fn client_head(
    status: u16,
    reason: &str,
    headers: &Headers,
    connection: &str,
    also_drop: &[&str],
) -> Vec<u8> {
    let mut head = format!("HTTP/1.1 {status} {reason}\r\n");
    for (name, value) in forwarded_headers(headers, also_drop) {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(connection);
    head.push_str("\r\n");
    head.into_bytes()
}

/// A body relayed as it comes (decoded where it was chunked: every piece
/// written as it is decoded).
fn relay_plain(
    reader: &mut BufReader<TcpStream>,
    framing: Framing,
    out: &mut ClientOut<'_>,
) -> Result<(), Failure> {
    let mut buf = vec![0u8; RELAY_BUFFER_BYTES];
    let mut body = BodyReader::new(reader, framing);
    loop {
        if framing == Framing::Chunked {
            out.flush()?;
        } else {
            out.flush_before(body.inner, false)?;
        }
        let n = body.read(&mut buf).map_err(|e| out.midway(&e))?;
        if n == 0 {
            return Ok(());
        }
        out.push(&buf[..n]);
    }
}

/// A chunked body relayed byte for byte (sizes, data, trailers), each
/// piece as it comes.
fn relay_chunked(
    reader: &mut BufReader<TcpStream>,
    out: &mut ClientOut<'_>,
) -> Result<(), Failure> {
    let mut buf = vec![0u8; RELAY_BUFFER_BYTES];
    let line = |reader: &mut BufReader<TcpStream>, out: &mut ClientOut<'_>| {
        out.flush_before(reader, true)?;
        let line = raw_line(reader).map_err(|e| out.midway(&e))?;
        out.push(&line);
        Ok::<_, Failure>(line)
    };
    loop {
        let size_line = line(reader, out)?;
        let text = String::from_utf8_lossy(&size_line);
        let size_text = text.trim_end().split(';').next().unwrap_or("").trim();
        let size = u64::from_str_radix(size_text, 16)
            .map_err(|_| out.midway(&bad_data(format!("{size_text:?} is not a chunk size"))))?;
        if size == 0 {
            loop {
                let trailer = line(reader, out)?;
                if trailer == b"\r\n" || trailer == b"\n" {
                    return Ok(());
                }
            }
        }
        let mut left = size;
        while left > 0 {
            out.flush_before(reader, false)?;
            let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
            let n = reader.read(&mut buf[..want]).map_err(|e| out.midway(&e))?;
            if n == 0 {
                return Err(out.midway(&io::ErrorKind::UnexpectedEof.into()));
            }
            out.push(&buf[..n]);
            left -= n as u64;
        }
        line(reader, out)?;
    }
}

/// One line with its line end, as sent.
fn raw_line(reader: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut line = Vec::new();
    reader.take(4096).read_until(b'\n', &mut line)?;
    if !line.ends_with(b"\n") {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(line)
}

#[cfg(test)]
mod tests;
