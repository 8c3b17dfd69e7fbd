//! `memrel advise DIR…`: from saved results directories, the cheapest
//! strategy that gives each retaining resource back in every completed run,
//! its price and the setting to use. Loads and hands over to
//! `metrics::advice` (the choice) and `export::advice` (the text); runs
//! nothing and writes nothing but the advice on `out`. A directory named
//! twice (`out/run` and `out/./run/`) is read once: its runs count once.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use super::ExitStatus;
use crate::cli::AdviseArgs;
use crate::export;
use crate::metrics::advice::{advise, Advice};
use crate::metrics::Summary;
use crate::results::load;

pub fn run(args: &AdviseArgs, out: &mut dyn Write) -> Result<ExitStatus> {
    if args.dirs.is_empty() {
        bail!("name at least one results directory (what `memrel run` or `memrel compare --scenario` wrote)");
    }
    let mut loaded = Vec::new();
    let mut seen: Vec<PathBuf> = Vec::new();
    for dir in &args.dirs {
        if !dir.exists() {
            bail!(
                "results directory {} does not exist: name a directory `memrel run` or `memrel compare --scenario` wrote",
                dir.display()
            );
        }
        if !dir.is_dir() {
            bail!(
                "{} is not a directory: name a results directory `memrel run` or `memrel compare --scenario` wrote",
                dir.display()
            );
        }
        let canonical = dir
            .canonicalize()
            .with_context(|| format!("cannot read results directory {}", dir.display()))?;
        if seen.contains(&canonical) {
            continue;
        }
        seen.push(canonical);
        loaded.push(load(dir)?);
    }
    let summaries: Vec<&Summary> = loaded.iter().map(|l| &l.summary).collect();
    let mut advice = advise(&summaries);
    // Drives of one server: each setting as it goes on the server's command
    // line (what a server can be given from outside), not a call inside it.
    // The server's command: what followed `--` where memrel started it,
    // else the running process's arguments.
    let servers: Vec<&[String]> = loaded
        .iter()
        .map(|l| &l.record.header)
        .filter(|h| h.command.get(1).is_some_and(|c| c == "drive"))
        .filter_map(|h| match h.command.iter().position(|a| a == "--") {
            Some(i) => Some(&h.command[i + 1..]),
            None => h.attached.as_ref().map(|a| a.argv.as_slice()),
        })
        .collect();
    if servers.len() == loaded.len() {
        if let (Some(argv), Advice::Resources { resources, .. }) = (servers.first(), &mut advice) {
            for r in resources {
                r.pick.setting = crate::strategy::lookup(&r.pick.strategy)
                    .ok()
                    .and_then(|s| s.command_line(argv));
            }
        }
    }
    write!(out, "{}", export::advice::text(&advice))?;
    Ok(ExitStatus::Success)
}
