//! `memrel watch`: a model server measured for as long as it runs (issue
//! 50): `memrel attach` with no end of its own (until the server exits or
//! memrel gets SIGTERM), its process found by `--pid`, started by memrel
//! (`-- CMD`, `drive::server::Started` as drive starts one: server.log,
//! stopped at the end) or found as the one listening on `--url`'s port,
//! and what production needs on top:
//! OpenMetrics at `/metrics` kept current as it measures (`--metrics`,
//! `attach::live_metrics`), and edges marked from the requests real clients
//! send through memrel (`--proxy`, `attach::proxy`). Marks from the log
//! (`--mark-on`) and from `memrel mark` work as under attach.

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::attach::Begun;
use super::ExitStatus;
use crate::attach::live::{append_mark_as, MarkPhase};
use crate::attach::live_metrics::SharedState;
use crate::attach::proxy::{Proxy, ProxyHooks, Routes};
use crate::attach::segments;
use crate::cli::{AttachArgs, WatchArgs};
use crate::drive::cycle::PresetArgs;
use crate::drive::driver::after_answer;
use crate::drive::server::{Started, SERVER_LOG};
use crate::export::metrics_http;
use crate::export::openmetrics::{self, OwnCost};
use crate::protocol::Phase;

/// A server `-- CMD` started gets this long after SIGTERM before SIGKILL:
/// short, so that memrel stops within a second of SIGINT or SIGTERM.
const STOP_GRACE: Duration = Duration::from_millis(500);

/// --url's default.
const URL: &str = "http://127.0.0.1:8000";

/// `memrel watch` as the arguments ask.
pub fn run(args: &WatchArgs, out: &mut dyn Write) -> Result<ExitStatus> {
    let url = args.url.as_deref().unwrap_or(URL);
    let pid = named_pid(args, url)?;
    // Every address is bound before anything is measured: a bad one is an
    // error at once, never a watch without its endpoint.
    let metrics = args
        .metrics
        .as_deref()
        .map(|listen| {
            TcpListener::bind(listen)
                .with_context(|| format!("--metrics {listen}: cannot listen there"))
        })
        .transpose()?;
    // Kept whether served or not: cycles.csv is written from it.
    let state: SharedState = Arc::default();
    let routes = routes(args)?;
    let attach = AttachArgs {
        // Unread: `run_with` takes the pid below (`None`: -- CMD's).
        pid: pid.unwrap_or_default(),
        name: args.name.clone(),
        how: args.how.clone(),
    };
    let mut start = |dir: &Path| -> Result<Begun> {
        go_on_from_earlier_segments(args, dir, &state)?;
        let server = pid.is_none().then(|| start_server(args, dir)).transpose()?;
        if let Some(listener) = metrics.as_ref() {
            serve_metrics(listener.try_clone()?, state.clone())?;
        }
        let proxy = match (args.proxy.as_deref(), routes.clone()) {
            (Some(listen), Some(routes)) => Some(start_proxy(args, url, listen, routes, dir)?),
            _ => None,
        };
        let pid = server.as_ref().map(|s| s.0.pid());
        // Dropped in this order: the server stopped first ends any request
        // the proxy still has in flight to it.
        let keep = Box::new((server, proxy));
        Ok(Begun { keep, pid })
    };
    super::attach::run_with(&attach, pid, Some(state.clone()), &mut start, out)
}

/// The running server --pid or --url names; `None`: -- CMD starts it.
fn named_pid(args: &WatchArgs, url: &str) -> Result<Option<u32>> {
    match (args.pid, args.command.is_empty()) {
        (Some(_), false) => bail!(
            "--pid and -- CMD both name the server: pass --pid PID for a running one, or -- CMD \
             for memrel to start it"
        ),
        (Some(pid), true) => Ok(Some(pid)),
        (None, false) if args.proxy.is_some() && args.url.is_none() => bail!(
            "--proxy forwards to --url: name the URL the server -- CMD starts listens on \
             (--url http://127.0.0.1:PORT)"
        ),
        (None, false) => {
            let (_, port) = crate::drive::server::host_port(url)?;
            if args.url.is_some() && crate::drive::server::listening(port) {
                bail!(
                    "--url {url}: something listens on port {port} already: stop it, or watch it \
                     with --url alone instead of -- CMD"
                );
            }
            Ok(None)
        }
        (None, true) => {
            let (_, port) = crate::drive::server::host_port(url)?;
            let pid = crate::drive::server::listener_pid(port)
                .with_context(|| format!("--url {url}: no server to watch"))?;
            Ok(Some(pid))
        }
    }
}

/// The server of `-- CMD` started (its output in `dir`'s server.log, as
/// drive's), and, where --url is given, listening there.
fn start_server(args: &WatchArgs, dir: &Path) -> Result<StartedServer> {
    let log = dir.join(SERVER_LOG);
    let mut server = StartedServer(Started::spawn(&args.command, &log)?);
    eprintln!(
        "memrel: started the server (pid {}: {}), its output in {}",
        server.0.pid(),
        args.command.join(" "),
        log.display()
    );
    if let Some(url) = args.url.as_deref() {
        server
            .0
            .wait_listening(url, args.ready.ready_timeout_s, "--ready-timeout", &log)?;
    }
    Ok(server)
}

/// A server memrel started: when the watch ends it is stopped (SIGTERM to
/// its group, SIGKILL after [`STOP_GRACE`]) and how it ended said.
struct StartedServer(Started);

impl Drop for StartedServer {
    fn drop(&mut self) {
        let exit = self.0.stop(STOP_GRACE);
        eprintln!("memrel: server (pid {}): {exit}", self.0.pid());
    }
}

/// The proxy of --proxy LISTEN to `url`, marking `routes` in `dir`.
fn start_proxy(
    args: &WatchArgs,
    url: &str,
    listen: &str,
    routes: Routes,
    dir: &Path,
) -> Result<Proxy> {
    let hooks = Arc::new(MarkHooks {
        dir: dir.to_path_buf(),
        settle_s: args.settle_s,
        marks: Arc::default(),
    });
    let proxy = Proxy::start(listen, &upstream(url)?, routes, hooks)
        .with_context(|| format!("--proxy {listen}"))?;
    eprintln!(
        "memrel: proxy at http://{} to {url}, marking: {}",
        proxy.local_addr(),
        proxy_routes_words(args)
    );
    Ok(proxy)
}

/// A watch under `--out` is a segment among `<OUT>/<NAME>/`'s: it goes on
/// from the newest earlier one's closed cycles (`attach::segments`), and
/// under `--max-disk` the older segments' samples are cut to half the cap.
/// A watch into `--dir` (new or empty) starts afresh.
fn go_on_from_earlier_segments(args: &WatchArgs, dir: &Path, state: &SharedState) -> Result<()> {
    let Some(parent) = dir.parent().filter(|_| args.how.dir.is_none()) else {
        return Ok(());
    };
    if let Some(cap_bytes) = args.how.max_disk_bytes {
        segments::prune_older_samples(parent, dir, cap_bytes / 2)?;
    }
    let carried = segments::carried_from(parent, dir)?;
    if let Some(from) = &carried.from {
        eprintln!(
            "memrel: going on from {}: {} cycles, {} sleeps, {} wakes closed there",
            from.display(),
            carried.state.cycles_total,
            carried.state.sleeps_total,
            carried.state.wakes_total
        );
        if let Ok(mut shared) = state.lock() {
            *shared = carried.state;
        }
    }
    Ok(())
}

/// The requests --proxy marks: the preset's or the cycle file's; `None`
/// without --proxy. Placeholders --model does not fill match any value.
fn routes(args: &WatchArgs) -> Result<Option<Routes>> {
    if args.proxy.is_none() {
        if args.server.is_some() || args.cycle.is_some() {
            bail!("--server and --cycle name the requests --proxy marks: add --proxy LISTEN");
        }
        return Ok(None);
    }
    let preset_args = PresetArgs {
        sleep_level: None,
        model: args.model.clone(),
    };
    let routes = match (&args.server, &args.cycle) {
        (Some(name), _) => Routes::of_preset(name, &preset_args)?,
        (None, Some(file)) => {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("--cycle {}: cannot read it", file.display()))?;
            Routes::of_text(&text, &preset_args)
                .with_context(|| format!("--cycle {}", file.display()))?
        }
        (None, None) => bail!(
            "--proxy marks the requests of a server's API: add --server NAME (vllm, vllm-tags, \
             sglang, ollama, v2) or --cycle FILE"
        ),
    };
    Ok(Some(routes))
}

/// `http://HOST:PORT` of --url (the proxy's upstream: no path, no TLS).
fn upstream(url: &str) -> Result<String> {
    let (host, port) = crate::drive::server::host_port(url)?;
    Ok(format!("http://{host}:{port}"))
}

fn proxy_routes_words(args: &WatchArgs) -> String {
    match (&args.server, &args.cycle) {
        (Some(name), _) => format!("the {name} preset's requests"),
        (_, Some(file)) => format!("the requests of {}", file.display()),
        _ => String::new(),
    }
}

/// Marks the edges of the requests the proxy forwards, through the live
/// directory as `memrel mark` does: a request's begin before it is sent
/// (the proxy waits for the edge's reading: its `held_s`), its end at the
/// answer, then what follows the answer as under `memrel drive` (asleep
/// after a sleep; after an unload or a wake a settle of --settle seconds,
/// ended by the next mark if one comes first).
struct MarkHooks {
    dir: PathBuf,
    settle_s: f64,
    /// Marks taken so far: a settle ends only if none came after it.
    marks: Arc<AtomicU64>,
}

impl MarkHooks {
    fn mark(&self, phase: MarkPhase, model: Option<&str>, note: &str, holds: bool) -> u64 {
        let taken = self.marks.fetch_add(1, Ordering::SeqCst) + 1;
        if let Err(e) = append_mark_as(&self.dir, phase, model, Some(note), holds) {
            eprintln!(
                "memrel: warning: --proxy: no {} edge for {note} ({e:#})",
                phase.as_str()
            );
        }
        taken
    }
}

impl ProxyHooks for MarkHooks {
    fn before(&self, phase: Phase, model: Option<&str>, request_line: &str) {
        let note = format!("memrel watch --proxy: {request_line} sent");
        self.mark(MarkPhase::Begin(phase), model, &note, true);
    }

    fn after(&self, phase: Phase, model: Option<&str>, request_line: &str, status: Option<u16>) {
        let note = match status {
            Some(status) => format!("memrel watch --proxy: {request_line} answered {status}"),
            None => format!("memrel watch --proxy: {request_line} failed (the client got a 502)"),
        };
        self.mark(MarkPhase::End, model, &note, false);
        let Some(next) = status.and(after_answer(phase)) else {
            return;
        };
        let note = format!("memrel watch --proxy: after {request_line}");
        let taken = self.mark(MarkPhase::Begin(next), model, &note, false);
        if next != Phase::Settle {
            return;
        }
        let (dir, settle_s, marks) = (self.dir.clone(), self.settle_s, self.marks.clone());
        let model = model.map(str::to_string);
        let note = format!("memrel watch --proxy: settled {settle_s} s after {request_line}");
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs_f64(settle_s));
            if marks.load(Ordering::SeqCst) == taken {
                let hooks = MarkHooks {
                    dir,
                    settle_s,
                    marks,
                };
                hooks.mark(MarkPhase::End, model.as_deref(), &note, false);
            }
        });
    }
}

/// Serves the state's OpenMetrics text on `listener` from a thread of its
/// own, for as long as memrel runs; memrel's own cost is read at each scrape.
fn serve_metrics(listener: TcpListener, state: SharedState) -> Result<()> {
    let addr = listener.local_addr()?;
    eprintln!("memrel: OpenMetrics at http://{addr}{}", metrics_http::PATH);
    std::thread::Builder::new()
        .name("memrel-metrics".into())
        .spawn(move || {
            let render = || {
                let mut now = lock_clone(&state);
                now.own = OwnCost::read();
                openmetrics::render(&now)
            };
            metrics_http::serve(&listener, &render);
        })
        .context("cannot start the /metrics thread")?;
    Ok(())
}

/// The state as it is now (a poisoned lock still holds the last state).
fn lock_clone(state: &Mutex<openmetrics::MetricsState>) -> openmetrics::MetricsState {
    match state.lock() {
        Ok(s) => s.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    }
}
