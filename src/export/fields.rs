//! The memory columns of one resource: which metric of `metrics::catalogue`
//! each is (its CSV stem, console and Markdown headers and unit come from
//! there, named once for the whole program: the tables name their columns
//! by `MemoryMetric`, the one metric enum), which resources have it, and
//! how its value is read from a [`ResourceSummary`]. `table` and
//! `compare_files` both read [`fields`], so a column added here appears in
//! both, in one order. The few CSV-only columns that are not a catalogue
//! metric (`not_measured`, `retained_anon_bytes`, `cycles_total`) are named here.
//!
//! Names and picks values; formats nothing (cells are `table::cells`, CSV
//! numbers `compare_files`).

use crate::metrics::catalogue::{MemoryMetric, CATALOGUE};
use crate::metrics::{Resource, ResourceFacts, ResourceSummary, Spread};

/// A number of the representative run's last cycle.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Number {
    Bytes(i64),
    Fraction(f64),
}

impl Number {
    /// As compare.csv writes it (bytes whole, fractions as Rust prints an f64).
    pub(super) fn csv(self) -> String {
        match self {
            Number::Bytes(b) => b.to_string(),
            Number::Fraction(f) => f.to_string(),
        }
    }
}

/// How a field's value is read from a resource's summary.
#[derive(Clone, Copy)]
pub(super) enum Pick {
    /// A value of the representative run's last cycle.
    Last(fn(&ResourceSummary) -> Option<Number>),
    /// Median and range: in compare.csv `<stem>_median`, `_min`, `_max`.
    Spread(fn(&ResourceSummary) -> Option<&Spread>),
    /// A count.
    Count(fn(&ResourceSummary) -> u32),
    /// A text.
    Text(fn(&ResourceSummary) -> Option<String>),
}

/// Which resources have a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Only {
    Every,
    Devices,
    Host,
}

/// The tables' names of a field: console header, Markdown header (without
/// the resource), unit (Markdown headers end with it; the console caption
/// says it) and what a value is multiplied by to be read in that unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Names {
    pub console: &'static str,
    pub markdown: &'static str,
    pub unit: &'static str,
    pub scale: f64,
}

/// One memory column of a resource.
#[derive(Clone, Copy)]
pub(super) struct Field {
    /// The catalogue's metric; `None` for a compare.csv-only column that
    /// is not one (`not_measured`, retained over the runs, its anonymous
    /// part, `cycles_total`).
    pub metric: Option<MemoryMetric>,
    /// The compare.csv column (after the resource prefix) or its stem.
    pub csv: &'static str,
    /// `None`: compare.csv only.
    pub names: Option<Names>,
    pub pick: Pick,
    only: Only,
}

/// A table column of catalogue metric `of`: its CSV stem and names from
/// the catalogue.
const fn listed(of: MemoryMetric, pick: Pick, only: Only) -> Field {
    Field {
        metric: Some(of),
        csv: CATALOGUE[of as usize].name,
        names: Some(names_of(of)),
        pick,
        only,
    }
}

/// The tables' names of catalogue metric `of`.
pub(super) const fn names_of(of: MemoryMetric) -> Names {
    let info = &CATALOGUE[of as usize];
    Names {
        console: info.header,
        markdown: info.markdown_header,
        unit: info.unit.header_suffix(),
        scale: info.unit.scale(),
    }
}

fn bytes(b: u64) -> Number {
    Number::Bytes(b as i64)
}

/// Every field, in compare.csv's order; the tables keep the ones with names
/// in the same order.
const FIELDS: [Field; 20] = [
    Field {
        metric: None,
        csv: "not_measured",
        names: None,
        pick: Pick::Text(|m| m.not_measured.clone()),
        only: Only::Every,
    },
    listed(
        MemoryMetric::Baseline,
        Pick::Last(|m| m.row.as_ref().map(|r| bytes(r.baseline_bytes))),
        Only::Every,
    ),
    listed(
        MemoryMetric::Floor,
        Pick::Spread(|m| m.floor_bytes.as_ref()),
        Only::Devices,
    ),
    listed(
        MemoryMetric::Peak,
        Pick::Last(|m| m.row.as_ref().and_then(|r| r.peak_bytes).map(bytes)),
        Only::Every,
    ),
    listed(
        MemoryMetric::Loaded,
        Pick::Last(|m| m.row.as_ref().map(|r| bytes(r.loaded_bytes))),
        Only::Every,
    ),
    listed(
        MemoryMetric::AfterUnload,
        Pick::Last(|m| m.row.as_ref().map(|r| bytes(r.after_unload_bytes))),
        Only::Every,
    ),
    listed(
        MemoryMetric::AfterRelease,
        Pick::Last(|m| m.row.as_ref().map(|r| bytes(r.after_release_bytes))),
        Only::Every,
    ),
    listed(
        MemoryMetric::Retained,
        Pick::Last(|m| m.row.as_ref().map(|r| Number::Bytes(r.retained_bytes))),
        Only::Every,
    ),
    listed(
        MemoryMetric::ReleasedFraction,
        Pick::Last(|m| {
            m.row
                .as_ref()
                .and_then(|r| r.released_fraction)
                .map(Number::Fraction)
        }),
        Only::Every,
    ),
    Field {
        metric: None,
        csv: CATALOGUE[MemoryMetric::Retained as usize].name,
        names: None,
        pick: Pick::Spread(|m| m.retained_bytes.as_ref()),
        only: Only::Every,
    },
    Field {
        metric: None,
        csv: "retained_anon_bytes",
        names: None,
        pick: Pick::Spread(|m| m.retained_anon_bytes.as_ref()),
        only: Only::Host,
    },
    listed(
        MemoryMetric::Growth,
        Pick::Spread(|m| m.retained_slope_bytes_per_cycle.as_ref()),
        Only::Every,
    ),
    listed(
        MemoryMetric::ReleaseLatency,
        Pick::Spread(|m| m.release_latency_s.as_ref()),
        Only::Every,
    ),
    listed(
        MemoryMetric::ReleaseT50,
        Pick::Spread(|m| m.release_t50_s.as_ref()),
        Only::Every,
    ),
    listed(
        MemoryMetric::ReleaseT90,
        Pick::Spread(|m| m.release_t90_s.as_ref()),
        Only::Every,
    ),
    listed(
        MemoryMetric::Settle,
        Pick::Spread(|m| m.settle_s.as_ref()),
        Only::Every,
    ),
    listed(
        MemoryMetric::LateBytes,
        Pick::Spread(|m| m.late_bytes.as_ref()),
        Only::Every,
    ),
    listed(
        MemoryMetric::RetainingCycles,
        Pick::Count(|m| m.cycles_retaining),
        Only::Every,
    ),
    Field {
        metric: None,
        csv: "cycles_total",
        names: None,
        pick: Pick::Count(|m| m.cycles_total),
        only: Only::Every,
    },
    listed(
        MemoryMetric::RetainingProcesses,
        Pick::Count(|m| m.processes_retaining),
        Only::Every,
    ),
];

/// The fields `resource` has, in compare.csv's order.
pub(super) fn fields(resource: Resource) -> impl Iterator<Item = &'static Field> {
    FIELDS.iter().filter(move |f| match f.only {
        Only::Every => true,
        Only::Devices => resource.is_device(),
        Only::Host => resource.look().primary,
    })
}

/// The field of `metric` (`None`: no table or compare.csv column shows it).
pub(super) fn field(metric: MemoryMetric) -> Option<&'static Field> {
    FIELDS.iter().find(|f| f.metric == Some(metric))
}

/// The metrics the tables show for `resource`, in table order.
pub(super) fn table_metrics(resource: Resource) -> Vec<MemoryMetric> {
    fields(resource)
        .filter(|f| f.names.is_some())
        .filter_map(|f| f.metric)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_has_one_field_and_names_are_unique() {
        for (i, f) in FIELDS.iter().enumerate() {
            if let Some(m) = f.metric {
                assert_eq!(field(m).unwrap().metric, Some(m));
                assert!(FIELDS[i + 1..].iter().all(|g| g.metric != Some(m)));
            }
            // Only the catalogue's metrics have table names.
            assert_eq!(f.names.is_some(), f.metric.is_some(), "{}", f.csv);
            if let Some(n) = f.names {
                assert!(
                    FIELDS[i + 1..]
                        .iter()
                        .filter_map(|g| g.names)
                        .all(|m| m.console != n.console && m.markdown != n.markdown),
                    "{n:?}"
                );
            }
        }
    }

    #[test]
    fn the_tables_show_fifteen_host_and_sixteen_device_metrics() {
        assert_eq!(table_metrics(Resource::Host).len(), 15);
        assert_eq!(table_metrics(Resource::Device(0)).len(), 16);
    }
}
