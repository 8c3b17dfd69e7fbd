//! A tiny HTTP/1.x server of one page, `GET /metrics`, for Prometheus to
//! scrape memrel's OpenMetrics text (`export::openmetrics`): the endpoint of
//! `memrel watch --metrics LISTEN` (issue 50, item 3).
//!
//! Plain `std::net`, no crate and no async runtime: one scrape at a time,
//! each connection read with a deadline, answered and closed. A request
//! that is not one (garbage, too long, too slow, a closed socket) gets a
//! 400 or nothing; nothing a client sends can make it panic or stop.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use super::openmetrics::CONTENT_TYPE;

/// The path served.
pub const PATH: &str = "/metrics";

/// The longest request head read (request line and headers).
const MAX_HEAD_BYTES: usize = 8192;

/// How long a client may take to send its request, or to read the answer.
const DEADLINE: Duration = Duration::from_secs(2);

/// Serves `render()`'s text at [`PATH`] on `listener` until the process
/// ends; a failed accept or connection is skipped, never fatal.
pub fn serve(listener: &TcpListener, render: &dyn Fn() -> String) {
    for stream in listener.incoming() {
        match stream {
            Ok(stream) => answer(stream, render),
            // EMFILE and the like: a moment, then the next client.
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Reads one request from `stream` and answers it; errors end the connection.
fn answer(mut stream: TcpStream, render: &dyn Fn() -> String) {
    let _ = stream.set_read_timeout(Some(DEADLINE));
    let _ = stream.set_write_timeout(Some(DEADLINE));
    let Some(head) = read_head(&mut stream) else {
        return;
    };
    let response = respond(&head, render);
    let _ = stream.write_all(&response);
    let _ = stream.flush();
}

/// The request head (up to the blank line), or what came before the client
/// stopped sending; `None` where nothing came.
fn read_head(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while head.len() < MAX_HEAD_BYTES && !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    (!head.is_empty()).then_some(head)
}

/// The whole response to a request whose head is `head`.
fn respond(head: &[u8], render: &dyn Fn() -> String) -> Vec<u8> {
    let text = String::from_utf8_lossy(head);
    let line = text.lines().next().unwrap_or("");
    let mut words = line.split(' ');
    let (method, target, version) = (words.next(), words.next(), words.next());
    let valid = matches!(version, Some(v) if v.starts_with("HTTP/1.")) && words.next().is_none();
    let (Some(method), Some(target), true) = (method, target, valid) else {
        return response("400 Bad Request", "text/plain", b"bad request\n", true);
    };
    let path = target.split('?').next().unwrap_or("");
    match (method, path == PATH) {
        ("GET" | "HEAD", true) => {
            let body = render();
            response("200 OK", CONTENT_TYPE, body.as_bytes(), method == "GET")
        }
        ("GET" | "HEAD", false) => response(
            "404 Not Found",
            "text/plain",
            b"not found: memrel serves /metrics\n",
            method == "GET",
        ),
        _ => response("405 Method Not Allowed", "text/plain", b"only GET\n", true),
    }
}

fn response(status: &str, content_type: &str, body: &[u8], with_body: bool) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if with_body {
        out.extend_from_slice(body);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Shutdown;

    fn ask(addr: std::net::SocketAddr, request: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(request).unwrap();
        let _ = s.shutdown(Shutdown::Write);
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        answer
    }

    #[test]
    fn metrics_is_served_and_anything_else_is_refused_without_stopping() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || serve(&listener, &|| "x 1\n# EOF\n".to_string()));
        let ok = ask(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(
            ok.contains(&format!("Content-Type: {CONTENT_TYPE}\r\n")),
            "{ok}"
        );
        assert!(ok.ends_with("\r\n\r\nx 1\n# EOF\n"), "{ok}");
        let query = ask(addr, b"GET /metrics?x=1 HTTP/1.0\r\n\r\n");
        assert!(query.starts_with("HTTP/1.1 200 OK\r\n"), "{query}");
        let other = ask(addr, b"GET / HTTP/1.1\r\n\r\n");
        assert!(other.starts_with("HTTP/1.1 404 "), "{other}");
        let post = ask(addr, b"POST /metrics HTTP/1.1\r\n\r\n");
        assert!(post.starts_with("HTTP/1.1 405 "), "{post}");
        for garbage in [
            &b"\xff\xfe\x00garbage\r\n\r\n"[..],
            b"GET\r\n\r\n",
            b"GET /metrics\r\n\r\n",
            &[b'A'; 4000][..],
        ] {
            let bad = ask(addr, garbage);
            assert!(bad.starts_with("HTTP/1.1 400 "), "{bad}");
        }
        // A client that sends nothing and closes, one that sends too much
        // (its answer may be lost to a reset), then the server still answers.
        drop(TcpStream::connect(addr).unwrap());
        if let Ok(mut s) = TcpStream::connect(addr) {
            let _ = s.write_all(&[b'A'; 50_000]);
        }
        let again = ask(addr, b"HEAD /metrics HTTP/1.1\r\n\r\n");
        assert!(again.starts_with("HTTP/1.1 200 OK\r\n"), "{again}");
        assert!(again.ends_with("\r\n\r\n"), "{again}");
    }
}
