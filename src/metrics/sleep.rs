//! Sleep and wake, measured in memory as well as seconds: for each sleep of a
//! model and the wake that follows it in a run, the time each took, the copy
//! rate each way against the bus's pinned ceiling measured in the same run,
//! VRAM while asleep (before and after the pool was flushed), host memory
//! grown while asleep and still held after the wake.
//!
//! The worker (or a program) reports the copies in its sleep/wake notes as
//! `copied_bytes=N copy_s=S gib_per_s=R`, VRAM before the flush as
//! `vram_before_flush_bytes=N` where it flushes inside the sleep, and the ceiling in its warm-up note as
//! `ceiling_d2h_gib_s=R ceiling_h2d_gib_s=R`; memory at the edges is the
//! record's own.

use crate::metrics::ResourceFacts;
use serde::{Deserialize, Serialize};

use super::memory;
use super::resource::Resource;
use crate::protocol::{Edge, Phase, PhaseEdge};
use crate::record::{Event, RunRecord};
use crate::stats::{spread, Spread};

/// One sleep of a model and its wake.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SleepWake {
    pub cycle: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// How the weights travelled (`offload`, `offload-pinned`, `reload`, or
    /// what the program said).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    pub sleep_s: Option<f64>,
    pub wake_s: Option<f64>,
    /// Bytes copied off the device at sleep.
    pub copied_bytes: Option<u64>,
    /// Device → host copy rate of the sleep, GiB/s.
    pub sleep_gib_s: Option<f64>,
    /// Host → device copy rate of the wake, GiB/s.
    pub wake_gib_s: Option<f64>,
    /// The bus's pinned ceiling measured in the same run (device → host, host → device).
    pub ceiling_d2h_gib_s: Option<f64>,
    pub ceiling_h2d_gib_s: Option<f64>,
    /// The process's VRAM once the model's tensors were freed, before the
    /// allocator's cache was flushed: the worker's reading in the sleep's note
    /// where it flushes inside the sleep (candle), else the sleep's end.
    pub vram_asleep_before_flush_bytes: Option<u64>,
    /// The process's VRAM at the end of the time asleep (after any flush).
    pub vram_asleep_bytes: Option<u64>,
    /// Host RSS at the end of the time asleep (or of the sleep) less at the sleep's begin.
    pub host_grown_asleep_bytes: Option<i64>,
    /// Host RSS after the wake (its end, or the end of the settling step that
    /// follows it at once) less at the sleep's begin.
    pub host_held_after_wake_bytes: Option<i64>,
    /// The release gap of the sleep (`memory::settle_between`, from the
    /// sleep's end to the end of the time asleep), per resource: how long
    /// until VRAM (or host memory) stayed where it ended, and what came back
    /// after the sleep had returned.
    #[serde(default)]
    pub vram_settle_s: Option<f64>,
    #[serde(default)]
    pub vram_late_bytes: Option<u64>,
    #[serde(default)]
    pub host_settle_s: Option<f64>,
    #[serde(default)]
    pub host_late_bytes: Option<u64>,
}

impl SleepWake {
    pub fn sleep_ceiling_fraction(&self) -> Option<f64> {
        fraction(self.sleep_gib_s, self.ceiling_d2h_gib_s)
    }

    pub fn wake_ceiling_fraction(&self) -> Option<f64> {
        fraction(self.wake_gib_s, self.ceiling_h2d_gib_s)
    }
}

fn fraction(rate: Option<f64>, ceiling: Option<f64>) -> Option<f64> {
    match (rate, ceiling) {
        (Some(r), Some(c)) if c > 0.0 => Some(r / c),
        _ => None,
    }
}

/// One sleep and its wake as one resource saw them: what the gate judges.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct SleepMemory {
    /// The resource at the end of the time asleep less at the sleep's begin
    /// (VRAM: negative, what the sleep freed; host: the copy it holds).
    pub asleep_bytes: Option<i64>,
    /// The resource after the wake (see `host_held_after_wake_bytes`) less at
    /// the sleep's begin: what the sleep and wake left behind.
    pub wake_held_bytes: Option<i64>,
}

/// Each sleep/wake pair of `run` as `resource` saw it, in order: those of
/// the judged cycles (1 on; a warm-up's, cycle 0, are reported by
/// [`of_run`] and not judged).
pub fn memory_of(run: &RunRecord, resource: Resource) -> Vec<SleepMemory> {
    pairs(run)
        .into_iter()
        .filter(|p| p.begin.cycle >= 1)
        .map(|p| {
            let at = |e: &PhaseEdge| event_of(run, e).and_then(|ev| resource.at_event(ev));
            let delta = |e: Option<&PhaseEdge>| match (e.and_then(at), at(p.begin)) {
                (Some(a), Some(b)) => Some(a as i64 - b as i64),
                _ => None,
            };
            SleepMemory {
                asleep_bytes: delta(Some(p.asleep_end)),
                wake_held_bytes: delta(p.woken),
            }
        })
        .collect()
}

/// The edges of one sleep and its wake.
struct Pair<'a> {
    begin: &'a PhaseEdge,
    sleep_end: &'a PhaseEdge,
    /// The end of the time asleep (the sleep's end where nothing came between).
    asleep_end: &'a PhaseEdge,
    wake_end: Option<&'a PhaseEdge>,
    /// After the wake: the end of a settling step that follows the wake at
    /// once (a driver reads memory a while after the wake's answer), else
    /// the wake's end.
    woken: Option<&'a PhaseEdge>,
}

/// Every sleep in `run` with the edges that close it, in order.
fn pairs(run: &RunRecord) -> Vec<Pair<'_>> {
    let edges: Vec<&PhaseEdge> = run.events.iter().map(|e| &e.edge).collect();
    let mut out = Vec::new();
    for (i, begin) in edges.iter().enumerate() {
        if begin.phase != Phase::Sleep || begin.edge != Edge::Begin {
            continue;
        }
        let same = |e: &&PhaseEdge, phase: Phase, edge: Edge| {
            e.phase == phase && e.edge == edge && e.model == begin.model && e.cycle == begin.cycle
        };
        let rest = &edges[i + 1..];
        let Some(sleep_end) = rest
            .iter()
            .copied()
            .find(|e| same(e, Phase::Sleep, Edge::End))
        else {
            continue;
        };
        let wake_begin = rest.iter().position(|e| same(e, Phase::Wake, Edge::Begin));
        let wake_end = wake_begin.and_then(|w| {
            rest[w..]
                .iter()
                .copied()
                .find(|e| same(e, Phase::Wake, Edge::End))
        });
        let asleep_end = wake_begin
            .and_then(|w| {
                rest[..w]
                    .iter()
                    .copied()
                    .rev()
                    .find(|e| e.phase == Phase::Asleep && e.edge == Edge::End)
            })
            .unwrap_or(sleep_end);
        let woken = wake_end.map(|w| settled_after(&edges, w).unwrap_or(w));
        out.push(Pair {
            begin,
            sleep_end,
            asleep_end,
            wake_end,
            woken,
        });
    }
    out
}

/// The end of the settling step that begins right after `end` (the next
/// edge is its begin), if any.
fn settled_after<'a>(edges: &[&'a PhaseEdge], end: &PhaseEdge) -> Option<&'a PhaseEdge> {
    let at = edges.iter().position(|e| std::ptr::eq(*e, end))?;
    let next = edges.get(at + 1)?;
    if next.phase != Phase::Settle || next.edge != Edge::Begin || next.cycle != end.cycle {
        return None;
    }
    edges[at + 2..]
        .iter()
        .copied()
        .find(|e| e.phase == Phase::Settle && e.edge == Edge::End)
}

/// The event of `run` whose edge is `edge` (one of its own).
fn event_of<'a>(run: &'a RunRecord, edge: &PhaseEdge) -> Option<&'a Event> {
    run.events.iter().find(|e| std::ptr::eq(&e.edge, edge))
}

/// Every sleep/wake pair of a run, in order; empty when it slept no model.
pub fn of_run(run: &RunRecord, device: Option<Resource>, threshold: u64) -> Vec<SleepWake> {
    let (ceiling_d2h, ceiling_h2d) = run
        .events
        .iter()
        .map(|e| &e.edge)
        .filter(|e| e.phase == Phase::Warmup && e.edge == Edge::End)
        .filter_map(|e| e.note.as_deref())
        .map(|n| (field(n, "ceiling_d2h_gib_s"), field(n, "ceiling_h2d_gib_s")))
        .find(|(a, b)| a.is_some() || b.is_some())
        .unwrap_or_default();
    let host = |e: &PhaseEdge| event_of(run, e).and_then(|ev| Resource::Host.at_event(ev));
    let vram = |e: &PhaseEdge| event_of(run, e).and_then(|ev| device?.at_event(ev));
    let event = |edge: &PhaseEdge| event_of(run, edge);
    pairs(run)
        .into_iter()
        .map(|p| {
            let gap = |resource: Option<Resource>| {
                memory::settle_between(
                    run,
                    resource?,
                    event(p.sleep_end)?,
                    event(p.asleep_end)?,
                    threshold,
                )
            };
            let (vram_gap, host_gap) = (gap(device), gap(Some(Resource::Host)));
            let sleep_note = p.sleep_end.note.as_deref().unwrap_or("");
            let wake_note = p.wake_end.and_then(|e| e.note.as_deref()).unwrap_or("");
            let grown = |e: &PhaseEdge| match (host(e), host(p.begin)) {
                (Some(a), Some(b)) => Some(a as i64 - b as i64),
                _ => None,
            };
            SleepWake {
                cycle: p.begin.cycle,
                model: p.begin.model.clone(),
                mode: word(sleep_note, "mode"),
                sleep_s: p.sleep_end.elapsed_s,
                wake_s: p.wake_end.and_then(|e| e.elapsed_s),
                copied_bytes: field(sleep_note, "copied_bytes").map(|b| b as u64),
                sleep_gib_s: field(sleep_note, "gib_per_s"),
                wake_gib_s: field(wake_note, "gib_per_s"),
                ceiling_d2h_gib_s: ceiling_d2h,
                ceiling_h2d_gib_s: ceiling_h2d,
                vram_asleep_before_flush_bytes: field(sleep_note, "vram_before_flush_bytes")
                    .map(|b| b as u64)
                    .or_else(|| vram(p.sleep_end)),
                vram_asleep_bytes: vram(p.asleep_end),
                host_grown_asleep_bytes: grown(p.asleep_end),
                host_held_after_wake_bytes: p.woken.and_then(grown),
                vram_settle_s: vram_gap.map(|g| g.settle_s),
                vram_late_bytes: vram_gap.map(|g| g.late_bytes),
                host_settle_s: host_gap.map(|g| g.settle_s),
                host_late_bytes: host_gap.map(|g| g.late_bytes),
            }
        })
        .collect()
}

/// The number after `key=` in a note (`key=12.5`), if any.
fn field(note: &str, key: &str) -> Option<f64> {
    word(note, key).and_then(|v| v.parse().ok())
}

fn word(note: &str, key: &str) -> Option<String> {
    note.split(|c: char| c.is_whitespace() || c == ',' || c == ';')
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_read_from_notes_and_nothing_is_made_up() {
        let note = "mode=offload copied_bytes=1048576 copy_s=0.010000 gib_per_s=0.10 vram_before_flush_bytes=42; synchronized";
        assert_eq!(field(note, "copied_bytes"), Some(1048576.0));
        assert_eq!(field(note, "gib_per_s"), Some(0.10));
        assert_eq!(field(note, "vram_before_flush_bytes"), Some(42.0));
        assert_eq!(word(note, "mode").as_deref(), Some("offload"));
        assert_eq!(field(note, "ceiling_d2h_gib_s"), None);
        assert_eq!(field("copied_bytes=abc", "copied_bytes"), None);
        assert_eq!(fraction(Some(10.0), Some(40.0)), Some(0.25));
        assert_eq!(fraction(Some(10.0), None), None);
    }
}

/// A strategy's sleeps and wakes over all its runs and cycles: each metric's
/// median and range (`None` where no run reported it).
#[derive(Debug, Clone, PartialEq)]
pub struct StrategySleeps {
    pub strategy: String,
    /// How many sleep/wake pairs the spreads are over.
    pub pairs: usize,
    pub sleep_s: Option<Spread>,
    pub wake_s: Option<Spread>,
    pub sleep_gib_s: Option<Spread>,
    pub wake_gib_s: Option<Spread>,
    pub sleep_ceiling_fraction: Option<Spread>,
    pub wake_ceiling_fraction: Option<Spread>,
    pub vram_asleep_before_flush_bytes: Option<Spread>,
    pub vram_asleep_bytes: Option<Spread>,
    pub host_grown_asleep_bytes: Option<Spread>,
    pub host_held_after_wake_bytes: Option<Spread>,
    pub vram_settle_s: Option<Spread>,
    pub vram_late_bytes: Option<Spread>,
}

/// Every strategy that slept a model, in the summary's strategy order.
pub fn by_strategy(summary: &super::Summary) -> Vec<StrategySleeps> {
    summary
        .strategies
        .iter()
        .filter_map(|s| {
            let pairs: Vec<&SleepWake> = summary
                .runs
                .iter()
                .filter(|r| r.strategy == s.strategy)
                .flat_map(|r| &r.sleeps)
                .collect();
            if pairs.is_empty() {
                return None;
            }
            let over = |f: &dyn Fn(&SleepWake) -> Option<f64>| {
                spread(pairs.iter().filter_map(|p| f(p)).collect())
            };
            Some(StrategySleeps {
                strategy: s.strategy.clone(),
                pairs: pairs.len(),
                sleep_s: over(&|p| p.sleep_s),
                wake_s: over(&|p| p.wake_s),
                sleep_gib_s: over(&|p| p.sleep_gib_s),
                wake_gib_s: over(&|p| p.wake_gib_s),
                sleep_ceiling_fraction: over(&|p| p.sleep_ceiling_fraction()),
                wake_ceiling_fraction: over(&|p| p.wake_ceiling_fraction()),
                vram_asleep_before_flush_bytes: over(&|p| {
                    p.vram_asleep_before_flush_bytes.map(|b| b as f64)
                }),
                vram_asleep_bytes: over(&|p| p.vram_asleep_bytes.map(|b| b as f64)),
                host_grown_asleep_bytes: over(&|p| p.host_grown_asleep_bytes.map(|b| b as f64)),
                host_held_after_wake_bytes: over(&|p| {
                    p.host_held_after_wake_bytes.map(|b| b as f64)
                }),
                vram_settle_s: over(&|p| p.vram_settle_s),
                vram_late_bytes: over(&|p| p.vram_late_bytes.map(|b| b as f64)),
            })
        })
        .collect()
}
