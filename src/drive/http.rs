//! The HTTP side of `memrel drive`: one request sent and its answer read
//! whole, with a timeout, and every way it can go wrong said in words that
//! name the request (refused, timed out, the server gone, a status that was
//! not expected, a body that is not JSON). It reads no memory: the driver
//! takes the readings around each call.
//!
//! A request runs on a thread of its own while the caller waits for its
//! answer in steps of [`STOP_POLL`], looking at memrel's SIGINT/SIGTERM
//! flag (`signals`) between them: Ctrl-C stops a drive
//! within that step however long the server hangs (the request's thread is
//! abandoned; it ends with memrel).

use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::signals;

/// How often a caller waiting for an answer looks at the signal flag.
const STOP_POLL: Duration = Duration::from_millis(20);

/// What a request that a signal stopped says (the driver tells it apart).
pub const STOPPED: &str = "stopped: memrel received";

/// The most bytes of an answer kept (a model list, a status): more is cut.
const MAX_BODY_BYTES: u64 = 1 << 20;

/// An answer, whatever its status.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: String,
    /// From the send to the whole answer read.
    pub latency_s: f64,
}

/// A client for one server (its base URL, no trailing slash).
pub struct Client {
    base: String,
    agent: ureq::Agent,
}

impl Client {
    pub fn new(base: &str) -> Client {
        Client {
            base: base.trim_end_matches('/').to_string(),
            agent: ureq::AgentBuilder::new().build(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Sends `method path` (with a JSON body) and reads the answer; `Err`
    /// says why there is none, in words (no request name: the caller adds
    /// it), or that SIGINT/SIGTERM stopped the wait (it starts with
    /// [`STOPPED`]).
    pub fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
        timeout_s: f64,
    ) -> Result<Answer, String> {
        if let Some(sig) = signals::received() {
            return Err(format!("{STOPPED} {}", signals::name(sig)));
        }
        let (agent, url, method, body) = (
            self.agent.clone(),
            self.url(path),
            method.to_string(),
            body.cloned(),
        );
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("memrel-request".into())
            .spawn(move || {
                let _ = tx.send(exchange(&agent, &method, &url, body.as_ref(), timeout_s));
            })
            .map_err(|e| format!("cannot start the request's thread: {e}"))?;
        loop {
            match rx.recv_timeout(STOP_POLL) {
                Ok(answer) => return answer,
                Err(RecvTimeoutError::Timeout) => {
                    if let Some(sig) = signals::received() {
                        return Err(format!("{STOPPED} {}", signals::name(sig)));
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err("the request's thread ended without an answer".into())
                }
            }
        }
    }
}

/// One request and its whole answer, on the request's thread.
fn exchange(
    agent: &ureq::Agent,
    method: &str,
    url: &str,
    body: Option<&serde_json::Value>,
    timeout_s: f64,
) -> Result<Answer, String> {
    let timeout = Duration::from_secs_f64(timeout_s.max(0.001));
    let request = agent.request(method, url).timeout(timeout);
    let started = Instant::now();
    let result = match body {
        Some(json) => request
            .set("Content-Type", "application/json")
            .send_string(&json.to_string()),
        None => request.call(),
    };
    let response = match result {
        Ok(response) => response,
        Err(ureq::Error::Status(_, response)) => response,
        Err(ureq::Error::Transport(t)) => return Err(transport(&t, timeout_s)),
    };
    let status = response.status();
    let mut body = String::new();
    use std::io::Read;
    response
        .into_reader()
        .take(MAX_BODY_BYTES)
        .read_to_string(&mut body)
        .map_err(|e| {
            if is_timeout(&e.to_string()) {
                format!("timed out after {timeout_s} s reading the answer")
            } else {
                format!("the answer was cut off ({e}): did the server die?")
            }
        })?;
    Ok(Answer {
        status,
        body,
        latency_s: started.elapsed().as_secs_f64(),
    })
}

fn is_timeout(text: &str) -> bool {
    let text = text.to_lowercase();
    text.contains("timed out") || text.contains("timeout") || text.contains("would block")
}

/// A transport error in words.
fn transport(t: &ureq::Transport, timeout_s: f64) -> String {
    let text = t.to_string();
    let lower = text.to_lowercase();
    if lower.contains("connection refused") {
        "connection refused: nothing listens there (is the server up, is --url right?)".into()
    } else if is_timeout(&lower) {
        format!("timed out after {timeout_s} s without an answer (raise the request's timeout_s if it is slow)")
    } else if lower.contains("reset")
        || lower.contains("closed")
        || lower.contains("broken pipe")
        || lower.contains("unexpected eof")
        || lower.contains("bad header")
    {
        format!(
            "the connection was closed without an answer ({}): did the server die?",
            first_line(&text)
        )
    } else {
        format!("no answer: {}", first_line(&text))
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}

/// A body as it may be quoted in a message (one line, cut).
pub fn excerpt(body: &str) -> String {
    let one: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
    let cut: String = one.chars().take(120).collect();
    if cut.len() < one.len() {
        format!("{cut}…")
    } else {
        cut
    }
}
