//! What `memrel drive` writes per request and per process: the rows
//! (`requests.csv` and `requests.json`, one per request; `processes.csv`,
//! each process of the tree once a request settled). A row's readings are
//! the record's (`record::Readings`, every resource the session's probes
//! read), laid out as layers: the five requests.csv has always had (`host`,
//! `vram`, `container`, `page_cache`, `shmem`), then every other resource
//! and part read, named as the record names them (`anon`, `file`, `shm`,
//! `cuda:N` where VRAM is read per GPU, `container_usage`, …). Written again
//! whole after every request (`write`), so a failure keeps what came before
//! it.

use std::path::Path;

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use crate::record::{Key, Part, Readings, Resource};
use crate::textutil::MIB;

/// The driver's per-request rows.
pub const REQUESTS_CSV: &str = "requests.csv";

pub const REQUESTS_JSON: &str = "requests.json";

/// Each process of the tree, once a request settled.
pub const PROCESSES_CSV: &str = "processes.csv";

/// A layer moved when it changed by more than this (settle time, late
/// bytes said), and is back when it holds no more than this over the level
/// before the load: the scenario's default retention threshold.
pub const TOLERANCE_BYTES: u64 = 16 << 20;

/// The catalogued resource of shared memory the tree maps.
const SHMEM: Resource = match Key::new("shmem") {
    Some(key) => Resource::Probed(key),
    None => panic!("shmem is a catalogued resource's key"),
};

/// One layer of requests.csv's columns: a resource's part, or the VRAM
/// every GPU holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Layer {
    /// One part of one resource of the record's readings.
    Of(Resource, Part),
    /// VRAM: the GPUs' sum where NVML sees several, else the one device's.
    Vram,
}

impl Layer {
    /// The process tree's PSS (or the process's RSS without a tree).
    pub const HOST: Layer = Layer::Of(Resource::Host, Part::Whole);
    /// Shared memory the tree maps (RssShmem summed: a pinned host buffer
    /// of PyTorch's shows here, not as anonymous memory).
    pub const SHMEM: Layer = Layer::Of(SHMEM, Part::Whole);
    pub const ANON: Layer = Layer::Of(Resource::Host, Part::Anon);
    pub const FILE: Layer = Layer::Of(Resource::Host, Part::File);

    /// The layers requests.csv always has, in its order: its columns came
    /// first, before any other resource's.
    pub const FIXED: [Layer; 5] = [
        Layer::HOST,
        Layer::Vram,
        Layer::Of(Resource::Container, Part::Whole),
        Layer::Of(Resource::PageCache, Part::Whole),
        Layer::SHMEM,
    ];

    /// Its name in requests.csv's columns (`host`, `vram`, `anon`, `shm`,
    /// `container_usage`, `cuda:1`): the record's for the resource, its
    /// part's word after it (host memory's parts bare, as samples.csv's
    /// `anon_bytes` and `file_bytes`; its edge peak `kernel_peak`; its split
    /// by mapping `mapped_heap`, …).
    pub fn name(self) -> String {
        let (resource, part) = match self {
            Layer::Vram => return "vram".to_string(),
            Layer::Of(resource, part) => (resource, part),
        };
        if part == Part::Whole {
            return resource.key();
        }
        let word = part.word();
        match (resource, part) {
            (Resource::Host, Part::Peak) => "kernel_peak".to_string(),
            (Resource::Host, Part::Mapped(_)) => format!("mapped_{word}"),
            (Resource::Host, _) => word.to_string(),
            _ => format!("{}_{word}", resource.key()),
        }
    }

    /// Its bytes in `r`; `None` where it was not read.
    pub fn bytes(self, r: &Readings) -> Option<u64> {
        match self {
            Layer::Vram if r.per_gpu() => Some(r.gpus().map(|(_, bytes)| bytes).sum()),
            Layer::Vram => r.vram_column(),
            Layer::Of(resource, part) => r.part(resource, part),
        }
    }

    /// Whether the settle time compares it: a whole resource of the
    /// server's own (not the container: a shared cgroup moves with its
    /// other tenants; not a part, which moves with its whole).
    pub(super) fn settles(self) -> bool {
        match self {
            Layer::Vram => true,
            Layer::Of(resource, part) => part == Part::Whole && resource != Resource::Container,
        }
    }

    /// The layers of `r` besides the fixed ones, in the record's order (a
    /// device's only where VRAM is read per GPU: else `vram` is its one).
    fn others(r: &Readings) -> impl Iterator<Item = Layer> + '_ {
        r.keys()
            .filter(move |(resource, _)| r.per_gpu() || !resource.is_device())
            .map(|(resource, part)| Layer::Of(resource, part))
            .filter(|layer| !Layer::FIXED.contains(layer))
    }

    /// Every layer of `r` that was read, with its bytes.
    pub(super) fn read(r: &Readings) -> impl Iterator<Item = (Layer, u64)> + '_ {
        Layer::FIXED
            .into_iter()
            .chain(Layer::others(r))
            .filter_map(|layer| Some((layer, layer.bytes(r)?)))
    }
}

/// The layers of requests.csv's columns for `rows`: the fixed ones, then
/// every other one any of their readings has, in the record's order.
fn columns(rows: &[RequestRow]) -> Vec<Layer> {
    let mut others: Vec<Layer> = rows
        .iter()
        .flat_map(RequestRow::readings)
        .flat_map(Layer::others)
        .collect();
    others.sort();
    others.dedup();
    Layer::FIXED.into_iter().chain(others).collect()
}

/// Per layer: `a − b` where both were read.
pub(super) fn minus(a: &Readings, b: &Readings) -> Delta {
    Delta(
        Layer::read(a)
            .filter_map(|(layer, x)| Some((layer, x as i64 - layer.bytes(b)? as i64)))
            .collect(),
    )
}

/// A signed difference per layer (those read on both sides).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Delta(Vec<(Layer, i64)>);

impl Delta {
    /// The difference of `layer`; `None` where a side did not read it.
    pub fn get(&self, layer: Layer) -> Option<i64> {
        self.0.iter().find(|(l, _)| *l == layer).map(|(_, d)| *d)
    }

    /// Host memory's difference (0 where it was not read).
    pub fn host_bytes(&self) -> i64 {
        self.get(Layer::HOST).unwrap_or(0)
    }

    pub fn vram_bytes(&self) -> Option<i64> {
        self.get(Layer::Vram)
    }
}

/// requests.json's layers: `NAME_bytes` for each layer read.
impl Serialize for Delta {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (layer, bytes) in &self.0 {
            map.serialize_entry(&format!("{}_bytes", layer.name()), bytes)?;
        }
        map.end()
    }
}

/// A reading in requests.json: `NAME_bytes` for each layer read.
fn json_layers<S: Serializer>(r: &Readings, s: S) -> Result<S::Ok, S::Error> {
    let mut map = s.serialize_map(None)?;
    for (layer, bytes) in Layer::read(r) {
        map.serialize_entry(&format!("{}_bytes", layer.name()), &bytes)?;
    }
    map.end()
}

fn json_opt_layers<S: Serializer>(r: &Option<Readings>, s: S) -> Result<S::Ok, S::Error> {
    match r {
        Some(r) => json_layers(r, s),
        None => s.serialize_none(),
    }
}

/// Host memory in `r` (0 where it was not read).
pub fn host_bytes(r: &Readings) -> u64 {
    Layer::HOST.bytes(r).unwrap_or(0)
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
    #[serde(serialize_with = "json_layers")]
    pub at_send: Readings,
    #[serde(serialize_with = "json_opt_layers")]
    pub at_response: Option<Readings>,
    /// How long `until` took to be met, after the answer.
    pub until_s: Option<f64>,
    /// The reading once `settle_s` passed after the answer (and `until`).
    #[serde(serialize_with = "json_opt_layers")]
    pub settled: Option<Readings>,
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
    #[serde(serialize_with = "json_opt_layers")]
    pub before_load: Option<Readings>,
    /// Settled minus `before_load`, for an unload or a wake (a cycle's end):
    /// back where the cycle began?
    pub held: Option<Delta>,
    /// The level before the first judged cycle's first request (after the
    /// warm-up): the drive's baseline.
    #[serde(serialize_with = "json_opt_layers")]
    pub before_first: Option<Readings>,
    /// Settled minus `before_first`, for an unload or a wake: back where
    /// the first judged cycle began? What the console's `back` says.
    pub held_first: Option<Delta>,
    /// For a sleep: the reading just before it minus settled (what the
    /// sleep gave back, per layer; negative where a layer grew, as host
    /// memory does when weights are copied there).
    pub freed: Option<Delta>,
    pub error: Option<String>,
}

impl RequestRow {
    /// A request's row before it is sent: its send's reading and the levels
    /// it is compared with; the rest as it goes.
    pub(super) fn new(index: usize, cycle: u32, phase: String, request: String) -> RequestRow {
        RequestRow {
            index,
            cycle,
            phase,
            request,
            model: None,
            status: None,
            latency_s: None,
            send_t_s: 0.0,
            response_t_s: None,
            at_send: Readings::default(),
            at_response: None,
            until_s: None,
            settled: None,
            settle_s: None,
            settle_window_s: None,
            late: None,
            before_load: None,
            held: None,
            before_first: None,
            held_first: None,
            freed: None,
            error: None,
        }
    }

    /// Its readings (at the send, the answer, settled, and the levels it
    /// is compared with).
    fn readings(&self) -> impl Iterator<Item = &Readings> {
        std::iter::once(&self.at_send).chain(
            [
                &self.at_response,
                &self.settled,
                &self.before_load,
                &self.before_first,
            ]
            .into_iter()
            .flatten(),
        )
    }
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

/// What each layer's columns hold, in requests.csv's order: a reading
/// (`L_WHAT_bytes`) or a difference.
const WHATS: [&str; 9] = [
    "send",
    "response",
    "settled",
    "late",
    "before_load",
    "held",
    "before_first",
    "held_first",
    "freed",
];

/// requests.csv, requests.json and processes.csv, written again whole.
pub fn write(dir: &Path, rows: &[RequestRow], processes: &[ProcessRow]) -> Result<(), String> {
    let json = serde_json::to_vec_pretty(rows).map_err(|e| e.to_string())?;
    crate::fsutil::write_atomic(&dir.join(REQUESTS_JSON), &json).map_err(|e| e.to_string())?;
    let bytes = requests_csv(rows).map_err(|e| e.to_string())?;
    crate::fsutil::write_atomic(&dir.join(REQUESTS_CSV), &bytes).map_err(|e| e.to_string())?;
    let bytes = processes_csv(processes).map_err(|e| e.to_string())?;
    crate::fsutil::write_atomic(&dir.join(PROCESSES_CSV), &bytes).map_err(|e| e.to_string())
}

/// A cell of an optional value: empty where there is none.
fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

fn seconds(s: Option<f64>) -> String {
    opt(s.map(|s| format!("{s:.6}")))
}

/// requests.csv: the request's own columns, each fixed layer's readings
/// and differences, their `back` columns, `error`; then each other layer
/// read (`anon`, `shm`, …), its readings and differences and `back`s.
fn requests_csv(rows: &[RequestRow]) -> Result<Vec<u8>, csv::Error> {
    let layers = columns(rows);
    let (fixed, others) = layers.split_at(Layer::FIXED.len());
    let mut header: Vec<String> = [
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
    ]
    .map(String::from)
    .to_vec();
    let layer_columns = |header: &mut Vec<String>, layers: &[Layer]| {
        for name in layers.iter().map(|l| l.name()) {
            header.extend(WHATS.map(|what| format!("{name}_{what}_bytes")));
        }
        for name in layers.iter().map(|l| l.name()) {
            header.extend([format!("{name}_back"), format!("{name}_back_cycle")]);
        }
    };
    layer_columns(&mut header, fixed);
    header.push("error".to_string());
    layer_columns(&mut header, others);
    let mut csv = csv::Writer::from_writer(Vec::new());
    csv.write_record(&header)?;
    for r in rows {
        let mut cells = vec![
            r.index.to_string(),
            r.cycle.to_string(),
            r.phase.clone(),
            r.request.clone(),
            opt(r.model.clone()),
            opt(r.status),
            seconds(r.latency_s),
            format!("{:.6}", r.send_t_s),
            seconds(r.response_t_s),
            seconds(r.until_s),
            seconds(r.settle_s),
            seconds(r.settle_window_s),
        ];
        layer_cells(&mut cells, r, fixed);
        cells.push(opt(r.error.clone()));
        layer_cells(&mut cells, r, others);
        csv.write_record(&cells)?;
    }
    csv.into_inner().map_err(|e| e.into_error().into())
}

/// Each of `layers`' cells of `r`: its readings and differences
/// ([`WHATS`]), then its `back` and `back_cycle` (`yes` where it holds no
/// more than the tolerance over the level before the first judged cycle,
/// and before its own cycle).
fn layer_cells(cells: &mut Vec<String>, r: &RequestRow, layers: &[Layer]) {
    let reading = |l: &Option<Readings>, layer: Layer| opt(l.as_ref().and_then(|l| layer.bytes(l)));
    let delta = |d: &Option<Delta>, layer: Layer| opt(d.as_ref().and_then(|d| d.get(layer)));
    for &layer in layers {
        cells.extend([
            opt(layer.bytes(&r.at_send)),
            reading(&r.at_response, layer),
            reading(&r.settled, layer),
            delta(&r.late, layer),
            reading(&r.before_load, layer),
            delta(&r.held, layer),
            reading(&r.before_first, layer),
            delta(&r.held_first, layer),
            delta(&r.freed, layer),
        ]);
    }
    let back = |d: &Option<Delta>, layer: Layer| -> String {
        match d.as_ref().and_then(|d| d.get(layer)) {
            Some(h) if h <= TOLERANCE_BYTES as i64 => "yes".into(),
            Some(_) => "no".into(),
            None => String::new(),
        }
    };
    for &layer in layers {
        cells.push(back(&r.held_first, layer));
        cells.push(back(&r.held, layer));
    }
}

/// processes.csv: each process of the tree once a request settled.
fn processes_csv(processes: &[ProcessRow]) -> Result<Vec<u8>, csv::Error> {
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
    ])?;
    for p in processes {
        csv.write_record([
            p.index.to_string(),
            p.cycle.to_string(),
            p.phase.clone(),
            p.pid.to_string(),
            p.comm.clone(),
            p.command.clone(),
            opt(p.pss_bytes),
            opt(p.vram_bytes),
        ])?;
    }
    csv.into_inner().map_err(|e| e.into_error().into())
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
    let held = row.held.as_ref()?;
    let gap = TOLERANCE_BYTES as i64;
    if held.host_bytes() <= gap {
        return None;
    }
    let mib = |b: i64| b as f64 / MIB;
    let mut parts = Vec::new();
    let shmem_bytes = held.get(Layer::SHMEM);
    if let Some(shmem) = shmem_bytes.filter(|b| *b > gap) {
        parts.push(format!(
            "{:.0} MiB of shared memory mapped (RssShmem: a pinned host buffer, such as the \
             sleep's backup that PyTorch's host allocator keeps cached)",
            mib(shmem)
        ));
    }
    let anon_bytes = held.get(Layer::ANON).unwrap_or(0);
    if anon_bytes > gap {
        parts.push(format!(
            "{:.0} MiB anonymous (the heap: freed but kept by the allocator, or still referenced)",
            mib(anon_bytes)
        ));
    }
    // The file-backed layer counts shared memory too (RssFile + RssShmem).
    let file_bytes = held.get(Layer::FILE).unwrap_or(0) - shmem_bytes.unwrap_or(0).max(0);
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
        mib(held.host_bytes())
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Host memory and the catalogued `shm`, in MiB.
    fn reading(host_mib: u64, shm_mib: u64) -> Readings {
        let mut r = Readings::default();
        r.set(Resource::Host, host_mib << 20);
        r.set_part(Resource::Host, Part::Anon, host_mib << 20);
        r.set_part(Resource::Host, Part::File, 0);
        if let Some(shm) = Resource::parse("shm") {
            r.set(shm, shm_mib << 20);
        }
        r
    }

    #[test]
    fn every_resource_read_has_its_columns_after_the_ones_requests_csv_always_had() {
        let mut row = RequestRow::new(1, 1, "unload".into(), "POST /unload".into());
        row.at_send = reading(100, 48);
        row.settled = Some(reading(40, 0));
        row.before_load = Some(reading(40, 0));
        row.held = Some(minus(&reading(40, 0), &reading(40, 0)));
        let text = String::from_utf8(requests_csv(&[row]).expect("csv")).expect("utf-8");
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().expect("header").split(',').collect();
        let cells: Vec<&str> = lines.next().expect("a row").split(',').collect();
        let at = |c: &str| header.iter().position(|h| *h == c).expect(c);
        // The old columns where they were: 12 of the request, then 9 per
        // fixed layer, their 10 `back`s, `error`.
        assert_eq!(header[12], "host_send_bytes");
        assert_eq!(header[12 + 9], "vram_send_bytes");
        assert_eq!(at("host_back"), 12 + 45);
        assert_eq!(at("error"), 12 + 45 + 10);
        // Then host memory's parts and shm, as the record names them.
        let after = &header[at("error") + 1..];
        assert_eq!(after[0], "anon_send_bytes");
        assert_eq!(after[9], "file_send_bytes");
        assert_eq!(after[18], "shm_send_bytes");
        assert_eq!(cells[at("shm_send_bytes")], (48u64 << 20).to_string());
        assert_eq!(cells[at("shm_settled_bytes")], "0");
        assert_eq!(cells[at("shm_back_cycle")], "yes");
        assert_eq!(cells[at("shm_held_first_bytes")], "");
        assert_eq!(cells[at("vram_send_bytes")], "");
    }
}
