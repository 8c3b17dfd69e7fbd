//! A hub on 127.0.0.1 that the tests start themselves (std::net, one request
//! per connection): the part of the Hugging Face Hub's file API that hf-hub
//! 0.4.3's sync client uses, and a log of every request it got.
//!
//! - `GET /api/models/{org}/{name}/revision/{rev}`: the repository's commit
//!   (`sha`) and files (`siblings[].rfilename`); 404 `X-Error-Code:
//!   RepoNotFound` for an unknown repository (the model info of a gated
//!   repository is public, as on the Hub).
//! - `GET /{org}/{name}/resolve/{rev}/{file}` with `Range: bytes=A-` or
//!   `bytes=A-B`: 206 with `Content-Range: bytes A-B/SIZE`, `ETag` and
//!   `X-Repo-Commit` (hf-hub first asks for `bytes=0-0` to learn those, then
//!   for `bytes=N-`, N being what a partial download already holds); 401
//!   (no token) or 403 (another token) with `X-Error-Code: GatedRepo` for a
//!   gated repository; 404 `EntryNotFound` for a file it does not have.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// The commit every served repository is at.
pub const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// A repository the hub serves.
pub struct HubRepo {
    pub id: String,
    pub files: Vec<(String, Vec<u8>)>,
    /// Gated: only `Authorization: Bearer <token>` gets its files.
    pub token: Option<String>,
}

/// One request as the hub saw it, and what it answered.
#[derive(Debug, Clone)]
pub struct Logged {
    pub path: String,
    pub range: Option<String>,
    pub authorization: Option<String>,
    pub status: u16,
    pub body_bytes: usize,
}

pub struct FakeHub {
    pub endpoint: String,
    log: Arc<Mutex<Vec<Logged>>>,
}

impl FakeHub {
    /// Listens on a free port of 127.0.0.1 and serves `repos` until the test ends.
    pub fn start(repos: Vec<HubRepo>) -> FakeHub {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let endpoint = format!("http://{}", listener.local_addr().expect("an address"));
        let log = Arc::new(Mutex::new(Vec::new()));
        let served = Arc::clone(&log);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                if let Some(logged) = serve(stream, &repos) {
                    served.lock().unwrap().push(logged);
                }
            }
        });
        FakeHub { endpoint, log }
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Logged> {
        self.log.lock().unwrap().clone()
    }
}

/// The entity tag the hub gives a file's bytes (FNV-1a, as hex).
pub fn etag(bytes: &[u8]) -> String {
    let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}

struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

fn error(status: u16, code: &str, message: &str) -> Answer {
    Answer {
        status,
        headers: vec![("X-Error-Code".into(), code.into())],
        body: serde_json::json!({ "error": message })
            .to_string()
            .into_bytes(),
    }
}

fn serve(stream: TcpStream, repos: &[HubRepo]) -> Option<Logged> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let path = line.split_whitespace().nth(1)?.to_string();
    let (mut range, mut authorization) = (None, None);
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).ok()? == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.trim().split_once(':') {
            match name.to_ascii_lowercase().as_str() {
                "range" => range = Some(value.trim().to_string()),
                "authorization" => authorization = Some(value.trim().to_string()),
                _ => {}
            }
        }
    }
    let answer = answer(&path, range.as_deref(), authorization.as_deref(), repos);
    let reason = match answer.status {
        200 => "OK",
        206 => "Partial Content",
        401 => "Unauthorized",
        403 => "Forbidden",
        _ => "Not Found",
    };
    let mut head = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Length: {}\r\nConnection: close\r\n",
        answer.status,
        answer.body.len()
    );
    for (name, value) in &answer.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let mut stream = stream;
    let _ = stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(&answer.body))
        .and_then(|()| stream.flush());
    Some(Logged {
        path,
        range,
        authorization,
        status: answer.status,
        body_bytes: answer.body.len(),
    })
}

fn answer(
    path: &str,
    range: Option<&str>,
    authorization: Option<&str>,
    repos: &[HubRepo],
) -> Answer {
    let find = |id: &str| repos.iter().find(|r| r.id == id);
    if let Some(rest) = path.strip_prefix("/api/models/") {
        let Some((id, _revision)) = rest.split_once("/revision/") else {
            return error(404, "RepoNotFound", "no revision in the path");
        };
        let Some(repo) = find(id) else {
            return error(404, "RepoNotFound", "Repository not found");
        };
        let siblings: Vec<_> = repo
            .files
            .iter()
            .map(|(name, _)| serde_json::json!({ "rfilename": name }))
            .collect();
        return Answer {
            status: 200,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: serde_json::json!({ "id": id, "sha": COMMIT, "siblings": siblings })
                .to_string()
                .into_bytes(),
        };
    }
    let Some((id, rest)) = path.trim_start_matches('/').split_once("/resolve/") else {
        return error(404, "RepoNotFound", "Repository not found");
    };
    let Some(repo) = find(id) else {
        return error(404, "RepoNotFound", "Repository not found");
    };
    if let Some(token) = &repo.token {
        if authorization != Some(format!("Bearer {token}").as_str()) {
            let status = if authorization.is_none() { 401 } else { 403 };
            return error(
                status,
                "GatedRepo",
                &format!("Access to model {id} is restricted. You must have access to it and be authenticated to access it. Please log in."),
            );
        }
    }
    let file = rest.split_once('/').map_or("", |(_revision, file)| file);
    let Some((_, bytes)) = repo.files.iter().find(|(name, _)| name == file) else {
        return error(404, "EntryNotFound", "Entry not found");
    };
    let size = bytes.len();
    let (start, end) = range
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.split_once('-'))
        .map(|(a, b)| {
            let start: usize = a.parse().unwrap_or(0);
            let end = b
                .parse()
                .map_or(size.saturating_sub(1), |b: usize| b.min(size - 1));
            (start, end)
        })
        .unwrap_or((0, size.saturating_sub(1)));
    let mut headers = vec![
        ("ETag".to_string(), format!("\"{}\"", etag(bytes))),
        ("X-Repo-Commit".to_string(), COMMIT.to_string()),
        ("Accept-Ranges".to_string(), "bytes".to_string()),
    ];
    let status = if range.is_some() {
        headers.push((
            "Content-Range".into(),
            format!("bytes {start}-{end}/{size}"),
        ));
        206
    } else {
        200
    };
    Answer {
        status,
        headers,
        body: bytes[start..=end].to_vec(),
    }
}
