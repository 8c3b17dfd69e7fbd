//! What `memrel drive` writes per request and per process: the rows
//! (`requests.csv` and `requests.json`, one per request; `processes.csv`,
//! each process of the tree once a request settled) and the layers they
//! hold. Written again whole after every request (`write`), so a failure
//! keeps what came before it.

use std::path::Path;

use serde::Serialize;

use crate::attach::session::EdgeReading;
use crate::record::Resource;

/// The catalogued resource of shared memory the tree maps.
const SHMEM: &str = "shmem";

/// The driver's per-request rows.
pub const REQUESTS_CSV: &str = "requests.csv";

pub const REQUESTS_JSON: &str = "requests.json";

/// Each process of the tree, once a request settled.
pub const PROCESSES_CSV: &str = "processes.csv";

/// A layer moved when it changed by more than this (settle time, late
/// bytes said), and is back when it holds no more than this over the level
/// before the load: the scenario's default retention threshold.
pub const TOLERANCE_BYTES: u64 = 16 << 20;

/// Bytes of each layer at one reading.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Layers {
    /// The process tree's PSS (or the process's RSS without a tree).
    pub host_bytes: u64,
    pub anon_bytes: u64,
    pub file_bytes: u64,
    pub vram_bytes: Option<u64>,
    pub container_bytes: Option<u64>,
    pub page_cache_bytes: Option<u64>,
    /// Shared memory the tree maps (RssShmem summed: a pinned host buffer
    /// of PyTorch's shows here, not as anonymous memory).
    pub shmem_bytes: Option<u64>,
}

impl Layers {
    pub(super) fn of(reading: &EdgeReading) -> Layers {
        let m = &reading.memory;
        let r = &reading.extras.readings;
        let per_gpu = r
            .per_gpu()
            .then(|| r.gpus().map(|(_, bytes)| bytes).sum::<u64>());
        Layers {
            host_bytes: m.rss_bytes,
            anon_bytes: m.anon_bytes,
            file_bytes: m.file_bytes,
            vram_bytes: per_gpu.or(m.vram_bytes),
            container_bytes: r.get(Resource::Container),
            page_cache_bytes: m.page_cache_bytes,
            shmem_bytes: Resource::parse(SHMEM).and_then(|shmem| r.at(shmem)),
        }
    }

    /// (name, bytes) of each layer read, in requests.csv's order.
    pub(super) fn named(&self) -> [(&'static str, Option<u64>); 5] {
        [
            ("host", Some(self.host_bytes)),
            ("vram", self.vram_bytes),
            ("container", self.container_bytes),
            ("page_cache", self.page_cache_bytes),
            ("shmem", self.shmem_bytes),
        ]
    }
}

/// Per layer: `a − b` where both were read.
pub(super) fn minus(a: &Layers, b: &Layers) -> Delta {
    let d = |x: Option<u64>, y: Option<u64>| Some(x? as i64 - y? as i64);
    Delta {
        host_bytes: a.host_bytes as i64 - b.host_bytes as i64,
        vram_bytes: d(a.vram_bytes, b.vram_bytes),
        container_bytes: d(a.container_bytes, b.container_bytes),
        page_cache_bytes: d(a.page_cache_bytes, b.page_cache_bytes),
        shmem_bytes: d(a.shmem_bytes, b.shmem_bytes),
        anon_bytes: a.anon_bytes as i64 - b.anon_bytes as i64,
        file_bytes: a.file_bytes as i64 - b.file_bytes as i64,
    }
}

/// A signed difference per layer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Delta {
    pub host_bytes: i64,
    pub vram_bytes: Option<i64>,
    pub container_bytes: Option<i64>,
    pub page_cache_bytes: Option<i64>,
    pub shmem_bytes: Option<i64>,
    /// The host memory's anonymous and file-backed parts.
    pub anon_bytes: i64,
    pub file_bytes: i64,
}

impl Delta {
    /// Each layer as requests.csv orders them ([`Layers::named`]).
    fn named(&self) -> [Option<i64>; 5] {
        [
            Some(self.host_bytes),
            self.vram_bytes,
            self.container_bytes,
            self.page_cache_bytes,
            self.shmem_bytes,
        ]
    }
}

/// One request as it went.
#[derive(Debug, Clone, Serialize)]
pub struct RequestRow {
    /// 1, 2, … over the whole drive; 0 the server's start.
    pub index: usize,
    pub cycle: u32,
    pub phase: String,
    /// `POST /sleep?level=1`.
    pub request: String,
    pub model: Option<String>,
    pub status: Option<u16>,
    /// From the send to the whole answer.
    pub latency_s: Option<f64>,
    /// Seconds on the run's clock (samples.csv's `t_s`).
    pub send_t_s: f64,
    pub response_t_s: Option<f64>,
    pub at_send: Layers,
    pub at_response: Option<Layers>,
    /// How long `until` took to be met, after the answer.
    pub until_s: Option<f64>,
    /// The reading once `settle_s` passed after the answer (and `until`).
    pub settled: Option<Layers>,
    /// From the answer until the last reading that moved (more than
    /// [`TOLERANCE_BYTES`] from the settled one): 0 when nothing moved.
    pub settle_s: Option<f64>,
    /// How long memory was read after the answer (`settle_s` of the request,
    /// else `--settle`).
    pub settle_window_s: Option<f64>,
    /// At the answer minus settled: bytes that left after the answer (a
    /// release gap); negative where memory grew after it.
    pub late: Option<Delta>,
    /// The level before the cycle's first request (its load or sleep; the
    /// server's start for the start's own row).
    pub before_load: Option<Layers>,
    /// Settled minus `before_load`, for an unload or a wake (a cycle's end):
    /// back where the cycle began?
    pub held: Option<Delta>,
    /// The level before the first judged cycle's first request (after the
    /// warm-up): the drive's baseline.
    pub before_first: Option<Layers>,
    /// Settled minus `before_first`, for an unload or a wake: back where
    /// the first judged cycle began? What the console's `back` says.
    pub held_first: Option<Delta>,
    /// For a sleep: the reading just before it minus settled (what the
    /// sleep gave back, per layer; negative where a layer grew, as host
    /// memory does when weights are copied there).
    pub freed: Option<Delta>,
    pub error: Option<String>,
}

/// What one process of the tree held once a request settled.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessRow {
    pub index: usize,
    pub cycle: u32,
    pub phase: String,
    pub pid: u32,
    pub comm: String,
    /// Its command line (arguments joined by spaces, cut at 300
    /// characters): which `python3` it is.
    pub command: String,
    pub pss_bytes: Option<u64>,
    pub vram_bytes: Option<u64>,
}

/// requests.csv, requests.json and processes.csv, written again whole.
pub fn write(dir: &Path, rows: &[RequestRow], processes: &[ProcessRow]) -> Result<(), String> {
    let json = serde_json::to_vec_pretty(rows).map_err(|e| e.to_string())?;
    crate::fsutil::write_atomic(&dir.join(REQUESTS_JSON), &json).map_err(|e| e.to_string())?;
    let mut csv = csv::Writer::from_writer(Vec::new());
    let mut header = vec![
        "index",
        "cycle",
        "phase",
        "request",
        "model",
        "status",
        "latency_s",
        "send_t_s",
        "response_t_s",
        "until_s",
        "settle_s",
        "settle_window_s",
    ];
    let layers = ["host", "vram", "container", "page_cache", "shmem"];
    let mut names = Vec::new();
    for layer in layers {
        for what in [
            "send",
            "response",
            "settled",
            "late",
            "before_load",
            "held",
            "before_first",
            "held_first",
            "freed",
        ] {
            names.push(format!("{layer}_{what}_bytes"));
        }
    }
    for layer in layers {
        names.push(format!("{layer}_back"));
        names.push(format!("{layer}_back_cycle"));
    }
    header.extend(names.iter().map(String::as_str));
    header.push("error");
    csv.write_record(&header).map_err(|e| e.to_string())?;
    let opt = |v: Option<String>| v.unwrap_or_default();
    for r in rows {
        let mut cells = vec![
            r.index.to_string(),
            r.cycle.to_string(),
            r.phase.clone(),
            r.request.clone(),
            opt(r.model.clone()),
            opt(r.status.map(|s| s.to_string())),
            opt(r.latency_s.map(|s| format!("{s:.6}"))),
            format!("{:.6}", r.send_t_s),
            opt(r.response_t_s.map(|s| format!("{s:.6}"))),
            opt(r.until_s.map(|s| format!("{s:.6}"))),
            opt(r.settle_s.map(|s| format!("{s:.6}"))),
            opt(r.settle_window_s.map(|s| format!("{s:.6}"))),
        ];
        let layer = |l: &Option<Layers>, i: usize| -> String {
            l.as_ref()
                .and_then(|l| l.named()[i].1)
                .map(|b| b.to_string())
                .unwrap_or_default()
        };
        let delta = |d: &Option<Delta>, i: usize| -> String {
            d.as_ref()
                .and_then(|d| d.named()[i])
                .map(|b| b.to_string())
                .unwrap_or_default()
        };
        for i in 0..layers.len() {
            cells.push(layer(&Some(r.at_send), i));
            cells.push(layer(&r.at_response, i));
            cells.push(layer(&r.settled, i));
            cells.push(delta(&r.late, i));
            cells.push(layer(&r.before_load, i));
            cells.push(delta(&r.held, i));
            cells.push(layer(&r.before_first, i));
            cells.push(delta(&r.held_first, i));
            cells.push(delta(&r.freed, i));
        }
        let back = |d: &Option<Delta>, i: usize| -> String {
            match d.as_ref().and_then(|d| d.named()[i]) {
                Some(h) if h <= TOLERANCE_BYTES as i64 => "yes".into(),
                Some(_) => "no".into(),
                None => String::new(),
            }
        };
        for i in 0..layers.len() {
            cells.push(back(&r.held_first, i));
            cells.push(back(&r.held, i));
        }
        cells.push(opt(r.error.clone()));
        csv.write_record(&cells).map_err(|e| e.to_string())?;
    }
    let bytes = csv.into_inner().map_err(|e| e.to_string())?;
    crate::fsutil::write_atomic(&dir.join(REQUESTS_CSV), &bytes).map_err(|e| e.to_string())?;
    let mut csv = csv::Writer::from_writer(Vec::new());
    csv.write_record([
        "index",
        "cycle",
        "phase",
        "pid",
        "comm",
        "command",
        "pss_bytes",
        "vram_bytes",
    ])
    .map_err(|e| e.to_string())?;
    for p in processes {
        csv.write_record([
            p.index.to_string(),
            p.cycle.to_string(),
            p.phase.clone(),
            p.pid.to_string(),
            p.comm.clone(),
            p.command.clone(),
            opt(p.pss_bytes.map(|b| b.to_string())),
            opt(p.vram_bytes.map(|b| b.to_string())),
        ])
        .map_err(|e| e.to_string())?;
    }
    let bytes = csv.into_inner().map_err(|e| e.to_string())?;
    crate::fsutil::write_atomic(&dir.join(PROCESSES_CSV), &bytes).map_err(|e| e.to_string())
}

/// Where a cycle's end left host memory behind (settled after a wake
/// against the reading before its sleep, or after an unload against the
/// reading before its load: more than the tolerance), the amount and the
/// layer it is in, in words; `None` where it did not, and for other phases.
pub fn left_after_wake(row: &RequestRow) -> Option<String> {
    let (end, start) = match row.phase.as_str() {
        "wake" => ("wake", "sleep"),
        "unload" => ("unload", "load"),
        _ => return None,
    };
    let held = row.held?;
    let gap = TOLERANCE_BYTES as i64;
    if held.host_bytes <= gap {
        return None;
    }
    let mib = |b: i64| b as f64 / f64::from(1u32 << 20);
    let mut parts = Vec::new();
    if let Some(shmem) = held.shmem_bytes.filter(|b| *b > gap) {
        parts.push(format!(
            "{:.0} MiB of shared memory mapped (RssShmem: a pinned host buffer, such as the \
             sleep's backup that PyTorch's host allocator keeps cached)",
            mib(shmem)
        ));
    }
    if held.anon_bytes > gap {
        parts.push(format!(
            "{:.0} MiB anonymous (the heap: freed but kept by the allocator, or still referenced)",
            mib(held.anon_bytes)
        ));
    }
    // The file-backed layer counts shared memory too (RssFile + RssShmem).
    let file_bytes = held.file_bytes - held.shmem_bytes.unwrap_or(0).max(0);
    if file_bytes > gap {
        parts.push(format!("{:.0} MiB file-backed", mib(file_bytes)));
    }
    let what = if parts.is_empty() {
        String::new()
    } else {
        format!(": {}", parts.join(", "))
    };
    Some(format!(
        "the {end} left {:.0} MiB of host memory behind, over the level before the {start}{what}",
        mib(held.host_bytes)
    ))
}
