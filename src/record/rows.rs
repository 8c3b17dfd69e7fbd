//! The CSV rows of samples.csv and events.csv: one flat row per sample and per
//! phase edge, written by serde, with the column lists kept for empty files.
//!
//! One struct per file serves both ways: its text fields are `Cow`, borrowed
//! from the record when writing (the sampler writes a row per reading without
//! allocating) and owned when reading, so the two cannot drift apart.

use std::borrow::Cow;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::gpu::GpuVram;
use super::readings::Part;
use super::resource::Resource;
use super::types::{round_us, ContainerSample, Event, Readings, Record, RunMeta, Sample};
use crate::protocol::{AllocatorState, Edge, HeapStats, MemoryAtEdge, Phase, PhaseEdge};

/// A samples.csv row: `SampleRow<'static>` when read back.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct SampleRow<'a> {
    pub(super) t_s: f64,
    pub(super) run: u32,
    pub(super) strategy: Cow<'a, str>,
    pub(super) repetition: u32,
    pub(super) cycle: u32,
    pub(super) phase: Cow<'a, str>,
    pub(super) rss_bytes: u64,
    pub(super) anon_bytes: u64,
    pub(super) file_bytes: u64,
    pub(super) vram_bytes: Option<u64>,
    /// VRAM per GPU where NVML sees several (`record::gpu`); empty otherwise.
    #[serde(default)]
    pub(super) gpu_vram: Option<Cow<'a, str>>,
    /// The container's view: its working set, usage, anon and file (absent
    /// in older records and where no cgroup could be read).
    #[serde(default)]
    pub(super) container_bytes: Option<u64>,
    #[serde(default)]
    pub(super) container_usage_bytes: Option<u64>,
    #[serde(default)]
    pub(super) container_anon_bytes: Option<u64>,
    #[serde(default)]
    pub(super) container_file_bytes: Option<u64>,
    /// The model files' page cache (absent in older records).
    #[serde(default)]
    pub(super) page_cache_bytes: Option<u64>,
    /// The catalogued resources (`record::readings`; absent in older records).
    #[serde(default)]
    pub(super) readings: Option<Cow<'a, str>>,
}

/// The header of samples.csv: `SampleRow`'s fields, written by hand when
/// there is no row to serialize (a unit test keeps the two in step).
pub(super) const SAMPLE_COLUMNS: [&str; 17] = [
    "t_s",
    "run",
    "strategy",
    "repetition",
    "cycle",
    "phase",
    "rss_bytes",
    "anon_bytes",
    "file_bytes",
    "vram_bytes",
    "gpu_vram",
    "container_bytes",
    "container_usage_bytes",
    "container_anon_bytes",
    "container_file_bytes",
    "page_cache_bytes",
    "readings",
];

/// The header of events.csv: `EventRow`'s fields (see `SAMPLE_COLUMNS`).
pub(super) const EVENT_COLUMNS: [&str; 28] = [
    "t_s",
    "run",
    "strategy",
    "repetition",
    "cycle",
    "phase",
    "edge",
    "model",
    "elapsed_s",
    "rss_bytes",
    "anon_bytes",
    "file_bytes",
    "vram_bytes",
    "glibc_arena_bytes",
    "glibc_mmapped_bytes",
    "glibc_in_use_bytes",
    "glibc_free_bytes",
    "glibc_top_releasable_bytes",
    "heap_in_use_bytes",
    "heap_held_bytes",
    "container_bytes",
    "page_cache_bytes",
    "note",
    "kernel_peak_bytes",
    "gpu_vram",
    "readings",
    "container_anon_bytes",
    "held_s",
];

/// An events.csv row: `EventRow<'static>` when read back.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct EventRow<'a> {
    t_s: f64,
    run: u32,
    strategy: Cow<'a, str>,
    repetition: u32,
    cycle: u32,
    phase: Cow<'a, str>,
    edge: Cow<'a, str>,
    model: Option<Cow<'a, str>>,
    elapsed_s: Option<f64>,
    rss_bytes: u64,
    anon_bytes: u64,
    file_bytes: u64,
    vram_bytes: Option<u64>,
    glibc_arena_bytes: Option<u64>,
    glibc_mmapped_bytes: Option<u64>,
    glibc_in_use_bytes: Option<u64>,
    glibc_free_bytes: Option<u64>,
    glibc_top_releasable_bytes: Option<u64>,
    /// The allocator's own view (any allocator; absent in older records).
    #[serde(default)]
    heap_in_use_bytes: Option<u64>,
    #[serde(default)]
    heap_held_bytes: Option<u64>,
    /// The container's working set as the parent read it at the edge.
    #[serde(default)]
    container_bytes: Option<u64>,
    /// The model files' page cache, read by the parent (absent in older records).
    #[serde(default)]
    page_cache_bytes: Option<u64>,
    note: Option<Cow<'a, str>>,
    /// The kernel's peak since the previous edge (absent in older records).
    #[serde(default)]
    kernel_peak_bytes: Option<u64>,
    /// VRAM per GPU at the edge where NVML sees several (`record::gpu`);
    /// empty otherwise and in older records.
    #[serde(default)]
    gpu_vram: Option<Cow<'a, str>>,
    /// The catalogued resources at the edge (absent in older records).
    #[serde(default)]
    readings: Option<Cow<'a, str>>,
    /// The container's anonymous part at the edge (absent in older records).
    #[serde(default)]
    container_anon_bytes: Option<u64>,
    /// How long the program waited for memrel's reading of the edge
    /// (`Event::held_s`; absent in older records).
    #[serde(default)]
    held_s: Option<f64>,
}

impl<'a> SampleRow<'a> {
    /// The row of `sample`, borrowing its strategy (for writing); `cell`
    /// holds its `gpu_vram` text (a buffer the writer reuses).
    pub(super) fn new(
        run: u32,
        strategy: &'a str,
        repetition: u32,
        cycle: u32,
        phase: Phase,
        sample: &Sample,
        cell: &'a mut String,
    ) -> SampleRow<'a> {
        let r = &sample.readings;
        r.gpu_vram().write_cell(cell);
        let container = r.container();
        SampleRow {
            t_s: round_us(sample.t_s),
            run,
            strategy: Cow::Borrowed(strategy),
            repetition,
            cycle,
            phase: Cow::Borrowed(phase.as_str()),
            rss_bytes: r.get(Resource::Host).unwrap_or(0),
            anon_bytes: r.part(Resource::Host, Part::Anon).unwrap_or(0),
            file_bytes: r.part(Resource::Host, Part::File).unwrap_or(0),
            vram_bytes: r.vram_column(),
            gpu_vram: (!cell.is_empty()).then_some(Cow::Borrowed(cell.as_str())),
            container_bytes: container.map(|c| c.working_set_bytes),
            container_usage_bytes: container.map(|c| c.usage_bytes),
            container_anon_bytes: container.and_then(|c| c.anon_bytes),
            container_file_bytes: container.and_then(|c| c.file_bytes),
            page_cache_bytes: r.get(Resource::PageCache),
            readings: r.has_probed().then(|| Cow::Owned(r.cell())),
        }
    }

    /// The sample this row holds; `Err` names a `gpu_vram` or `readings`
    /// cell that is not `GPU:BYTES` or `KEY=BYTES` entries.
    pub(super) fn sample(&self) -> Result<Sample, String> {
        let mut r = host_and_vram(
            [self.rss_bytes, self.anon_bytes, self.file_bytes],
            self.gpu_vram.as_deref(),
            self.vram_bytes,
        )?;
        if let (Some(working_set_bytes), Some(usage_bytes)) =
            (self.container_bytes, self.container_usage_bytes)
        {
            r.set_container(Some(ContainerSample {
                working_set_bytes,
                usage_bytes,
                anon_bytes: self.container_anon_bytes,
                file_bytes: self.container_file_bytes,
            }));
        }
        r.set_opt(Resource::PageCache, Part::Whole, self.page_cache_bytes);
        if let Some(cell) = &self.readings {
            r.parse_cell(cell)?;
        }
        Ok(Sample::from_readings(self.t_s, r))
    }
}

impl<'a> EventRow<'a> {
    /// The row of `event`, borrowing its texts (for writing).
    pub(super) fn new(meta: &'a RunMeta, event: &'a Event) -> EventRow<'a> {
        let e = &event.edge;
        let r = &event.readings;
        let alloc = e.allocator;
        EventRow {
            t_s: round_us(event.t_s),
            run: meta.run,
            strategy: Cow::Borrowed(&meta.strategy),
            repetition: meta.repetition,
            cycle: e.cycle,
            phase: Cow::Borrowed(e.phase.as_str()),
            edge: Cow::Borrowed(e.edge.as_str()),
            model: e.model.as_deref().map(Cow::Borrowed),
            elapsed_s: e.elapsed_s,
            rss_bytes: r.get(Resource::Host).unwrap_or(0),
            anon_bytes: r.part(Resource::Host, Part::Anon).unwrap_or(0),
            file_bytes: r.part(Resource::Host, Part::File).unwrap_or(0),
            vram_bytes: r.vram_column(),
            glibc_arena_bytes: alloc.map(|a| a.arena_bytes),
            glibc_mmapped_bytes: alloc.map(|a| a.mmapped_bytes),
            glibc_in_use_bytes: alloc.map(|a| a.in_use_bytes),
            glibc_free_bytes: alloc.map(|a| a.free_bytes),
            glibc_top_releasable_bytes: alloc.map(|a| a.top_releasable_bytes),
            heap_in_use_bytes: e.heap.and_then(|h| h.in_use_bytes),
            heap_held_bytes: e.heap.map(|h| h.held_bytes),
            container_bytes: r.get(Resource::Container),
            page_cache_bytes: r.get(Resource::PageCache),
            note: e.note.as_deref().map(Cow::Borrowed),
            kernel_peak_bytes: r.part(Resource::Host, Part::Peak),
            gpu_vram: {
                let mut cell = String::new();
                r.gpu_vram().write_cell(&mut cell);
                (!cell.is_empty()).then_some(Cow::Owned(cell))
            },
            readings: r.has_probed().then(|| Cow::Owned(r.cell())),
            container_anon_bytes: r.part(Resource::Container, Part::Anon),
            held_s: event.held_s.map(round_us),
        }
    }
}

impl Record {
    pub fn samples_csv(&self) -> Result<Vec<u8>> {
        let mut writer = csv::Writer::from_writer(Vec::new());
        let mut cell = String::new();
        for run in &self.runs {
            for (sample, (cycle, phase)) in run.samples.iter().zip(run.sample_phases()) {
                let m = &run.meta;
                writer.serialize(SampleRow::new(
                    m.run,
                    &m.strategy,
                    m.repetition,
                    cycle,
                    phase,
                    sample,
                    &mut cell,
                ))?;
            }
        }
        if self.runs.iter().all(|r| r.samples.is_empty()) {
            writer.write_record(SAMPLE_COLUMNS)?;
        }
        Ok(writer.into_inner()?)
    }

    pub fn events_csv(&self) -> Result<Vec<u8>> {
        let mut writer = csv::Writer::from_writer(Vec::new());
        for run in &self.runs {
            for event in &run.events {
                writer.serialize(EventRow::new(&run.meta, event))?;
            }
        }
        if self.runs.iter().all(|r| r.events.is_empty()) {
            writer.write_record(EVENT_COLUMNS)?;
        }
        Ok(writer.into_inner()?)
    }
}

/// One events.csv row as (run, event).
pub(super) fn event_from_row(row: EventRow<'static>) -> std::result::Result<(u32, Event), String> {
    let phase = Phase::parse(&row.phase).ok_or_else(|| format!("unknown phase {:?}", row.phase))?;
    let edge = match row.edge.as_ref() {
        "begin" => Edge::Begin,
        "end" => Edge::End,
        other => return Err(format!("unknown edge {other:?}")),
    };
    let allocator = match (
        row.glibc_arena_bytes,
        row.glibc_mmapped_bytes,
        row.glibc_in_use_bytes,
        row.glibc_free_bytes,
        row.glibc_top_releasable_bytes,
    ) {
        (Some(arena), Some(mmapped), Some(in_use), Some(free), Some(top)) => Some(AllocatorState {
            arena_bytes: arena,
            mmapped_bytes: mmapped,
            in_use_bytes: in_use,
            free_bytes: free,
            top_releasable_bytes: top,
        }),
        _ => None,
    };
    let mut readings = host_and_vram(
        [row.rss_bytes, row.anon_bytes, row.file_bytes],
        row.gpu_vram.as_deref(),
        row.vram_bytes,
    )?;
    readings.set_opt(Resource::Container, Part::Whole, row.container_bytes);
    readings.set_opt(Resource::Container, Part::Anon, row.container_anon_bytes);
    readings.set_opt(Resource::PageCache, Part::Whole, row.page_cache_bytes);
    readings.set_opt(Resource::Host, Part::Peak, row.kernel_peak_bytes);
    if let Some(cell) = &row.readings {
        readings.parse_cell(cell)?;
    }
    let mut memory = MemoryAtEdge::default();
    readings.fill_memory(&mut memory);
    let event = Event {
        t_s: row.t_s,
        edge: PhaseEdge {
            phase,
            edge,
            cycle: row.cycle,
            model: row.model.map(Cow::into_owned),
            elapsed_s: row.elapsed_s,
            memory,
            allocator,
            heap: row.heap_held_bytes.map(|held_bytes| HeapStats {
                in_use_bytes: row.heap_in_use_bytes,
                held_bytes,
            }),
            // A record keeps a program's views in its readings cell.
            views: Default::default(),
            note: row.note.map(Cow::into_owned),
            mono_s: None,
        },
        readings,
        held_s: row.held_s,
    };
    Ok((row.run, event))
}

/// The readings every row of both files holds: host memory (`rss_bytes`,
/// `anon_bytes`, `file_bytes`) and VRAM (the `gpu_vram` cell, then the
/// `vram_bytes` column); `Err` names a `gpu_vram` cell that is not
/// `GPU:BYTES` entries.
fn host_and_vram(
    [rss, anon, file]: [u64; 3],
    gpu_vram: Option<&str>,
    vram_bytes: Option<u64>,
) -> std::result::Result<Readings, String> {
    let mut r = Readings::default();
    r.set(Resource::Host, rss);
    r.set_part(Resource::Host, Part::Anon, anon);
    r.set_part(Resource::Host, Part::File, file);
    if let Some(cell) = gpu_vram {
        r.set_gpu_vram(&GpuVram::parse(cell)?);
    }
    r.set_vram_column(0, vram_bytes);
    Ok(r)
}
