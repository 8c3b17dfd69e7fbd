//! `memrel baseline list` and `memrel baseline show NAME`: what the saved
//! baselines cover and how each was made, so that nobody has to open
//! runs.json to know what `memrel check` will compare against. Reads
//! baselines; never writes one.

use crate::metrics::ResourceFacts;
use std::io::Write;
use std::path::Path;

use anyhow::Result;

use super::ExitStatus;
use crate::baseline::{self, EntrySummary};
use crate::cli::BaselineCommand;
use crate::export::markdown::{Align, Table};
use crate::fsutil::utc_readable;
use crate::hint::Hint;
use crate::metrics;

/// `memrel baseline list|show`, printed to `out`.
pub fn run(command: &BaselineCommand, out: &mut dyn Write) -> Result<ExitStatus> {
    match command {
        BaselineCommand::List { out: results } => list(&baseline::root(results), out),
        BaselineCommand::Show { name, out: results } => show(&baseline::root(results), name, out),
    }
}

/// One entry as read: its summary, or why it cannot be read.
type Read = (String, Result<EntrySummary>);

fn read_entries(root: &Path, name: &str) -> Result<Vec<Read>> {
    let scenarios = baseline::scenarios(root, name)?;
    Ok(scenarios
        .into_iter()
        .map(|scenario| {
            let entry = baseline::load(root, name, &scenario).and_then(|record| {
                record
                    .map(|r| EntrySummary::of(&r, &metrics::summarize(&r)))
                    .ok_or_else(|| anyhow::anyhow!("the entry went away while it was read"))
            });
            (scenario, entry)
        })
        .collect())
}

fn list(root: &Path, out: &mut dyn Write) -> Result<ExitStatus> {
    let names = baseline::names(root)?;
    if names.is_empty() {
        writeln!(
            out,
            "no baselines in {}: make one with `{}`",
            root.display(),
            baseline::save_hint(root, "<scenario>", "<name>", false)
        )?;
        return Ok(ExitStatus::Success);
    }
    let mut table = Table::columns([
        ("baseline", Align::Left),
        ("scenario", Align::Left),
        ("strategies (runs)", Align::Left),
        ("made (UTC)", Align::Left),
        ("machine", Align::Left),
    ]);
    for name in &names {
        for (scenario, entry) in read_entries(root, name)? {
            match entry {
                Ok(e) => table.row([
                    name.clone(),
                    scenario,
                    strategies_cell(&e),
                    utc_readable(e.created_unix_s),
                    machine_cell(&e),
                ]),
                Err(_) => table.row([
                    name.clone(),
                    scenario,
                    format!("damaged: see `{}`", Hint::BaselineShow { baseline: name }),
                    String::new(),
                    String::new(),
                ]),
            }
        }
    }
    writeln!(out, "baselines in {}:\n", root.display())?;
    for line in table.aligned_lines() {
        writeln!(out, "{line}")?;
    }
    Ok(ExitStatus::Success)
}

fn show(root: &Path, name: &str, out: &mut dyn Write) -> Result<ExitStatus> {
    let entries = read_entries(root, name)?;
    writeln!(out, "baseline {name} ({})", root.join(name).display())?;
    if entries.is_empty() {
        writeln!(
            out,
            "\nno scenarios: save one with `{}`",
            baseline::save_hint(root, "<scenario>", name, false)
        )?;
    }
    let mut damaged = 0;
    for (scenario, entry) in entries {
        writeln!(out)?;
        let e = match entry {
            Ok(e) => e,
            Err(err) => {
                damaged += 1;
                writeln!(out, "scenario {scenario}: damaged: {err:#}")?;
                continue;
            }
        };
        let resources: Vec<String> = e.coverage.resources.iter().map(|r| r.label()).collect();
        let machine: Vec<String> = e.machine.iter().map(|(k, v)| format!("{k} {v}")).collect();
        writeln!(
            out,
            "scenario {} ({}, {} cycles)",
            e.scenario, e.device, e.cycles
        )?;
        writeln!(out, "  strategies: {}", strategies_cell(&e))?;
        writeln!(out, "  resources:  {}", resources.join(", "))?;
        writeln!(
            out,
            "  made:       {} UTC by memrel {}",
            utc_readable(e.created_unix_s),
            e.memrel_version
        )?;
        writeln!(out, "  command:    {}", e.command.join(" "))?;
        writeln!(out, "  machine:    {}", machine.join(", "))?;
    }
    if damaged > 0 {
        eprintln!("memrel: error: baseline {name}: {damaged} damaged entry(ies), named above");
        return Ok(ExitStatus::Error);
    }
    Ok(ExitStatus::Success)
}

/// `drop (3), malloc-trim (3)`.
fn strategies_cell(e: &EntrySummary) -> String {
    e.coverage
        .strategies
        .iter()
        .zip(&e.runs)
        .map(|(s, n)| format!("{s} ({n})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The facts that tell machines apart at a glance: distribution (or OS),
/// glibc, CPUs and GPU when there is one.
fn machine_cell(e: &EntrySummary) -> String {
    let fact = |k: &str| {
        e.machine
            .iter()
            .find(|(f, _)| f == k)
            .map(|(_, v)| v.clone())
    };
    let mut parts = Vec::new();
    if let Some(d) = fact("distribution").or_else(|| fact("OS")) {
        parts.push(d);
    }
    if let Some(g) = fact("glibc") {
        parts.push(format!("glibc {g}"));
    }
    if let Some(c) = fact("CPUs") {
        parts.push(format!("{c} CPUs"));
    }
    if let Some(g) = fact("GPU").filter(|g| g != "absent") {
        parts.push(g);
    }
    parts.join(", ")
}
