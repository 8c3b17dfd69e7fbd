//! The OpenMetrics text exposition of what memrel measures (issue 50, item
//! 3): the groundwork of `memrel watch --metrics LISTEN`, so that an
//! operator's Prometheus scrapes what each unload or sleep gave back.
//!
//! [`MetricsState`] is a plain value the watch fills as it measures; here it
//! is filled from what memrel already has, a [`Record`] and its [`Summary`]
//! ([`MetricsState::of_record`]), plus memrel's own cost ([`OwnCost::read`]).
//! [`render`] formats it and computes nothing. Values that are not known are
//! left out: a series is never 0 for "not read". The series and their label
//! bounds are listed in docs/metrics.md ("OpenMetrics").

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::metrics::Summary;
use crate::protocol::{Edge, Phase};
use crate::record::{Event, Part, Record, Sample};

/// The content type of [`render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// One current reading: the last sample's bytes of one resource and part.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryReading {
    /// `host`, `cuda:N`, `container`, `page_cache`, a catalogued key.
    pub resource: String,
    /// The part's word (`anon`, `file`, `usage`, `own`, …); `None` for the whole.
    pub part: Option<String>,
    /// The measured (root) process; `None` where the record has none.
    pub pid: Option<u32>,
    pub bytes: u64,
}

/// One model's and resource's last closed cycle (from `metrics::memory`).
#[derive(Debug, Clone, PartialEq)]
pub struct CycleValues {
    /// The model its events named; `None` where they named none.
    pub model: Option<String>,
    pub resource: String,
    pub cycle: u32,
    pub retained_bytes: i64,
    pub released_fraction: Option<f64>,
    pub settle_s: Option<f64>,
    pub late_bytes: Option<u64>,
}

/// What memrel itself costs; each `None` where it could not be read.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OwnCost {
    /// User + system CPU time of memrel's process.
    pub cpu_s: Option<f64>,
    /// memrel's resident set.
    pub resident_bytes: Option<u64>,
}

impl OwnCost {
    /// memrel's own cost from /proc/self/stat (utime + stime) and
    /// /proc/self/status (VmRSS).
    pub fn read() -> OwnCost {
        let stat = std::fs::read_to_string("/proc/self/stat").ok();
        let status = std::fs::read_to_string("/proc/self/status").ok();
        let ticks = rustix::param::clock_ticks_per_second();
        OwnCost {
            cpu_s: stat.as_deref().and_then(|s| cpu_s_of_stat(s, ticks)),
            resident_bytes: status.as_deref().and_then(rss_bytes_of_status),
        }
    }
}

/// utime + stime of a /proc/PID/stat line, in seconds (`ticks` a second).
fn cpu_s_of_stat(stat: &str, ticks: u64) -> Option<f64> {
    // The command name (field 2) may hold spaces: fields count from its ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    (ticks > 0).then(|| (utime + stime) as f64 / ticks as f64)
}

/// VmRSS of a /proc/PID/status text, in bytes.
fn rss_bytes_of_status(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(kib * 1024)
}

/// Everything one scrape shows. The watch fills it as it measures;
/// [`MetricsState::of_record`] fills it from a results directory's record.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricsState {
    /// The last sample's readings, in the record's (resource, part) order.
    pub memory: Vec<MemoryReading>,
    /// Per model and resource, the last closed cycle.
    pub cycles: Vec<CycleValues>,
    pub cycles_total: u64,
    pub sleeps_total: u64,
    pub wakes_total: u64,
    /// Per model that slept or woke: whether it is asleep now.
    pub asleep: Vec<(Option<String>, bool)>,
    /// Samples memrel took.
    pub samples_total: u64,
    pub own: OwnCost,
}

impl MetricsState {
    /// The state of `record`'s last run (a watch measures one; a directory
    /// of several runs shows its last), with its `summary` and memrel's cost `own`.
    pub fn of_record(record: &Record, summary: &Summary, own: OwnCost) -> MetricsState {
        let mut state = MetricsState {
            own,
            ..MetricsState::default()
        };
        let Some(run) = record.runs.last() else {
            return state;
        };
        let pid = (run.meta.pid != 0).then_some(run.meta.pid);
        if let Some(last) = run.samples.last() {
            state.memory = memory_of_sample(last, pid);
        }
        state.asleep = asleep_by_model(&run.events);
        let Some(summed) = summary.runs.iter().find(|r| r.run == run.meta.run) else {
            return state;
        };
        state.samples_total = summed.samples as u64;
        state.cycles_total = summed.cycles.len() as u64;
        state.sleeps_total = summed.sleeps.iter().filter(|s| s.sleep_s.is_some()).count() as u64;
        state.wakes_total = summed.sleeps.iter().filter(|s| s.wake_s.is_some()).count() as u64;
        let mut last: BTreeMap<(Option<String>, String), CycleValues> = BTreeMap::new();
        for resource in &summed.resources {
            for c in &resource.cycles {
                let model = model_of_cycle(&run.events, c.cycle);
                let values = CycleValues {
                    model: model.clone(),
                    resource: resource.resource.key(),
                    cycle: c.cycle,
                    retained_bytes: c.retained_bytes,
                    released_fraction: c.released_fraction,
                    settle_s: c.settle_s,
                    late_bytes: c.late_bytes,
                };
                last.insert((model, resource.resource.key()), values);
            }
        }
        state.cycles = last.into_values().collect();
        state
    }
}

/// Every reading of `sample`, in the record's (resource, part) order, of
/// the measured process `pid`.
pub fn memory_of_sample(sample: &Sample, pid: Option<u32>) -> Vec<MemoryReading> {
    sample
        .readings
        .keys()
        .filter_map(|(resource, part)| {
            Some(MemoryReading {
                resource: resource.key(),
                part: (part != Part::Whole).then(|| part.word().to_string()),
                pid,
                bytes: sample.readings.part(resource, part)?,
            })
        })
        .collect()
}

/// The model the events of `cycle` name (the first that names one).
fn model_of_cycle(events: &[Event], cycle: u32) -> Option<String> {
    events
        .iter()
        .filter(|e| e.edge.cycle == cycle)
        .find_map(|e| e.edge.model.clone())
}

/// Per model that slept or woke, whether it is asleep after the last event:
/// asleep from a sleep's end until a wake's end.
fn asleep_by_model(events: &[Event]) -> Vec<(Option<String>, bool)> {
    let mut asleep: BTreeMap<Option<String>, bool> = BTreeMap::new();
    for e in events.iter().filter(|e| e.edge.edge == Edge::End) {
        match e.edge.phase {
            Phase::Sleep => asleep.insert(e.edge.model.clone(), true),
            Phase::Wake => asleep.insert(e.edge.model.clone(), false),
            _ => None,
        };
    }
    asleep.into_iter().collect()
}

/// A metric family being written: its header once, then its samples.
struct Family<'a> {
    out: &'a mut String,
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    unit: Option<&'static str>,
    started: bool,
}

impl Family<'_> {
    /// One sample `name{labels} value`; the header goes before the first.
    fn sample(&mut self, suffix: &str, labels: &[(&str, Option<&str>)], value: &dyn Number) {
        if !self.started {
            self.started = true;
            let (name, kind, help) = (self.name, self.kind, self.help);
            let _ = writeln!(self.out, "# TYPE {name} {kind}");
            if let Some(unit) = self.unit {
                let _ = writeln!(self.out, "# UNIT {name} {unit}");
            }
            let _ = writeln!(self.out, "# HELP {name} {help}");
        }
        self.out.push_str(self.name);
        self.out.push_str(suffix);
        let mut first = true;
        for (label, value) in labels {
            let Some(value) = value else { continue };
            self.out.push(if first { '{' } else { ',' });
            first = false;
            self.out.push_str(label);
            self.out.push_str("=\"");
            escape_into(self.out, value);
            self.out.push('"');
        }
        if !first {
            self.out.push('}');
        }
        self.out.push(' ');
        value.write_to(self.out);
        self.out.push('\n');
    }
}

/// A sample's value as OpenMetrics writes it.
trait Number {
    fn write_to(&self, out: &mut String);
}

impl Number for u64 {
    fn write_to(&self, out: &mut String) {
        // By hand: `write!` costs several times as much, and a scrape is
        // mostly integers (benches/openmetrics.rs).
        let mut digits = [0u8; 20];
        let (mut n, mut i) = (*self, digits.len());
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        for &d in &digits[i..] {
            out.push(char::from(d));
        }
    }
}

impl Number for i64 {
    fn write_to(&self, out: &mut String) {
        if *self < 0 {
            out.push('-');
        }
        self.unsigned_abs().write_to(out);
    }
}

impl Number for f64 {
    fn write_to(&self, out: &mut String) {
        if self.is_nan() {
            out.push_str("NaN");
        } else if self.is_infinite() {
            out.push_str(if *self > 0.0 { "+Inf" } else { "-Inf" });
        } else {
            let _ = write!(out, "{self:?}");
        }
    }
}

/// `value` as a label value: `\`, `"` and newlines escaped (the spec's three).
fn escape_into(out: &mut String, value: &str) {
    if !value.bytes().any(|b| matches!(b, b'\\' | b'"' | b'\n')) {
        out.push_str(value);
        return;
    }
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn family<'a>(
    out: &'a mut String,
    name: &'static str,
    kind: &'static str,
    unit: Option<&'static str>,
    help: &'static str,
) -> Family<'a> {
    Family {
        out,
        name,
        kind,
        help,
        unit,
        started: false,
    }
}

/// The OpenMetrics text of `state`, `# EOF` last. A family with no known
/// value is left out whole.
pub fn render(state: &MetricsState) -> String {
    let mut out = String::with_capacity(128 + 96 * (state.memory.len() + 4 * state.cycles.len()));
    render_memory(&mut out, state);
    render_cycles(&mut out, &state.cycles);
    render_counts(&mut out, state);
    out.push_str("# EOF\n");
    out
}

fn render_memory(out: &mut String, state: &MetricsState) {
    let mut f = family(
        out,
        "memrel_memory_bytes",
        "gauge",
        Some("bytes"),
        "Bytes of each resource and part at the last sample, of the measured process.",
    );
    let mut pid = String::new();
    for m in &state.memory {
        pid.clear();
        if let Some(p) = m.pid {
            u64::from(p).write_to(&mut pid);
        }
        let labels = [
            ("resource", Some(m.resource.as_str())),
            ("part", m.part.as_deref()),
            ("pid", m.pid.map(|_| pid.as_str())),
        ];
        f.sample("", &labels, &m.bytes);
    }
}

fn render_cycles(out: &mut String, cycles: &[CycleValues]) {
    type Pick = fn(&CycleValues, &mut dyn FnMut(&dyn Number));
    let families: [(&'static str, Option<&'static str>, &'static str, Pick); 5] = [
        (
            "memrel_cycle_retained_bytes",
            Some("bytes"),
            "Retained after the last closed cycle's release (after release - baseline), per model and resource.",
            |c, w| w(&c.retained_bytes),
        ),
        (
            "memrel_cycle_released_ratio",
            Some("ratio"),
            "Fraction of what the last closed cycle loaded that came back (1 is all of it), per model and resource.",
            |c, w| {
                if let Some(v) = c.released_fraction {
                    w(&v)
                }
            },
        ),
        (
            "memrel_cycle_settle_seconds",
            Some("seconds"),
            "From the last closed cycle's release call returning until memory stayed put, per model and resource.",
            |c, w| {
                if let Some(v) = c.settle_s {
                    w(&v)
                }
            },
        ),
        (
            "memrel_cycle_late_bytes",
            Some("bytes"),
            "What came back after the last closed cycle's release call returned, per model and resource.",
            |c, w| {
                if let Some(v) = c.late_bytes {
                    w(&v)
                }
            },
        ),
        (
            "memrel_cycle_number",
            None,
            "The number of the last closed cycle the memrel_cycle_* series are of.",
            |c, w| w(&u64::from(c.cycle)),
        ),
    ];
    for (name, unit, help, pick) in families {
        let mut f = family(out, name, "gauge", unit, help);
        for c in cycles {
            let labels = [
                ("model", c.model.as_deref()),
                ("resource", Some(c.resource.as_str())),
            ];
            pick(c, &mut |v| f.sample("", &labels, v));
        }
    }
}

fn render_counts(out: &mut String, state: &MetricsState) {
    let counters: [(&'static str, &'static str, u64); 3] = [
        (
            "memrel_cycles",
            "Closed cycles measured.",
            state.cycles_total,
        ),
        ("memrel_sleeps", "Sleeps measured.", state.sleeps_total),
        ("memrel_wakes", "Wakes measured.", state.wakes_total),
    ];
    for (name, help, value) in counters {
        family(out, name, "counter", None, help).sample("_total", &[], &value);
    }
    let mut f = family(
        out,
        "memrel_asleep",
        "gauge",
        None,
        "1 while a model is asleep (from a sleep's end until a wake's end), 0 when awake.",
    );
    for (model, asleep) in &state.asleep {
        f.sample("", &[("model", model.as_deref())], &u64::from(*asleep));
    }
    if let Some(cpu_s) = state.own.cpu_s {
        family(
            out,
            "memrel_process_cpu_seconds",
            "counter",
            Some("seconds"),
            "CPU time (user + system) memrel's own process used.",
        )
        .sample("_total", &[], &cpu_s);
    }
    if let Some(bytes) = state.own.resident_bytes {
        family(
            out,
            "memrel_process_resident_memory_bytes",
            "gauge",
            Some("bytes"),
            "memrel's own resident set (VmRSS).",
        )
        .sample("", &[], &bytes);
    }
    family(
        out,
        "memrel_samples",
        "counter",
        None,
        "Samples memrel took.",
    )
    .sample("_total", &[], &state.samples_total);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::summarize;
    use crate::record::fixture;

    const OWN: OwnCost = OwnCost {
        cpu_s: Some(1.5),
        resident_bytes: Some(8 << 20),
    };

    #[test]
    fn a_fixture_record_renders_to_the_exact_text() {
        let record = fixture::record();
        let summary = summarize(&record);
        let text = render(&MetricsState::of_record(&record, &summary, OWN));
        assert!(text.ends_with("# EOF\n"), "{text}");
        insta::assert_snapshot!(text, @r#"
        # TYPE memrel_memory_bytes gauge
        # UNIT memrel_memory_bytes bytes
        # HELP memrel_memory_bytes Bytes of each resource and part at the last sample, of the measured process.
        memrel_memory_bytes{resource="host",pid="1004"} 11534336
        memrel_memory_bytes{resource="host",part="anon",pid="1004"} 8650752
        memrel_memory_bytes{resource="host",part="file",pid="1004"} 2883584
        # TYPE memrel_cycle_retained_bytes gauge
        # UNIT memrel_cycle_retained_bytes bytes
        # HELP memrel_cycle_retained_bytes Retained after the last closed cycle's release (after release - baseline), per model and resource.
        memrel_cycle_retained_bytes{model="m",resource="host"} 1048576
        # TYPE memrel_cycle_released_ratio gauge
        # UNIT memrel_cycle_released_ratio ratio
        # HELP memrel_cycle_released_ratio Fraction of what the last closed cycle loaded that came back (1 is all of it), per model and resource.
        memrel_cycle_released_ratio{model="m",resource="host"} 0.99
        # TYPE memrel_cycle_settle_seconds gauge
        # UNIT memrel_cycle_settle_seconds seconds
        # HELP memrel_cycle_settle_seconds From the last closed cycle's release call returning until memory stayed put, per model and resource.
        memrel_cycle_settle_seconds{model="m",resource="host"} 0.0
        # TYPE memrel_cycle_late_bytes gauge
        # UNIT memrel_cycle_late_bytes bytes
        # HELP memrel_cycle_late_bytes What came back after the last closed cycle's release call returned, per model and resource.
        memrel_cycle_late_bytes{model="m",resource="host"} 0
        # TYPE memrel_cycle_number gauge
        # HELP memrel_cycle_number The number of the last closed cycle the memrel_cycle_* series are of.
        memrel_cycle_number{model="m",resource="host"} 3
        # TYPE memrel_cycles counter
        # HELP memrel_cycles Closed cycles measured.
        memrel_cycles_total 3
        # TYPE memrel_sleeps counter
        # HELP memrel_sleeps Sleeps measured.
        memrel_sleeps_total 0
        # TYPE memrel_wakes counter
        # HELP memrel_wakes Wakes measured.
        memrel_wakes_total 0
        # TYPE memrel_process_cpu_seconds counter
        # UNIT memrel_process_cpu_seconds seconds
        # HELP memrel_process_cpu_seconds CPU time (user + system) memrel's own process used.
        memrel_process_cpu_seconds_total 1.5
        # TYPE memrel_process_resident_memory_bytes gauge
        # UNIT memrel_process_resident_memory_bytes bytes
        # HELP memrel_process_resident_memory_bytes memrel's own resident set (VmRSS).
        memrel_process_resident_memory_bytes 8388608
        # TYPE memrel_samples counter
        # HELP memrel_samples Samples memrel took.
        memrel_samples_total 315
        # EOF
        "#);
    }

    #[test]
    fn integers_are_written_whole() {
        let text = |n: &dyn Number| {
            let mut out = String::new();
            n.write_to(&mut out);
            out
        };
        assert_eq!(text(&0u64), "0");
        assert_eq!(text(&u64::MAX), u64::MAX.to_string());
        assert_eq!(text(&i64::MIN), i64::MIN.to_string());
        assert_eq!(text(&-5i64), "-5");
        assert_eq!(text(&0.25f64), "0.25");
    }

    #[test]
    fn label_values_are_escaped() {
        let state = MetricsState {
            asleep: vec![(Some("a\"b\\c\nd".into()), true)],
            ..MetricsState::default()
        };
        let text = render(&state);
        assert!(
            text.contains("memrel_asleep{model=\"a\\\"b\\\\c\\nd\"} 1\n"),
            "{text}"
        );
    }

    #[test]
    fn unknown_values_are_left_out_never_zero() {
        let state = MetricsState {
            cycles: vec![CycleValues {
                model: None,
                resource: "host".into(),
                cycle: 2,
                retained_bytes: -5,
                released_fraction: None,
                settle_s: None,
                late_bytes: None,
            }],
            ..MetricsState::default()
        };
        let text = render(&state);
        assert!(
            text.contains("memrel_cycle_retained_bytes{resource=\"host\"} -5\n"),
            "{text}"
        );
        for absent in [
            "memrel_cycle_released_ratio",
            "memrel_cycle_settle_seconds",
            "memrel_cycle_late_bytes",
            "memrel_process_cpu_seconds",
            "memrel_process_resident_memory_bytes",
            "memrel_memory_bytes",
        ] {
            assert!(!text.contains(absent), "{absent} in {text}");
        }
    }

    #[test]
    fn own_cost_is_read_from_proc_self() {
        let own = OwnCost::read();
        assert!(own.cpu_s.is_some_and(|s| s >= 0.0), "{own:?}");
        assert!(own.resident_bytes.is_some_and(|b| b > 0), "{own:?}");
        let stat = "42 (a b) R 1 2 3 4 5 6 7 8 9 10 250 50 0 0";
        assert_eq!(cpu_s_of_stat(stat, 100), Some(3.0));
        assert_eq!(
            rss_bytes_of_status("Name:\tx\nVmRSS:\t  10240 kB\n"),
            Some(10240 * 1024)
        );
    }
}
