//! Each memory metric named once: its snake_case stem (JSON, CSV), the name
//! people read, its unit and formatter, its table headers and, where a
//! scenario can budget it, the `[thresholds]` key per kind of resource.
//!
//! Tables, CSV, the gate, verdict.md and the scenario parser read this
//! list, so a metric renamed here is renamed everywhere. It describes
//! metrics; it computes none (that is `metrics::memory`).

use super::Resource;
use crate::metrics::ResourceFacts;
use crate::textutil::MIB;

/// The unit a metric's values are in, and how people read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Bytes, shown as MiB.
    Bytes,
    /// Bytes per cycle, shown as MiB/cycle.
    BytesPerCycle,
    /// Seconds, shown as ms.
    Seconds,
    /// A share in 0..=1, shown as %.
    Fraction,
    /// A count, shown as is.
    Count,
}

impl Unit {
    /// The unit people read (`MiB`, `MiB/cycle`, `ms`, `%`; empty for a count).
    pub const fn suffix(self) -> &'static str {
        match self {
            Unit::Bytes => "MiB",
            Unit::BytesPerCycle => "MiB/cycle",
            Unit::Seconds => "ms",
            Unit::Fraction => "%",
            Unit::Count => "",
        }
    }

    /// The unit a table's header names: as [`Unit::suffix`], but empty for a
    /// share (its cells carry their own `%`).
    pub const fn header_suffix(self) -> &'static str {
        match self {
            Unit::Fraction => "",
            _ => self.suffix(),
        }
    }

    /// What a value in this unit is multiplied by to read in people's unit
    /// (bytes → MiB, seconds → ms).
    pub const fn scale(self) -> f64 {
        match self {
            Unit::Bytes | Unit::BytesPerCycle => 1.0 / MIB,
            Unit::Seconds => 1e3,
            Unit::Fraction | Unit::Count => 1.0,
        }
    }

    /// A value in people's unit, without the unit (`416.0`, `12.5`, `100`).
    pub fn number(self, v: f64) -> String {
        match self {
            Unit::Bytes | Unit::BytesPerCycle => crate::textutil::mib(v),
            Unit::Seconds => format!("{:.1}", v * 1e3),
            Unit::Fraction => format!("{:.0}", v * 100.0),
            Unit::Count => format!("{v}"),
        }
    }

    /// A value with its unit: `416.0 MiB`, `1.2 MiB/cycle`, `12.5 ms`, `50 %`.
    pub fn format(self, v: f64) -> String {
        match self {
            Unit::Count => self.number(v),
            _ => format!("{} {}", self.number(v), self.suffix()),
        }
    }

    /// A value given in the `[thresholds]` unit (MiB, MiB/cycle) in bytes.
    pub fn bytes_of_mib(mib: f64) -> u64 {
        (mib * MIB).round().max(0.0) as u64
    }

    /// A value in people's unit (a `[thresholds]` amount: MiB, MiB/cycle,
    /// ms, %) in this unit's own (bytes, seconds, a share).
    pub fn of_people(self, v: f64) -> f64 {
        v / self.scale()
    }
}

/// Every memory metric of one resource that memrel reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MemoryMetric {
    Baseline,
    Floor,
    Peak,
    Loaded,
    AfterUnload,
    AfterRelease,
    Retained,
    ReleasedFraction,
    /// The slope of retained over cycles.
    Growth,
    ReleaseLatency,
    ReleaseT50,
    ReleaseT90,
    /// The release gap: from a release edge's end until memory stays put.
    Settle,
    /// What came back after a release edge's end.
    LateBytes,
    RetainingCycles,
    RetainingProcesses,
    /// Retaining cycles out of all cycles.
    RetentionRate,
    /// The last sample of a run measured as one phase (no cycle marked).
    EndOfRun,
    /// End of run − baseline of such a run: what it still held at its end.
    Held,
    /// A sleep's memory: the resource at the end of the time asleep less at
    /// the sleep's begin (VRAM: negative, what the sleep freed; host: the copy).
    Asleep,
    /// What a sleep and its wake left behind: the resource at the wake's end
    /// less at the sleep's begin.
    WakeHeld,
}

/// Files name a metric by its catalogue name (`retained_bytes`): verdict.json,
/// coverage.
impl serde::Serialize for MemoryMetric {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for MemoryMetric {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        CATALOGUE
            .iter()
            .find(|i| i.name == name)
            .map(|i| i.metric)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown metric {name:?}")))
    }
}

/// The `[thresholds]` keys that budget one metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetKeys {
    /// For host memory (RSS).
    pub host: &'static str,
    /// For device memory (VRAM).
    pub device: &'static str,
    /// For the model files' page cache, where it has a meaning.
    pub page_cache: Option<&'static str>,
}

/// What people and files call one metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricInfo {
    pub metric: MemoryMetric,
    /// The snake_case stem of JSON fields and CSV columns (`retained_bytes`).
    pub name: &'static str,
    /// What people call it (`retained`, `growth per cycle`).
    pub human: &'static str,
    pub unit: Unit,
    /// The console table's header (short).
    pub header: &'static str,
    /// The Markdown table's header (without the resource).
    pub markdown_header: &'static str,
    /// The scenario keys that budget it, if a scenario can.
    pub budget: Option<BudgetKeys>,
}

const fn info(
    metric: MemoryMetric,
    name: &'static str,
    human: &'static str,
    unit: Unit,
    (header, markdown_header): (&'static str, &'static str),
    budget: Option<BudgetKeys>,
) -> MetricInfo {
    MetricInfo {
        metric,
        name,
        human,
        unit,
        header,
        markdown_header,
        budget,
    }
}

/// The catalogue, in table order.
pub const CATALOGUE: [MetricInfo; 21] = {
    use MemoryMetric as M;
    [
        info(
            M::Baseline,
            "baseline_bytes",
            "baseline",
            Unit::Bytes,
            ("baseline", "baseline"),
            None,
        ),
        info(
            M::Floor,
            "floor_bytes",
            "floor",
            Unit::Bytes,
            ("floor", "floor"),
            None,
        ),
        info(
            M::Peak,
            "peak_bytes",
            "peak",
            Unit::Bytes,
            ("peak", "peak"),
            Some(BudgetKeys {
                host: "max_peak_mib",
                device: "max_peak_vram_mib",
                page_cache: Some("max_peak_page_cache_mib"),
            }),
        ),
        info(
            M::Loaded,
            "loaded_bytes",
            "loaded",
            Unit::Bytes,
            ("loaded", "loaded"),
            None,
        ),
        info(
            M::AfterUnload,
            "after_unload_bytes",
            "after unload",
            Unit::Bytes,
            ("after unload", "after unload"),
            None,
        ),
        info(
            M::AfterRelease,
            "after_release_bytes",
            "after release",
            Unit::Bytes,
            ("after release", "after release"),
            None,
        ),
        info(
            M::Retained,
            "retained_bytes",
            "retained",
            Unit::Bytes,
            ("retained", "retained"),
            Some(BudgetKeys {
                host: "max_retained_mib",
                device: "max_retained_vram_mib",
                page_cache: Some("max_retained_page_cache_mib"),
            }),
        ),
        info(
            M::ReleasedFraction,
            "released_fraction",
            "released",
            Unit::Fraction,
            ("released", "released"),
            None,
        ),
        info(
            M::Growth,
            "retained_slope_bytes_per_cycle",
            "growth per cycle",
            Unit::BytesPerCycle,
            ("growth/cycle", "growth"),
            Some(BudgetKeys {
                host: "max_retained_slope_mib_per_cycle",
                device: "max_retained_vram_slope_mib_per_cycle",
                page_cache: Some("max_retained_page_cache_slope_mib_per_cycle"),
            }),
        ),
        info(
            M::ReleaseLatency,
            "release_latency_s",
            "release latency",
            Unit::Seconds,
            ("latency ms", "release latency"),
            None,
        ),
        info(
            M::ReleaseT50,
            "release_t50_s",
            "release t50",
            Unit::Seconds,
            ("t50 ms", "release t50"),
            None,
        ),
        info(
            M::ReleaseT90,
            "release_t90_s",
            "release t90",
            Unit::Seconds,
            ("t90 ms", "release t90"),
            None,
        ),
        info(
            M::Settle,
            "settle_s",
            "settle time",
            Unit::Seconds,
            ("settle ms", "settle"),
            Some(BudgetKeys {
                host: "max_settle_ms",
                device: "max_settle_vram_ms",
                page_cache: Some("max_settle_page_cache_ms"),
            }),
        ),
        info(
            M::LateBytes,
            "late_bytes",
            "late bytes",
            Unit::Bytes,
            ("late", "late"),
            Some(BudgetKeys {
                host: "max_late_mib",
                device: "max_late_vram_mib",
                page_cache: Some("max_late_page_cache_mib"),
            }),
        ),
        info(
            M::RetainingCycles,
            "cycles_retaining",
            "retaining cycles",
            Unit::Count,
            ("retaining", "retaining cycles"),
            None,
        ),
        info(
            M::RetainingProcesses,
            "processes_retaining",
            "retaining processes",
            Unit::Count,
            ("processes", "retaining processes"),
            None,
        ),
        info(
            M::RetentionRate,
            "retention_rate",
            "retention rate",
            Unit::Fraction,
            ("retention", "retention rate"),
            None,
        ),
        info(
            M::EndOfRun,
            "end_bytes",
            "end of run",
            Unit::Bytes,
            ("end of run", "end of run"),
            None,
        ),
        info(
            M::Held,
            "held_bytes",
            "held",
            Unit::Bytes,
            ("held", "held"),
            None,
        ),
        info(
            M::Asleep,
            "asleep_bytes",
            "asleep",
            Unit::Bytes,
            ("asleep", "asleep"),
            Some(BudgetKeys {
                host: "max_asleep_mib",
                device: "max_asleep_vram_mib",
                page_cache: None,
            }),
        ),
        info(
            M::WakeHeld,
            "wake_held_bytes",
            "held after wake",
            Unit::Bytes,
            ("held after wake", "held after wake"),
            Some(BudgetKeys {
                host: "max_wake_held_mib",
                device: "max_wake_held_vram_mib",
                page_cache: None,
            }),
        ),
    ]
};

impl MemoryMetric {
    /// Its entry in [`CATALOGUE`].
    pub fn info(self) -> &'static MetricInfo {
        // The catalogue lists every metric once, in declaration order (tested).
        &CATALOGUE[self as usize]
    }

    pub fn name(self) -> &'static str {
        self.info().name
    }

    pub fn human(self) -> &'static str {
        self.info().human
    }

    pub fn unit(self) -> Unit {
        self.info().unit
    }

    /// The `[thresholds]` key that budgets this metric of `resource`.
    /// The container has none: the gate does not judge it (`Resource::is_gated`).
    /// A catalogued resource's keys are the host's with its key after the
    /// metric's word (`max_retained_shm_mib`), where the page cache has one
    /// (the metrics of a machine-wide resource: no sleep metrics).
    pub fn budget_key(self, resource: Resource) -> Option<String> {
        if !resource.is_gated() {
            return None;
        }
        let keys = self.info().budget?;
        let infix = resource.budget_infix()?;
        if infix.is_empty() {
            return Some(keys.host.to_string());
        }
        // A device's keys cover every budgeted metric; any other resource's
        // only those the page cache has (no sleep metrics).
        if !resource.is_device() {
            keys.page_cache?;
        }
        // Spelled as the catalogue's `device` and `page_cache` keys (tested).
        Some(with_infix(keys.host, &infix))
    }
}

/// A host budget key with a resource's word after the metric's:
/// `max_retained_slope_mib_per_cycle` with `shm` is
/// `max_retained_shm_slope_mib_per_cycle` (as the VRAM and page-cache keys
/// are spelled: tested).
fn with_infix(host_key: &str, infix: &str) -> String {
    let at = ["_slope", "_mib", "_ms"]
        .iter()
        .filter_map(|tail| host_key.find(tail))
        .min()
        .unwrap_or(host_key.len());
    format!("{}_{infix}{}", &host_key[..at], &host_key[at..])
}

/// Every `[thresholds]` budget key: (metric, the resource it budgets, key),
/// host first, then the device's (`Device(0)` stands for any device), then
/// the page cache's, then each catalogued resource's.
pub fn budget_keys() -> impl Iterator<Item = (MemoryMetric, Resource, String)> {
    [Resource::Host, Resource::Device(0), Resource::PageCache]
        .into_iter()
        .chain(Resource::probed())
        .flat_map(|resource| {
            CATALOGUE.iter().filter_map(move |i| {
                let key = i.metric.budget_key(resource)?;
                Some((i.metric, resource, key))
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_is_listed_once_at_its_own_index() {
        for (i, info) in CATALOGUE.iter().enumerate() {
            assert_eq!(info.metric as usize, i, "{info:?}");
        }
        let mut names: Vec<&str> = CATALOGUE.iter().map(|i| i.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CATALOGUE.len());
    }

    #[test]
    fn units_format_as_people_read_them() {
        assert_eq!(Unit::Bytes.format(416.0 * MIB), "416.0 MiB");
        assert_eq!(Unit::BytesPerCycle.format(MIB / 2.0), "0.5 MiB/cycle");
        assert_eq!(Unit::Seconds.format(0.0125), "12.5 ms");
        assert_eq!(Unit::Fraction.format(0.5), "50 %");
        assert_eq!(Unit::Count.format(3.0), "3");
        assert_eq!(Unit::bytes_of_mib(1.5), 3 << 19);
        assert_eq!(Unit::Seconds.of_people(250.0), 0.25);
        assert_eq!(Unit::Bytes.of_people(2.0), 2.0 * MIB);
    }

    #[test]
    fn the_vram_and_page_cache_keys_follow_the_catalogued_resources_rule() {
        for info in CATALOGUE.iter() {
            let Some(keys) = info.budget else { continue };
            assert_eq!(with_infix(keys.host, "vram"), keys.device);
            if let Some(page_cache) = keys.page_cache {
                assert_eq!(with_infix(keys.host, "page_cache"), page_cache);
            }
        }
    }

    #[test]
    fn budget_keys_are_host_first_and_each_spelled_once() {
        let keys: Vec<String> = budget_keys()
            .filter(|(_, r, _)| r.def().is_none())
            .map(|(_, _, k)| k)
            .collect();
        assert_eq!(
            keys,
            [
                "max_peak_mib",
                "max_retained_mib",
                "max_retained_slope_mib_per_cycle",
                "max_settle_ms",
                "max_late_mib",
                "max_asleep_mib",
                "max_wake_held_mib",
                "max_peak_vram_mib",
                "max_retained_vram_mib",
                "max_retained_vram_slope_mib_per_cycle",
                "max_settle_vram_ms",
                "max_late_vram_mib",
                "max_asleep_vram_mib",
                "max_wake_held_vram_mib",
                "max_peak_page_cache_mib",
                "max_retained_page_cache_mib",
                "max_retained_page_cache_slope_mib_per_cycle",
                "max_settle_page_cache_ms",
                "max_late_page_cache_mib",
            ]
        );
        assert_eq!(MemoryMetric::Asleep.budget_key(Resource::PageCache), None);
        // A catalogued resource's: the page cache's metrics, its key as the infix.
        for r in Resource::probed() {
            let infix = r.key();
            let of = |m: MemoryMetric| m.budget_key(r);
            assert_eq!(
                of(MemoryMetric::Retained),
                Some(format!("max_retained_{infix}_mib"))
            );
            assert_eq!(of(MemoryMetric::Asleep), None);
        }
        let mut all: Vec<String> = budget_keys().map(|(_, _, k)| k).collect();
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n, "a budget key spelled twice");
        assert_eq!(
            MemoryMetric::Retained
                .budget_key(Resource::Device(1))
                .as_deref(),
            Some("max_retained_vram_mib")
        );
        assert_eq!(
            MemoryMetric::ReleaseLatency.budget_key(Resource::Host),
            None
        );
    }
}
