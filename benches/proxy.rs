//! The latency `memrel watch --proxy` adds to a request (issue 50, item 1):
//! one small request and its answer on a kept connection, straight to a
//! local upstream, then through the proxy unmatched (forwarded, no hooks)
//! and matched (the vLLM preset's `POST /sleep?level=1`, no-op hooks). The
//! difference of the medians is the proxy's cost; the proxy's own count of
//! its added time (`ProxyStats::added`) is printed after each. The numbers
//! are in docs/attach.md, "The proxy".
//!
//! `cargo bench --bench proxy`

use std::hint::black_box;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use memrel::attach::proxy::{NoHooks, Proxy, Routes};
use memrel::drive::cycle::PresetArgs;

const ANSWER: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n{\"ok\": \"true\"}\n";

/// An upstream answering every request (no body) with [`ANSWER`], keep-alive.
fn upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let _ = stream.set_nodelay(true);
                let mut writer = stream.try_clone().expect("clone");
                let mut reader = BufReader::new(stream);
                let mut line = String::new();
                loop {
                    line.clear();
                    match reader.read_line(&mut line) {
                        Ok(0) | Err(_) => return,
                        Ok(_) if line == "\r\n" => {
                            if writer.write_all(ANSWER).is_err() {
                                return;
                            }
                        }
                        Ok(_) => {}
                    }
                }
            });
        }
    });
    addr
}

/// A kept connection sending one request and reading its whole answer.
struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    request: Vec<u8>,
    body: Vec<u8>,
}

impl Client {
    fn new(addr: SocketAddr, request_line: &str) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        Client {
            writer: stream.try_clone().expect("clone"),
            reader: BufReader::new(stream),
            request: format!("{request_line} HTTP/1.1\r\nHost: bench\r\n\r\n").into_bytes(),
            body: vec![0; 15],
        }
    }

    fn round_trip(&mut self) -> usize {
        self.writer.write_all(&self.request).expect("send");
        let mut line = String::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line).expect("head");
            if line == "\r\n" {
                break;
            }
        }
        self.reader.read_exact(&mut self.body).expect("body");
        self.body.len()
    }
}

fn bench(c: &mut Criterion) {
    let up = upstream();
    let routes = Routes::of_preset("vllm", &PresetArgs::default()).expect("the vllm preset");
    let proxy = Proxy::start(
        "127.0.0.1:0",
        &format!("http://{up}"),
        routes,
        Arc::new(NoHooks),
    )
    .expect("the proxy");
    let mut group = c.benchmark_group("proxy");
    let cases = [
        ("direct", up, "GET /v1/models"),
        ("unmatched", proxy.local_addr(), "GET /v1/models"),
        ("matched", proxy.local_addr(), "POST /sleep?level=1"),
    ];
    for (name, addr, line) in cases {
        let mut client = Client::new(addr, line);
        group.bench_function(name, |b| b.iter(|| black_box(client.round_trip())));
        let added = proxy.stats().added;
        if name != "direct" {
            eprintln!(
                "proxy/{name}: the proxy's own added time, median of its last 1,024 requests: {:.1} µs (max {:.1} µs over {})",
                added.median_s.unwrap_or(0.0) * 1e6,
                added.max_s * 1e6,
                added.count
            );
        }
    }
    group.finish();
    let stats = proxy.stats();
    assert_eq!(stats.upstream_failures, 0, "{stats:?}");
}

criterion_group!(benches, bench);
criterion_main!(benches);
