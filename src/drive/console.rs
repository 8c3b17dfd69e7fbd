//! `memrel drive`'s console: after each run, one line per request
//! (latency, host and VRAM at send, answer and settled, whether memory is
//! back) laid out by the one table writer (`export::markdown::Table`), the
//! lines that say what still left after an answer or stayed after a wake,
//! and how the server ended. It formats what the driver measured
//! (`RequestRow`); it computes no number.

use std::io::{self, Write};

use super::rows::{host_bytes, Layer, RequestRow, TOLERANCE_BYTES};
use crate::export::markdown::{Align, Table};
use crate::textutil::{signed_whole_mib, whole_mib};

/// The line above a run's requests when a drive makes several runs
/// (`strategy`: with several strategies), a blank line before all but the
/// `first`.
pub fn repeat_title(
    out: &mut dyn Write,
    first: bool,
    strategy: Option<&str>,
    k: u32,
    repeat: u32,
) -> io::Result<()> {
    let gap = if first { "" } else { "\n" };
    match strategy {
        None => writeln!(out, "{gap}repeat {k} of {repeat}:"),
        Some(name) => writeln!(out, "{gap}strategy {name}, repeat {k} of {repeat}:"),
    }
}

/// A run's requests: the table, then the late and left-after-wake lines,
/// the warm-up note (`warmup_cycles` driven first) and how the server
/// ended (`server_exit`).
pub fn requests(
    out: &mut dyn Write,
    rows: &[RequestRow],
    warmup_cycles: u32,
    server_exit: Option<&str>,
) -> io::Result<()> {
    write!(out, "{}", table(rows))?;
    for row in rows {
        if let Some(line) = late_line(row) {
            writeln!(out, "{line}")?;
        }
        if let Some(line) = super::rows::left_after_wake(row) {
            writeln!(out, "request {} ({}): {line}", row.index, row.request)?;
        }
    }
    if warmup_cycles > 0 && rows.iter().any(|r| r.cycle == 0) {
        writeln!(
            out,
            "cycle 0 is the warm-up (--warmup-cycles {warmup_cycles}): reported, not judged; `back` \
             compares with the level before cycle 1"
        )?;
    }
    if let Some(exit) = server_exit {
        writeln!(out, "server: {exit}")?;
    }
    Ok(())
}

/// One line per request: latency, host (and VRAM) at send → answer →
/// settled in MiB, and whether it is back to the level before the load;
/// laid out by the one table writer (`export::markdown::Table`).
fn table(rows: &[RequestRow]) -> String {
    let mut table = Table::columns([
        ("#", Align::Right),
        ("cycle", Align::Right),
        ("phase", Align::Left),
        ("request", Align::Left),
        ("status", Align::Right),
        ("latency", Align::Right),
        ("host MiB send>answer>settled", Align::Left),
        ("vram MiB", Align::Left),
        ("back", Align::Left),
    ]);
    for r in rows {
        let host = format!(
            "{}>{}>{}",
            whole_mib(host_bytes(&r.at_send)),
            r.at_response
                .as_ref()
                .map_or("-".into(), |l| whole_mib(host_bytes(l))),
            r.settled
                .as_ref()
                .map_or("-".into(), |l| whole_mib(host_bytes(l)))
        );
        let vram_of = |l: &Option<_>| {
            l.as_ref()
                .and_then(|l| Layer::Vram.bytes(l))
                .map_or("-".into(), whole_mib)
        };
        let vram = match Layer::Vram.bytes(&r.at_send) {
            Some(send) => format!(
                "{}>{}>{}",
                whole_mib(send),
                vram_of(&r.at_response),
                vram_of(&r.settled)
            ),
            None => "-".into(),
        };
        let back = match r.error {
            Some(_) => "failed".to_string(),
            None => verdict(r),
        };
        table.row([
            r.index.to_string(),
            r.cycle.to_string(),
            r.phase.to_string(),
            r.request.chars().take(34).collect(),
            r.status.map_or("-".into(), |s| s.to_string()),
            r.latency_s.map_or("-".into(), |s| format!("{s:.3} s")),
            host,
            vram,
            back,
        ]);
    }
    let mut text = table.aligned_lines().join("\n");
    text.push('\n');
    text
}

/// A request's verdict: for a sleep, what it freed of what was held just
/// before it (per layer); for a cycle's end (an unload, a wake), whether
/// memory is back to the level before the first judged cycle (the drive's
/// baseline; requests.csv also has the same cycle's); empty otherwise.
fn verdict(r: &RequestRow) -> String {
    let yes = |b: i64| {
        if b <= TOLERANCE_BYTES as i64 {
            "yes"
        } else {
            "no"
        }
    };
    if let Some(freed) = &r.freed {
        let of = |freed: i64, before: u64| {
            format!(
                "{} of {} MiB",
                signed_whole_mib(freed).trim_start_matches('+'),
                whole_mib(before)
            )
        };
        // A sleep that copies the weights into host memory grows the host.
        let grew = freed.host_bytes() < -(TOLERANCE_BYTES as i64);
        let mut text = if grew {
            format!(
                "host grew {} MiB",
                whole_mib(freed.host_bytes().unsigned_abs())
            )
        } else {
            format!(
                "freed host {}",
                of(freed.host_bytes(), host_bytes(&r.at_send))
            )
        };
        if let (Some(f), Some(b)) = (freed.vram_bytes(), Layer::Vram.bytes(&r.at_send)) {
            let vram = if grew { "; freed vram" } else { ", vram" };
            text.push_str(&format!("{vram} {}", of(f, b)));
        }
        return text;
    }
    let Some(h) = &r.held_first else {
        return match (&r.held, r.cycle) {
            (Some(_), 0) => "warm-up".to_string(),
            _ => String::new(),
        };
    };
    match h.vram_bytes() {
        Some(v) => format!("host {} vram {}", yes(h.host_bytes()), yes(v)),
        None => format!(
            "host {} ({} MiB)",
            yes(h.host_bytes()),
            signed_whole_mib(h.host_bytes())
        ),
    }
}

/// Said where memory still left after the answer (the release gap).
fn late_line(r: &RequestRow) -> Option<String> {
    let late = r.late.as_ref()?;
    let gap = TOLERANCE_BYTES as i64;
    let host = (late.host_bytes() > gap)
        .then(|| format!("{} MiB host", whole_mib(late.host_bytes() as u64)));
    let vram = late
        .vram_bytes()
        .filter(|v| *v > gap)
        .map(|v| format!("{} MiB VRAM", whole_mib(v as u64)));
    let what: Vec<String> = host.into_iter().chain(vram).collect();
    (!what.is_empty()).then(|| {
        format!(
            "request {} ({}): {} still left after the answer (late bytes); {}",
            r.index,
            r.request,
            what.join(" and "),
            super::driver::settle_words(r)
        )
    })
}
