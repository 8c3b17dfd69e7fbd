//! `--export-trace FILE`: the runs as Chrome trace-event JSON, for Perfetto
//! (ui.perfetto.dev) and chrome://tracing.
//!
//! Each run is one process (named after its strategy and repetition) with a
//! counter track in MiB (`"ph":"C"`) per resource of its record: `rss` (with
//! its parts `anon` and `file`) for host memory, `vram cuda:N` for each device
//! (named after the device, so several devices stay apart), and its phases as
//! complete slices on one thread (`"ph":"X"`). Timestamps are
//! microseconds since the worker started, so every run starts at 0 and the
//! runs line up like in compare.png. A counter holds its value until the next
//! event, so a sample is written only when its value changed: lossless, and a
//! long flat run stays small.
//!
//! Formats raw samples and events; computes no metric.

use crate::metrics::ResourceFacts;
use std::io::Write;

use anyhow::Result;
use serde::Serialize;

use crate::metrics::resource::Draw;
use crate::metrics::Resource;
use crate::record::{Record, RunRecord, Sample};
use crate::textutil::MIB;

#[derive(Serialize)]
struct TraceEvent<'a> {
    name: &'a str,
    ph: &'static str,
    ts: i64,
    pid: u32,
    tid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cat: Option<&'static str>,
    args: serde_json::Value,
}

fn us(t_s: f64) -> i64 {
    (t_s * 1e6).round() as i64
}

/// The trace of every run of `records`; `labels` (same length) name each
/// record's source in process names when there are several.
pub fn trace_json(records: &[(&str, &Record)]) -> Result<Vec<u8>> {
    let mut out: Vec<u8> = Vec::new();
    let scenarios: Vec<&str> = records
        .iter()
        .map(|(_, r)| r.header.scenario.as_str())
        .collect();
    write!(
        out,
        "{{\"displayTimeUnit\":\"ms\",\"otherData\":{},\"traceEvents\":[",
        serde_json::json!({
            "tool": "memrel",
            "scenario": scenarios.join(" vs "),
            "time": "microseconds since each worker started",
        })
    )?;
    let mut first = true;
    let mut emit = |out: &mut Vec<u8>, event: &TraceEvent| -> Result<()> {
        out.extend_from_slice(if first { b"\n" } else { b",\n" });
        first = false;
        serde_json::to_writer(&mut *out, event)?;
        Ok(())
    };
    let mut pid = 0u32;
    for (label, record) in records {
        for run in &record.runs {
            pid += 1;
            let source = if records.len() > 1 {
                format!(" ({label})")
            } else {
                String::new()
            };
            let name = format!(
                "{} · repetition {} · run {}{source}",
                run.meta.strategy, run.meta.repetition, run.meta.run
            );
            emit(
                &mut out,
                &metadata("process_name", pid, serde_json::json!({ "name": name })),
            )?;
            emit(
                &mut out,
                &metadata(
                    "process_sort_index",
                    pid,
                    serde_json::json!({ "sort_index": pid }),
                ),
            )?;
            emit(
                &mut out,
                &metadata(
                    "thread_name",
                    pid,
                    serde_json::json!({ "name": run.meta.strategy }),
                ),
            )?;
            let resources = Resource::of(&record.header);
            write_counters(run, &resources, pid, &mut |e| emit(&mut out, e))?;
            for span in run.phase_spans() {
                let label = span.label();
                emit(
                    &mut out,
                    &TraceEvent {
                        name: &label,
                        ph: "X",
                        ts: us(span.start_s),
                        pid,
                        tid: 1,
                        dur: Some((us(span.end_s) - us(span.start_s)).max(0)),
                        cat: Some("phase"),
                        args: serde_json::json!({ "cycle": span.cycle, "phase": span.phase.as_str() }),
                    },
                )?;
            }
        }
    }
    out.extend_from_slice(b"\n]}\n");
    Ok(out)
}

fn metadata(name: &'static str, pid: u32, args: serde_json::Value) -> TraceEvent<'static> {
    TraceEvent {
        name,
        ph: "M",
        ts: 0,
        pid,
        tid: 1,
        dur: None,
        cat: None,
        args,
    }
}

/// A counter track: its name and its value in a sample (`None`: not read then).
type Track = (String, Box<dyn Fn(&Sample) -> Option<u64>>);

/// The counter tracks of `resources`.
fn tracks(resources: &[Resource]) -> Vec<Track> {
    let mut out: Vec<Track> = Vec::new();
    for &r in resources {
        let look = r.look();
        out.push((look.track, Box::new(move |s| r.in_sample(s))));
        // The parts of a stack are 0 where unread; other parts are left out.
        let stacked = look.draw == Draw::Stacked;
        for p in &look.parts {
            let part = p.part;
            out.push((
                p.track.to_string(),
                Box::new(move |s| {
                    let bytes = s.readings.part(r, part);
                    if stacked {
                        bytes.or(Some(0))
                    } else {
                        bytes
                    }
                }),
            ));
        }
    }
    out
}

/// Counter events for one run, each series only where its value changed
/// (and at the last sample, so the track ends where the run ended).
fn write_counters(
    run: &RunRecord,
    resources: &[Resource],
    pid: u32,
    emit: &mut dyn FnMut(&TraceEvent) -> Result<()>,
) -> Result<()> {
    for (name, pick) in tracks(resources) {
        let mut last: Option<u64> = None;
        let n = run.samples.len();
        for (i, sample) in run.samples.iter().enumerate() {
            let Some(value) = pick(sample) else { continue };
            if last == Some(value) && i + 1 != n {
                continue;
            }
            last = Some(value);
            let mib = (value as f64 / MIB * 1000.0).round() / 1000.0;
            emit(&TraceEvent {
                name: &name,
                ph: "C",
                ts: us(sample.t_s),
                pid,
                tid: 1,
                dur: None,
                cat: None,
                args: serde_json::json!({ "MiB": mib }),
            })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fixture;

    #[test]
    fn counters_are_written_only_when_they_change_and_slices_never_end_before_they_start() {
        let record = fixture::record();
        let bytes = trace_json(&[("A", &record)]).unwrap();
        let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let events = value["traceEvents"].as_array().unwrap();
        let rss_of_run_1: Vec<&serde_json::Value> = events
            .iter()
            .filter(|e| e["ph"] == "C" && e["pid"] == 1 && e["name"] == "rss")
            .collect();
        // Run 1 holds 10 MiB, then each of 3 cycles goes up and down: 1 + 2 × 3 changes, plus the last sample.
        assert_eq!(rss_of_run_1.len(), 8, "{rss_of_run_1:?}");
        assert_eq!(rss_of_run_1[0]["args"]["MiB"], 10.0);
        let slices: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(slices.len(), 4 * (1 + 3 * 4));
        assert!(slices.iter().all(|e| e["dur"].as_i64().unwrap() >= 0));
        assert_eq!(slices[1]["name"], "load m");
        let names: Vec<&str> = events
            .iter()
            .filter(|e| e["name"] == "process_name")
            .map(|e| e["args"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names[1], "malloc-trim · repetition 1 · run 2");
        assert!(
            !events
                .iter()
                .any(|e| e["name"].as_str().unwrap().starts_with("vram")),
            "a cpu record has no vram track"
        );
    }

    #[test]
    fn each_device_has_its_own_vram_track() {
        let record = fixture::cuda_record();
        let bytes = trace_json(&[("A", &record)]).unwrap();
        let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let events = value["traceEvents"].as_array().unwrap();
        let vram: Vec<f64> = events
            .iter()
            .filter(|e| e["ph"] == "C" && e["pid"] == 1 && e["name"] == "vram cuda:0")
            .map(|e| e["args"]["MiB"].as_f64().unwrap())
            .collect();
        // drop: 678 MiB, then loaded at 1094 and back to 678 + 416 = 1094 (unchanged).
        assert_eq!(vram.first(), Some(&678.0), "{vram:?}");
        assert!(vram.contains(&1094.0), "{vram:?}");
        let context: Vec<f64> = events
            .iter()
            .filter(|e| e["ph"] == "C" && e["pid"] == 3 && e["name"] == "vram cuda:0")
            .map(|e| e["args"]["MiB"].as_f64().unwrap())
            .collect();
        assert_eq!(context.last(), Some(&0.0), "context-release ends at 0 MiB");
        for name in ["rss", "anon", "file"] {
            assert!(events.iter().any(|e| e["name"] == name), "no {name}");
        }
    }

    /// One run of one cycle: the trace as Perfetto reads it.
    fn small_trace() -> String {
        let record = Record {
            header: fixture::header("trace", 1),
            runs: vec![fixture::run(1, "drop", 1, &[2])],
        };
        String::from_utf8(trace_json(&[("A", &record)]).unwrap()).unwrap()
    }

    #[test]
    fn trace_json_snapshot() {
        insta::assert_snapshot!(small_trace(), @r#"
    {"displayTimeUnit":"ms","otherData":{"scenario":"trace","time":"microseconds since each worker started","tool":"memrel"},"traceEvents":[
    {"name":"process_name","ph":"M","ts":0,"pid":1,"tid":1,"args":{"name":"drop · repetition 1 · run 1"}},
    {"name":"process_sort_index","ph":"M","ts":0,"pid":1,"tid":1,"args":{"sort_index":1}},
    {"name":"thread_name","ph":"M","ts":0,"pid":1,"tid":1,"args":{"name":"drop"}},
    {"name":"rss","ph":"C","ts":0,"pid":1,"tid":1,"args":{"MiB":10.0}},
    {"name":"rss","ph":"C","ts":100001,"pid":1,"tid":1,"args":{"MiB":110.0}},
    {"name":"rss","ph":"C","ts":500001,"pid":1,"tid":1,"args":{"MiB":12.0}},
    {"name":"rss","ph":"C","ts":1140002,"pid":1,"tid":1,"args":{"MiB":12.0}},
    {"name":"anon","ph":"C","ts":0,"pid":1,"tid":1,"args":{"MiB":7.5}},
    {"name":"anon","ph":"C","ts":100001,"pid":1,"tid":1,"args":{"MiB":82.5}},
    {"name":"anon","ph":"C","ts":500001,"pid":1,"tid":1,"args":{"MiB":9.0}},
    {"name":"anon","ph":"C","ts":1140002,"pid":1,"tid":1,"args":{"MiB":9.0}},
    {"name":"file","ph":"C","ts":0,"pid":1,"tid":1,"args":{"MiB":2.5}},
    {"name":"file","ph":"C","ts":100001,"pid":1,"tid":1,"args":{"MiB":27.5}},
    {"name":"file","ph":"C","ts":500001,"pid":1,"tid":1,"args":{"MiB":3.0}},
    {"name":"file","ph":"C","ts":1140002,"pid":1,"tid":1,"args":{"MiB":3.0}},
    {"name":"baseline","ph":"X","ts":1300,"pid":1,"tid":1,"dur":98700,"cat":"phase","args":{"cycle":0,"phase":"baseline"}},
    {"name":"load m","ph":"X","ts":100000,"pid":1,"tid":1,"dur":300000,"cat":"phase","args":{"cycle":1,"phase":"load"}},
    {"name":"unload m","ph":"X","ts":400000,"pid":1,"tid":1,"dur":100000,"cat":"phase","args":{"cycle":1,"phase":"unload"}},
    {"name":"release","ph":"X","ts":500000,"pid":1,"tid":1,"dur":100000,"cat":"phase","args":{"cycle":1,"phase":"release"}},
    {"name":"settle","ph":"X","ts":600000,"pid":1,"tid":1,"dur":400000,"cat":"phase","args":{"cycle":1,"phase":"settle"}}
    ]}
    "#);
    }
}
