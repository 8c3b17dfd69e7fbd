//! `memrel calibrate`: are memrel's numbers right? The fake worker maps
//! exactly N bytes (anonymous memory, or a file's pages touched one by one)
//! and holds a short spike; this module compares what memrel measured with
//! what was mapped, the sampled peak with the kernel's `VmHWM`, each phase
//! marker with the moment memory changed, and says whether the spike was
//! caught at the chosen interval. Pure functions of saved records, so the
//! table can be recomputed from disk; `commands::calibrate` only runs and prints.
//!
//! Device memory (`--device cuda`) has its own targets and table (`vram`):
//! a CUDA context, NVML and `cuMemAlloc` move in steps, not bytes.

use std::fmt::Write;

use serde::Serialize;

use crate::export::markdown::{
    Align::{Left, Right},
    Table,
};
use crate::protocol::{Edge, Phase};
use crate::record::{Event, Part, Readings, Resource, RunRecord, Sample};
use crate::scenario::DeviceSpec;
use crate::stats;
use crate::textutil::MIB;

pub mod vram;

pub use vram::VramCalibration;

/// How much memory a calibration case maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Anon,
    File,
    /// Device memory (`cuMemAlloc`), on a CUDA device.
    Vram,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Anon => "anon",
            Kind::File => "file",
            Kind::Vram => "vram",
        }
    }

    /// The scenario key of a fake model of this kind.
    pub fn fake_key(self) -> &'static str {
        match self {
            Kind::Anon => "fake_anon_mib",
            Kind::File => "fake_file_mib",
            Kind::Vram => "fake_vram_mib",
        }
    }

    /// The part of a sample this kind lands in (`None`: not read then).
    fn part(self, s: &Sample) -> Option<u64> {
        self.in_readings(&s.readings)
    }

    /// The part of the worker's own reading at an edge this kind lands in.
    fn at_edge(self, e: &Event) -> Option<u64> {
        self.in_readings(&e.readings)
    }

    /// The part of one map of readings this kind lands in.
    fn in_readings(self, r: &Readings) -> Option<u64> {
        match self {
            Kind::Anon => r.part(Resource::Host, Part::Anon),
            Kind::File => r.part(Resource::Host, Part::File),
            Kind::Vram => r.vram_column(),
        }
    }

    /// Where a run of this kind runs: host memory on the CPU, VRAM on `device`.
    pub fn device(self, device: DeviceSpec) -> DeviceSpec {
        match self {
            Kind::Anon | Kind::File => DeviceSpec::Cpu,
            Kind::Vram => device,
        }
    }
}

/// The model id of a case: `anon-16` for 16 MiB of anonymous memory.
pub fn model_id(kind: Kind, mib: u64) -> String {
    format!("{}-{mib}", kind.as_str())
}

/// The spike's model id.
pub const SPIKE_ID: &str = "spike";

/// The model loaded once before the sizes (no case of its own).
pub const WARMUP_ID: &str = "warmup";

/// The calibration scenario: every size of one kind in turn (load, hold,
/// unload, wait), then the spike (`spike_mib` held for `spike_ms`), on
/// `device` (a VRAM scenario names it; host ones run on the CPU).
pub fn scenario_text(
    kind: Kind,
    device: DeviceSpec,
    sizes_mib: &[u64],
    interval_ms: f64,
    spike: (u64, u64),
) -> String {
    let mut text = format!(
        "description = \"memrel calibrate: exact {} bytes from the fake worker\"\n\
         cycles = 1\nstrategies = [\"drop\"]\ninterval_ms = {interval_ms}\ntimeout_s = 600\n",
        kind.as_str()
    );
    if let DeviceSpec::Cuda(_) = kind.device(device) {
        let _ = writeln!(text, "device = \"{}\"", kind.device(device));
    }
    // One small load and unload of the kind first, measured by no case: the
    // worker's first pass through its loading code faults that code's pages
    // in (file-backed, ~0.3 MiB), which would count in the first size's.
    let _ = write!(text, "[models.{WARMUP_ID}]\n{} = 1\n", kind.fake_key());
    let mut steps = vec![
        format!("load {WARMUP_ID}"),
        format!("unload {WARMUP_ID}"),
        format!("idle {HOLD_MS}"),
    ];
    for &mib in sizes_mib {
        let id = model_id(kind, mib);
        let _ = write!(text, "[models.{id}]\n{} = {mib}\n", kind.fake_key());
        steps.extend([
            format!("load {id}"),
            format!("idle {HOLD_MS}"),
            format!("unload {id}"),
            format!("idle {HOLD_MS}"),
        ]);
    }
    let (spike_mib, spike_ms) = spike;
    // The spike is of the kind's own memory (anonymous for the host kinds).
    let spike_key = match kind {
        Kind::Vram => Kind::Vram.fake_key(),
        Kind::Anon | Kind::File => Kind::Anon.fake_key(),
    };
    let _ = write!(text, "[models.{SPIKE_ID}]\n{spike_key} = {spike_mib}\n");
    steps.extend([
        format!("load {SPIKE_ID}"),
        format!("idle {spike_ms}"),
        format!("unload {SPIKE_ID}"),
        format!("idle {HOLD_MS}"),
    ]);
    let quoted: Vec<String> = steps.iter().map(|s| format!("{s:?}")).collect();
    let _ = write!(
        text,
        "[workload]\nsteps = [{}]\nbaseline_ms = {HOLD_MS}\n",
        quoted.join(", ")
    );
    text
}

/// How long each size is held (and the quiet time after it), in ms: many
/// samples at any interval up to 10 ms.
pub const HOLD_MS: u64 = 150;

/// One size of one kind, as measured.
#[derive(Debug, Clone, Serialize)]
pub struct Case {
    pub kind: Kind,
    pub expected_bytes: u64,
    /// At the load's end edge minus its begin edge (the worker's own statm).
    pub edge_bytes: i64,
    /// The middle reading (`stats::upper_median`) of the samples while held
    /// minus the one before the load.
    pub sampled_bytes: i64,
    /// The larger of the two errors, as a share of the expected bytes.
    pub error_fraction: f64,
    /// First sample holding all the bytes (less 64 pages), minus the load's
    /// end edge (s): within one interval after it when markers are right
    /// (or the marker lies between it and the sample before it).
    pub alignment_s: Option<f64>,
    pub ok: bool,
}

/// The spike: did sampling see it?
#[derive(Debug, Clone, Serialize)]
pub struct Spike {
    pub bytes: u64,
    pub held_ms: u64,
    /// The highest sample while it was held, above the level before it.
    pub seen_bytes: i64,
    pub caught: bool,
}

/// Peak of the samples against the kernel's high-water mark, per run.
#[derive(Debug, Clone, Serialize)]
pub struct Peak {
    pub kind: Kind,
    pub sampled_peak_bytes: u64,
    pub vm_hwm_bytes: u64,
    pub error_fraction: f64,
    pub ok: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Calibration {
    pub interval_s: f64,
    pub cases: Vec<Case>,
    pub peaks: Vec<Peak>,
    pub spikes: Vec<Spike>,
    /// Device memory, with `--device cuda` only (absent from a CPU calibration).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vram: Option<VramCalibration>,
    pub passed: bool,
}

/// The targets: anon and file within 1 % plus page rounding, peak within
/// 1 % of VmHWM, markers within one interval + 1 ms (or bracketed by the
/// samples around the change).
const SIZE_TOLERANCE: f64 = 0.01;
const PAGE_SLACK_BYTES: f64 = 64.0 * 4096.0;
const ALIGNMENT_SLACK_S: f64 = 0.001;

/// The cases of one calibration run (one kind, every size, the spike).
pub fn measure(
    run: &RunRecord,
    kind: Kind,
    sizes_mib: &[u64],
    interval_s: f64,
    spike_ms: u64,
) -> (Vec<Case>, Option<Peak>, Option<Spike>) {
    let cases = sizes_mib
        .iter()
        .filter_map(|&mib| measure_case(run, kind, mib, interval_s))
        .collect();
    let peak = run.meta.vm_hwm_bytes.and_then(|hwm| {
        let sampled = run.samples.iter().map(|s| s.host_bytes()).max()?;
        let error_fraction = (sampled as f64 - hwm as f64).abs() / hwm as f64;
        Some(Peak {
            kind,
            sampled_peak_bytes: sampled,
            vm_hwm_bytes: hwm,
            error_fraction,
            ok: error_fraction <= SIZE_TOLERANCE,
        })
    });
    (cases, peak, measure_spike(run, spike_ms))
}

/// The case of one size (`mib`) of `kind`; `None` where the run lacks its
/// load or unload edges, or its edges a reading of `kind`.
fn measure_case(run: &RunRecord, kind: Kind, mib: u64, interval_s: f64) -> Option<Case> {
    let id = model_id(kind, mib);
    let expected = mib * 1024 * 1024;
    let begin = edge(run, Phase::Load, Edge::Begin, &id)?;
    let end = edge(run, Phase::Load, Edge::End, &id)?;
    let unload = edge(run, Phase::Unload, Edge::Begin, &id)?;
    let edge_bytes = kind.at_edge(end)? as i64 - kind.at_edge(begin)? as i64;
    let before = middle_reading(window(run, begin.t_s - 0.1, begin.t_s), kind);
    let held = middle_reading(window(run, end.t_s + interval_s, unload.t_s), kind);
    let sampled_bytes = match (before, held) {
        (Some(b), Some(h)) => h as i64 - b as i64,
        _ => 0,
    };
    let error = (edge_bytes - expected as i64)
        .abs()
        .max((sampled_bytes - expected as i64).abs()) as f64;
    let error_fraction = error / expected as f64;
    // Memory has changed once it holds all the bytes (up to the
    // worker's own pages): the load's end marker should be there.
    let target = before.map(|b| b as f64 + expected as f64 - PAGE_SLACK_BYTES);
    let after_begin: Vec<&Sample> = run.samples.iter().filter(|s| s.t_s >= begin.t_s).collect();
    let full_at = target.and_then(|target| {
        after_begin
            .iter()
            .position(|s| kind.part(s).is_some_and(|p| p as f64 >= target))
    });
    let alignment_s = full_at.map(|i| after_begin[i].t_s - end.t_s);
    // On a loaded machine the sampler can fall behind (it skips the ticks
    // it missed): a marker between the last sample without the bytes and
    // the first with them is where the memory changed, however far apart.
    let bracketed = full_at.filter(|&i| i > 0).is_some_and(|i| {
        let (last_short, first_full) = (after_begin[i - 1].t_s, after_begin[i].t_s);
        end.t_s >= last_short - ALIGNMENT_SLACK_S && end.t_s <= first_full + ALIGNMENT_SLACK_S
    });
    let aligned =
        bracketed || alignment_s.is_some_and(|a| a.abs() <= interval_s + ALIGNMENT_SLACK_S);
    Some(Case {
        kind,
        expected_bytes: expected,
        edge_bytes,
        sampled_bytes,
        error_fraction,
        alignment_s,
        ok: error <= SIZE_TOLERANCE * expected as f64 + PAGE_SLACK_BYTES && aligned,
    })
}

/// The spike held for `spike_ms`, if the run has its edges and a VmHWM:
/// what it allocated (at its edges) against the highest sample while held.
fn measure_spike(run: &RunRecord, spike_ms: u64) -> Option<Spike> {
    let begin = edge(run, Phase::Load, Edge::Begin, SPIKE_ID)?;
    let end = edge(run, Phase::Unload, Edge::End, SPIKE_ID)?;
    let loaded = run
        .meta
        .vm_hwm_bytes
        .and(edge(run, Phase::Load, Edge::End, SPIKE_ID))?;
    let bytes = loaded
        .edge
        .memory
        .anon_bytes
        .saturating_sub(begin.edge.memory.anon_bytes);
    let before = begin.edge.memory.rss_bytes as i64;
    let seen = window(run, begin.t_s, end.t_s)
        .map(|s| s.host_bytes() as i64 - before)
        .max()
        .unwrap_or(0);
    Some(Spike {
        bytes,
        held_ms: spike_ms,
        seen_bytes: seen,
        caught: seen as f64 >= 0.9 * bytes as f64,
    })
}

fn edge<'a>(run: &'a RunRecord, phase: Phase, e: Edge, model: &str) -> Option<&'a Event> {
    run.events.iter().find(|x| {
        x.edge.phase == phase && x.edge.edge == e && x.edge.model.as_deref() == Some(model)
    })
}

fn window(run: &RunRecord, from_s: f64, to_s: f64) -> impl Iterator<Item = &Sample> {
    run.samples
        .iter()
        .filter(move |s| s.t_s >= from_s && s.t_s <= to_s)
}

/// The middle reading of `kind` in `samples` (`stats::upper_median`: a
/// value a sample held, never the average of two).
fn middle_reading<'a>(samples: impl Iterator<Item = &'a Sample>, kind: Kind) -> Option<u64> {
    stats::upper_median(samples.filter_map(|s| kind.part(s)).collect())
}

/// The calibration as a Markdown table, for people.
pub fn markdown(c: &Calibration) -> String {
    let mut out = format!(
        "### memrel calibrate: {} (sampling every {:.0} ms)\n\n",
        if c.passed {
            "every target met"
        } else {
            "TARGETS MISSED"
        },
        c.interval_s * 1e3
    );
    let mut cases = Table::columns([
        ("kind", Left),
        ("expected MiB", Right),
        ("at the edges MiB", Right),
        ("sampled MiB", Right),
        ("error", Right),
        ("marker vs memory", Right),
        ("ok", Left),
    ]);
    for case in &c.cases {
        cases.row([
            case.kind.as_str().to_string(),
            format!("{:.0}", case.expected_bytes as f64 / MIB),
            format!("{:.2}", case.edge_bytes as f64 / MIB),
            format!("{:.2}", case.sampled_bytes as f64 / MIB),
            format!("{:.3} %", case.error_fraction * 100.0),
            case.alignment_s
                .map(|a| format!("{:+.1} ms", a * 1e3))
                .unwrap_or_else(|| "never reached".into()),
            yes_no(case.ok).to_string(),
        ]);
    }
    out.push_str(&cases.markdown());
    let mut peaks = Table::columns([
        ("run", Left),
        ("sampled peak MiB", Right),
        ("VmHWM MiB", Right),
        ("error", Right),
        ("ok", Left),
    ]);
    for p in &c.peaks {
        peaks.row([
            p.kind.as_str().to_string(),
            format!("{:.2}", p.sampled_peak_bytes as f64 / MIB),
            format!("{:.2}", p.vm_hwm_bytes as f64 / MIB),
            format!("{:.3} %", p.error_fraction * 100.0),
            yes_no(p.ok).to_string(),
        ]);
    }
    out.push('\n');
    out.push_str(&peaks.markdown());
    out.push('\n');
    out.push_str(&spike_table(&c.spikes));
    out.push_str(
        "\nTargets: anon and file within 1 % plus 64 pages (the worker's own pages), \
         sampled peak within 1 % of the kernel's VmHWM, each load's end marker within one \
         interval + 1 ms of the first sample that holds all the bytes (less 64 pages), or \
         between that sample and the one before it (a sampler that fell behind on a busy \
         machine). ",
    );
    match &c.vram {
        None => out.push_str(&format!(
            "VRAM: not measured here ({} measures it).\n",
            crate::hint::Hint::CalibrateCuda
        )),
        Some(v) => {
            out.push_str("VRAM: below.\n\n");
            out.push_str(&vram::markdown(v, c.interval_s));
        }
    }
    out
}

/// `yes`, or `NO` in capitals so that a miss stands out.
fn yes_no(ok: bool) -> &'static str {
    if ok {
        "yes"
    } else {
        "NO"
    }
}

/// The spike table, the same for host and device memory.
fn spike_table<'a>(spikes: impl IntoIterator<Item = &'a Spike>) -> String {
    let mut table = Table::columns([
        ("spike MiB", Right),
        ("held ms", Right),
        ("highest sample above it MiB", Right),
        ("caught", Left),
    ]);
    for s in spikes {
        table.row([
            format!("{:.0}", s.bytes as f64 / MIB),
            s.held_ms.to_string(),
            format!("{:.1}", s.seen_bytes as f64 / MIB),
            if s.caught { "yes" } else { "no" }.to_string(),
        ]);
    }
    table.markdown()
}
