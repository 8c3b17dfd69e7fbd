//! The routes' matching rules, and the proxy against a real upstream: an
//! HTTP/1.1 server on a std `TcpListener` thread written here (its own
//! parsing, not the proxy's), whose every request and connection is written
//! to a log shared with the hooks, so the order of `before`, the upstream
//! seeing the request and `after` is asserted, not assumed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use crate::drive::cycle::{preset, PresetArgs};

type Log = Arc<Mutex<Vec<String>>>;

fn log_of(log: &Log) -> Vec<String> {
    log.lock().expect("the log").clone()
}

/// Hooks that write to the shared log (and panic where told).
struct Logging {
    log: Log,
    panic_before: bool,
}

impl ProxyHooks for Logging {
    fn before(&self, phase: Phase, model: Option<&str>, line: &str) {
        self.log.lock().expect("log").push(format!(
            "before {} {} {line}",
            phase.as_str(),
            model.unwrap_or("-")
        ));
        if self.panic_before {
            panic!("a hook that fails");
        }
    }

    fn after(&self, phase: Phase, model: Option<&str>, line: &str, status: Option<u16>) {
        self.log.lock().expect("log").push(format!(
            "after {} {} {line} {}",
            phase.as_str(),
            model.unwrap_or("-"),
            status.map_or("failed".to_string(), |s| s.to_string())
        ));
    }
}

/// 8 MiB of bytes that are not a repeated pattern.
fn big_body() -> Vec<u8> {
    let mut x: u32 = 0x1234_5678;
    (0..8 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8
        })
        .collect()
}

/// The chunked answer of `/stream`, exactly as the upstream writes it, in
/// pieces (an SSE stream): the upstream waits for `go` before the last.
fn stream_pieces() -> Vec<Vec<u8>> {
    vec![
        b"14\r\ndata: {\"token\": 1}\n\n\r\n".to_vec(),
        b"14;ext=1\r\ndata: {\"token\": 2}\n\n\r\n".to_vec(),
        b"d\r\ndata: [DONE]\n\r\n0\r\nX-Trailer: t\r\n\r\n".to_vec(),
    ]
}

/// The test's upstream: answers by path, writes `upstream METHOD TARGET
/// (BODY)` to the log when a request's head and body are read.
struct Upstream {
    port: u16,
    connections: Arc<Mutex<usize>>,
    go: mpsc::Sender<()>,
}

fn upstream(log: &Log) -> Upstream {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let connections = Arc::new(Mutex::new(0));
    let (go, go_rx) = mpsc::channel::<()>();
    let go_rx = Arc::new(Mutex::new(go_rx));
    let (log, counted) = (Arc::clone(log), Arc::clone(&connections));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            *counted.lock().expect("count") += 1;
            let (log, go_rx) = (Arc::clone(&log), Arc::clone(&go_rx));
            std::thread::spawn(move || upstream_connection(stream, &log, &go_rx));
        }
    });
    Upstream {
        port,
        connections,
        go,
    }
}

fn upstream_connection(stream: TcpStream, log: &Log, go: &Mutex<mpsc::Receiver<()>>) {
    let mut writer = stream.try_clone().expect("clone");
    let mut reader = BufReader::new(stream);
    loop {
        let mut head = Vec::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
            head.push(line.trim_end().to_string());
        }
        let get = |name: &str| {
            head.iter().find_map(|h| {
                let (n, v) = h.split_once(':')?;
                n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
            })
        };
        let mut body = Vec::new();
        if let Some(n) = get("content-length") {
            body.resize(n.parse().expect("length"), 0);
            reader.read_exact(&mut body).expect("body");
        } else if get("transfer-encoding").is_some() {
            loop {
                let mut size = String::new();
                reader.read_line(&mut size).expect("size");
                let size = usize::from_str_radix(size.trim(), 16).expect("hex");
                let mut chunk = vec![0; size + 2];
                reader.read_exact(&mut chunk).expect("chunk");
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..size]);
            }
        }
        let mut parts = head[0].split(' ');
        let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        log.lock().expect("log").push(format!(
            "upstream {method} {target} ({} bytes, host {})",
            body.len(),
            get("host").unwrap_or_default()
        ));
        let answer = |body: &[u8]| {
            let mut a = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .into_bytes();
            a.extend_from_slice(body);
            a
        };
        match target {
            "/big" => writer.write_all(&answer(&big_body())).expect("big"),
            "/stream" => {
                writer
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
                    .expect("head");
                let pieces = stream_pieces();
                for (i, piece) in pieces.iter().enumerate() {
                    if i == pieces.len() - 1 {
                        let _ = go.lock().expect("go").recv_timeout(Duration::from_secs(10));
                    }
                    writer.write_all(piece).expect("piece");
                }
            }
            "/die" => {
                writer
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nten bytes.")
                    .expect("part");
                return;
            }
            "/once" => {
                // Closes after its answer without saying so, as a server
                // whose keep-alive timeout passed.
                writer.write_all(&answer(b"once")).expect("once");
                return;
            }
            "/hash" => {
                let sum: u64 = body.iter().map(|&b| b as u64).sum();
                writer
                    .write_all(&answer(format!("{} {sum}", body.len()).as_bytes()))
                    .expect("hash")
            }
            _ => writer
                .write_all(&answer(
                    format!("{{\"saw\": \"{method} {target}\"}}").as_bytes(),
                ))
                .expect("answer"),
        }
    }
}

/// An answer as the client reads it: the head's text and the body's bytes
/// exactly as relayed (chunked framing included).
fn read_answer(reader: &mut BufReader<TcpStream>) -> (String, Vec<u8>) {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        assert!(
            reader.read_line(&mut line).expect("head") > 0,
            "the answer's head: {head}"
        );
        head.push_str(&line);
        if line == "\r\n" && !head.starts_with("HTTP/1.1 100") {
            break;
        }
        if line == "\r\n" {
            head.clear();
        }
    }
    let lower = head.to_ascii_lowercase();
    let mut body = Vec::new();
    if let Some(n) = lower
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
    {
        body.resize(n.trim().parse().expect("length"), 0);
        reader.read_exact(&mut body).expect("body");
    } else if lower.contains("transfer-encoding: chunked") {
        loop {
            let mut size = Vec::new();
            reader.read_until(b'\n', &mut size).expect("size");
            body.extend_from_slice(&size);
            let text = String::from_utf8_lossy(&size);
            let n = usize::from_str_radix(text.trim().split(';').next().unwrap_or(""), 16)
                .expect("hex");
            if n == 0 {
                loop {
                    let mut trailer = Vec::new();
                    reader.read_until(b'\n', &mut trailer).expect("trailer");
                    body.extend_from_slice(&trailer);
                    if trailer == b"\r\n" {
                        break;
                    }
                }
                break;
            }
            let mut chunk = vec![0; n + 2];
            reader.read_exact(&mut chunk).expect("chunk");
            body.extend_from_slice(&chunk);
        }
    } else {
        reader.read_to_end(&mut body).expect("to the end");
    }
    (head, body)
}

struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

fn client(proxy: &Proxy) -> Client {
    let stream = TcpStream::connect(proxy.local_addr()).expect("connect to the proxy");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    Client {
        writer: stream.try_clone().expect("clone"),
        reader: BufReader::new(stream),
    }
}

impl Client {
    fn send(&mut self, method: &str, target: &str, body: Option<&str>) -> (String, Vec<u8>) {
        let request = match body {
            Some(b) => format!(
                "{method} {target} HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
                b.len()
            ),
            None => format!("{method} {target} HTTP/1.1\r\nHost: proxy\r\n\r\n"),
        };
        self.writer.write_all(request.as_bytes()).expect("send");
        read_answer(&mut self.reader)
    }
}

fn start(routes: Routes, log: &Log, up: &Upstream) -> Proxy {
    let hooks = Arc::new(Logging {
        log: Arc::clone(log),
        panic_before: false,
    });
    Proxy::start(
        "127.0.0.1:0",
        &format!("http://127.0.0.1:{}", up.port),
        routes,
        hooks,
    )
    .expect("the proxy starts")
}

fn vllm() -> Routes {
    Routes::of_preset("vllm", &PresetArgs::default()).expect("vllm")
}

fn ollama() -> Routes {
    Routes::of_preset("ollama", &PresetArgs::default()).expect("ollama")
}

#[test]
fn routes_match_method_path_query_and_body_the_most_specific_winning() {
    let vllm = vllm();
    let phase = |r: &Routes, m: &str, t: &str, b: Option<&str>| {
        r.find(m, t, b.map(str::as_bytes))
            .map(|m| (m.phase.as_str().to_string(), m.model))
    };
    let sleep = Some(("sleep".to_string(), None));
    assert_eq!(phase(&vllm, "POST", "/sleep?level=1", None), sleep);
    assert_eq!(phase(&vllm, "POST", "/sleep?level=2", None), sleep);
    assert_eq!(phase(&vllm, "POST", "/sleep?x=y&level=1", None), sleep);
    assert_eq!(
        phase(&vllm, "POST", "/sleep", None),
        None,
        "its key missing"
    );
    assert_eq!(phase(&vllm, "GET", "/sleep?level=1", None), None);
    assert_eq!(phase(&vllm, "POST", "/sleep/?level=1", None), None);
    let wake = Some(("wake".to_string(), None));
    assert_eq!(phase(&vllm, "POST", "/wake_up", None), wake);
    assert_eq!(phase(&vllm, "POST", "/wake_up?tags=weights", None), wake);
    assert_eq!(phase(&vllm, "POST", "/v1/completions", Some("{}")), None);
    assert!(!vllm.needs_body("POST", "/sleep?level=1"));

    // A cycle whose placeholders were filled: only that level marks.
    let args = PresetArgs {
        sleep_level: Some(2),
        model: None,
    };
    let level2 = Routes::of_cycle(&preset("vllm", &args).expect("vllm"));
    assert_eq!(phase(&level2, "POST", "/sleep?level=1", None), None);
    assert_eq!(phase(&level2, "POST", "/sleep?level=2", None), sleep);

    let ollama = ollama();
    assert!(ollama.needs_body("POST", "/api/generate"));
    let load = |m: &str| Some(("load".to_string(), Some(m.to_string())));
    let unload = |m: &str| Some(("unload".to_string(), Some(m.to_string())));
    let gen = |b: &str| phase(&ollama, "POST", "/api/generate", Some(b));
    assert_eq!(gen(r#"{"model": "llama3.2"}"#), load("llama3.2"));
    assert_eq!(
        gen(r#"{"model": "qwen", "prompt": "hi", "stream": true}"#),
        load("qwen")
    );
    assert_eq!(
        gen(r#"{"model": "llama3.2", "keep_alive": 0}"#),
        unload("llama3.2")
    );
    assert_eq!(gen(r#"{"keep_alive": 0.0, "model": "m"}"#), unload("m"));
    assert_eq!(gen(r#"{"model": "m", "keep_alive": "5m"}"#), load("m"));
    assert_eq!(gen(r#"{"prompt": "no model"}"#), None);
    assert_eq!(gen("not json"), None);
    assert_eq!(
        phase(&ollama, "POST", "/api/generate", None),
        None,
        "no body read"
    );
    let only = Routes::of_preset(
        "ollama",
        &PresetArgs {
            sleep_level: None,
            model: Some("llama3.2".into()),
        },
    )
    .expect("ollama");
    assert_eq!(
        phase(
            &only,
            "POST",
            "/api/generate",
            Some(r#"{"model": "llama3.2", "keep_alive": 0}"#)
        ),
        unload("llama3.2")
    );
    assert_eq!(
        phase(
            &only,
            "POST",
            "/api/generate",
            Some(r#"{"model": "qwen", "keep_alive": 0}"#)
        ),
        None
    );

    let v2 = Routes::of_preset("v2", &PresetArgs::default()).expect("v2");
    assert_eq!(
        phase(&v2, "POST", "/v2/repository/models/iris/load", None),
        load("iris")
    );
    assert_eq!(
        phase(&v2, "POST", "/v2/repository/models/iris/unload", None),
        unload("iris")
    );
    assert_eq!(
        phase(&v2, "POST", "/v2/repository/models//load", None),
        None
    );
    assert_eq!(
        phase(&v2, "POST", "/v2/repository/models/a/b/load", None),
        None
    );

    // A body of no keys asks nothing of the request's body.
    let sglang = Routes::of_preset("sglang", &PresetArgs::default()).expect("sglang");
    assert_eq!(
        phase(&sglang, "POST", "/release_memory_occupation", None),
        Some(("sleep".to_string(), None))
    );
    assert!(!sglang.needs_body("POST", "/release_memory_occupation"));

    // Nested objects, arrays, placeholders inside strings.
    let custom = Routes::of_text(
        r#"
[[request]]
phase = "load"
path = "/models/{name}/load"
body = { options = { device = "cuda:{gpu}" }, tags = ["a", "{t}"] }
model = "{name}@{gpu}"
"#,
        &PresetArgs::default(),
    )
    .expect("custom");
    let body = r#"{"options": {"device": "cuda:1", "x": 2}, "tags": ["a", "b"], "y": 1}"#;
    assert_eq!(
        phase(&custom, "POST", "/models/m/load", Some(body)),
        load("m@1")
    );
    let body = r#"{"options": {"device": "cpu"}, "tags": ["a", "b"]}"#;
    assert_eq!(phase(&custom, "POST", "/models/m/load", Some(body)), None);
    let body = r#"{"options": {"device": "cuda:1"}, "tags": ["a"]}"#;
    assert_eq!(phase(&custom, "POST", "/models/m/load", Some(body)), None);
    assert!(Routes::of_text(
        "[[request]]\nphase = \"lunch\"\npath = \"/x\"\n",
        &PresetArgs::default()
    )
    .is_err());
    assert_eq!(
        vllm.describe()[0],
        "POST /sleep?level={sleep_level} → sleep"
    );
}

#[test]
fn a_matched_request_is_marked_before_the_upstream_sees_it_and_after_its_answer() {
    let log: Log = Arc::default();
    let up = upstream(&log);
    let proxy = start(vllm(), &log, &up);
    let mut c = client(&proxy);
    let (head, body) = c.send("POST", "/sleep?level=1", None);
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert_eq!(body, br#"{"saw": "POST /sleep?level=1"}"#);
    let (_, body) = c.send("GET", "/health", None);
    assert_eq!(body, br#"{"saw": "GET /health"}"#);
    c.send("POST", "/wake_up", Some("{}"));
    c.send("POST", "/v1/completions", Some(r#"{"prompt": "x"}"#));
    let host = format!("host 127.0.0.1:{}", up.port);
    assert_eq!(
        log_of(&log),
        [
            "before sleep - POST /sleep?level=1".to_string(),
            format!("upstream POST /sleep?level=1 (0 bytes, {host})"),
            "after sleep - POST /sleep?level=1 200".to_string(),
            format!("upstream GET /health (0 bytes, {host})"),
            "before wake - POST /wake_up".to_string(),
            format!("upstream POST /wake_up (2 bytes, {host})"),
            "after wake - POST /wake_up 200".to_string(),
            format!("upstream POST /v1/completions (15 bytes, {host})"),
        ]
    );
    // Four requests on one client connection, one upstream connection.
    let stats = proxy.stats();
    assert_eq!(
        (stats.connections, stats.requests, stats.matched),
        (1, 4, 2)
    );
    assert_eq!(*up.connections.lock().expect("count"), 1);
    assert_eq!(stats.upstream_failures, 0);
    assert_eq!(stats.added.count, 4);
    assert!(stats.added.median_s.is_some_and(|s| s < 1.0), "{stats:?}");
}

#[test]
fn ollamas_load_and_unload_are_told_apart_by_their_bodies() {
    let log: Log = Arc::default();
    let up = upstream(&log);
    let proxy = start(ollama(), &log, &up);
    let mut c = client(&proxy);
    c.send("POST", "/api/generate", Some(r#"{"model": "llama3.2"}"#));
    c.send(
        "POST",
        "/api/generate",
        Some(r#"{"model": "llama3.2", "keep_alive": 0}"#),
    );
    c.send(
        "POST",
        "/api/chat",
        Some(r#"{"model": "llama3.2", "keep_alive": 0}"#),
    );
    let marks: Vec<String> = log_of(&log)
        .into_iter()
        .filter(|l| !l.starts_with("upstream"))
        .collect();
    assert_eq!(
        marks,
        [
            "before load llama3.2 POST /api/generate",
            "after load llama3.2 POST /api/generate 200",
            "before unload llama3.2 POST /api/generate",
            "after unload llama3.2 POST /api/generate 200",
        ]
    );
    // The bodies read for matching reached the upstream whole.
    assert!(log_of(&log).contains(&format!(
        "upstream POST /api/generate (38 bytes, host 127.0.0.1:{})",
        up.port
    )));
}

#[test]
fn the_upstream_down_is_a_502_naming_the_proxy_the_upstream_and_the_error() {
    let log: Log = Arc::default();
    let port = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let proxy = Proxy::start(
        "127.0.0.1:0",
        &format!("http://127.0.0.1:{port}"),
        vllm(),
        Arc::new(Logging {
            log: Arc::clone(&log),
            panic_before: false,
        }),
    )
    .expect("starts with its upstream down");
    let (head, body) = client(&proxy).send("POST", "/sleep?level=1", None);
    let body = String::from_utf8(body).expect("text");
    assert!(head.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{head}");
    assert!(
        body.contains("memrel proxy")
            && body.contains(&format!("http://127.0.0.1:{port}"))
            && body.contains("POST /sleep?level=1")
            && body.to_lowercase().contains("refused"),
        "{body}"
    );
    assert_eq!(
        log_of(&log),
        [
            "before sleep - POST /sleep?level=1",
            "after sleep - POST /sleep?level=1 failed"
        ]
    );
    assert_eq!(proxy.stats().upstream_failures, 1);
    let e = Proxy::start("127.0.0.1:0", "https://x:1", vllm(), Arc::new(NoHooks));
    assert!(e.is_err_and(|e| e.to_string().contains("plain HTTP")));
}

#[test]
fn large_and_streamed_answers_and_chunked_requests_are_relayed_byte_exact() {
    let log: Log = Arc::default();
    let up = upstream(&log);
    let proxy = start(Routes::default(), &log, &up);
    let mut c = client(&proxy);
    let (head, body) = c.send("GET", "/big", None);
    assert!(head.contains("Content-Length: 8388608\r\n"), "{head}");
    assert!(body == big_body(), "8 MiB relayed exactly");

    // A stream: its first pieces reach the client before the upstream
    // writes its last (nothing is buffered), every byte as written.
    c.writer
        .write_all(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("send");
    let mut head = String::new();
    while !head.ends_with("\r\n\r\n") {
        c.reader.read_line(&mut head).expect("head");
    }
    assert!(head.contains("Transfer-Encoding: chunked\r\n"), "{head}");
    let pieces = stream_pieces();
    let mut first = vec![0; pieces[0].len() + pieces[1].len()];
    c.reader.read_exact(&mut first).expect("the first pieces");
    assert_eq!(first, [pieces[0].clone(), pieces[1].clone()].concat());
    up.go.send(()).expect("go");
    let mut last = vec![0; pieces[2].len()];
    c.reader.read_exact(&mut last).expect("the last piece");
    assert_eq!(last, pieces[2]);

    // A chunked request body of 8 MiB, streamed upstream.
    let big = big_body();
    c.writer
        .write_all(b"POST /hash HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        .expect("head");
    for part in big.chunks(1 << 20) {
        c.writer
            .write_all(format!("{:x}\r\n", part.len()).as_bytes())
            .expect("size");
        c.writer.write_all(part).expect("part");
        c.writer.write_all(b"\r\n").expect("end");
    }
    c.writer.write_all(b"0\r\n\r\n").expect("last");
    let (_, body) = read_answer(&mut c.reader);
    let sum: u64 = big.iter().map(|&b| b as u64).sum();
    assert_eq!(
        String::from_utf8(body).expect("text"),
        format!("{} {sum}", big.len())
    );
    assert_eq!(proxy.stats().connections, 1, "all on one kept connection");
}

#[test]
fn an_upstream_dying_mid_answer_closes_the_client_and_says_so() {
    let log: Log = Arc::default();
    let up = upstream(&log);
    let routes = Routes::of_text(
        "[[request]]\nphase = \"load\"\npath = \"/die\"\n",
        &PresetArgs::default(),
    )
    .expect("routes");
    let proxy = start(routes, &log, &up);
    let mut c = client(&proxy);
    c.writer
        .write_all(b"POST /die HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        .expect("send");
    let mut all = Vec::new();
    c.reader.read_to_end(&mut all).expect("closed by the proxy");
    let all = String::from_utf8(all).expect("text");
    assert!(
        all.ends_with("ten bytes."),
        "a cut answer, then closed: {all}"
    );
    assert_eq!(
        log_of(&log).last().map(String::as_str),
        Some("after load - POST /die failed")
    );
    assert_eq!(proxy.stats().upstream_failures, 1);
}

#[test]
fn a_panicking_hook_and_too_many_connections_drop_no_request() {
    let log: Log = Arc::default();
    let up = upstream(&log);
    let hooks = Arc::new(Logging {
        log: Arc::clone(&log),
        panic_before: true,
    });
    let upstream_url = format!("http://127.0.0.1:{}", up.port);
    let mut proxy =
        Proxy::start_with("127.0.0.1:0", &upstream_url, vllm(), hooks, 1).expect("starts");
    let mut first = client(&proxy);
    let (head, _) = first.send("POST", "/sleep?level=1", None);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // `after` is called before the connection's next request is read.
    first.send("GET", "/health", None);
    assert_eq!(proxy.stats().hook_panics, 1);
    assert!(log_of(&log).iter().any(|l| l.starts_with("after sleep")));

    // The one connection allowed is open: the next gets a 503.
    let (head, body) = client(&proxy).send("GET", "/health", None);
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    let body = String::from_utf8(body).expect("text");
    assert!(
        body.contains("memrel proxy") && body.contains("1 connections are open"),
        "{body}"
    );
    assert_eq!(proxy.stats().rejected_busy, 1);

    // A stop closes the idle kept connection at once.
    let stopped = std::time::Instant::now();
    proxy.stop();
    assert!(stopped.elapsed() < Duration::from_secs(2));
    let mut rest = Vec::new();
    let _ = first.reader.read_to_end(&mut rest);
    assert!(rest.is_empty());
}

#[test]
fn a_request_memrel_cannot_read_gets_a_400() {
    let log: Log = Arc::default();
    let up = upstream(&log);
    let proxy = start(vllm(), &log, &up);
    let mut c = client(&proxy);
    c.writer
        .write_all(b"POST /x HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n")
        .expect("send");
    let (head, body) = read_answer(&mut c.reader);
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");
    assert!(String::from_utf8_lossy(&body).contains("both Content-Length and Transfer-Encoding"));
    assert_eq!(proxy.stats().bad_requests, 1);
    assert!(log_of(&log).is_empty(), "nothing reached the upstream");
}

#[test]
fn a_closed_kept_upstream_connection_an_http10_client_and_expect_100_continue() {
    let log: Log = Arc::default();
    let up = upstream(&log);
    let proxy = start(vllm(), &log, &up);
    let mut c = client(&proxy);
    let (_, body) = c.send("GET", "/once", None);
    assert_eq!(body, b"once");
    std::thread::sleep(Duration::from_millis(50));
    let (head, body) = c.send("POST", "/sleep?level=1", None);
    assert!(
        head.starts_with("HTTP/1.1 200"),
        "a new upstream connection: {head}"
    );
    assert_eq!(body, br#"{"saw": "POST /sleep?level=1"}"#);
    assert_eq!(*up.connections.lock().expect("count"), 2);

    // Expect: 100-continue is answered by the proxy, the body then sent.
    c.writer
        .write_all(b"POST /wake_up HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
        .expect("head");
    let mut interim = String::new();
    while !interim.ends_with("\r\n\r\n") {
        c.reader.read_line(&mut interim).expect("100");
    }
    assert_eq!(interim, "HTTP/1.1 100 Continue\r\n\r\n");
    c.writer.write_all(b"{}").expect("body");
    let (head, _) = read_answer(&mut c.reader);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(proxy.stats().upstream_failures, 0);

    // An HTTP/1.0 client reads no chunks: the stream de-chunked, then closed.
    up.go.send(()).expect("go");
    let mut old = client(&proxy);
    old.writer
        .write_all(b"GET /stream HTTP/1.0\r\n\r\n")
        .expect("send");
    let mut all = Vec::new();
    old.reader.read_to_end(&mut all).expect("to the close");
    let all = String::from_utf8(all).expect("text");
    let (head, body) = all.split_once("\r\n\r\n").expect("a head");
    assert!(
        head.contains("Connection: close") && !head.contains("chunked"),
        "{head}"
    );
    assert_eq!(
        body,
        "data: {\"token\": 1}\n\ndata: {\"token\": 2}\n\ndata: [DONE]\n"
    );
}
