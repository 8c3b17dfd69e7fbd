//! `memrel watch`: a model server measured for as long as it runs (issue
//! 50): `memrel attach` with no end of its own (until the server exits or
//! memrel gets SIGTERM), its process found by `--pid` or as the one
//! listening on `--url`'s port, and what production needs on top:
//! OpenMetrics at `/metrics` kept current as it measures (`--metrics`,
//! `attach::live_metrics`), and edges marked from the requests real clients
//! send through memrel (`--proxy`, `attach::proxy`). Marks from the log
//! (`--mark-on`) and from `memrel mark` work as under attach.

use std::io::Write;
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};

use super::ExitStatus;
use crate::attach::live_metrics::SharedState;
use crate::cli::{AttachArgs, WatchArgs};
use crate::export::metrics_http;
use crate::export::openmetrics::{self, OwnCost};

/// `memrel watch` as the arguments ask.
pub fn run(args: &WatchArgs, out: &mut dyn Write) -> Result<ExitStatus> {
    let pid = match args.pid {
        Some(pid) => pid,
        None => {
            let (_, port) = crate::drive::server::host_port(&args.url)?;
            crate::drive::server::listener_pid(port)
                .with_context(|| format!("--url {}: no server to watch", args.url))?
        }
    };
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
    let state: Option<SharedState> = metrics.as_ref().map(|_| Arc::default());
    let attach = AttachArgs {
        pid,
        name: args.name.clone(),
        how: args.how.clone(),
    };
    let mut start = |_dir: &Path| -> Result<Box<dyn std::any::Any>> {
        if let (Some(listener), Some(state)) = (metrics.as_ref(), state.as_ref()) {
            serve_metrics(listener.try_clone()?, state.clone())?;
        }
        Ok(Box::new(()))
    };
    super::attach::run_with(&attach, state.clone(), &mut start, out)
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
