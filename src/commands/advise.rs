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
use crate::metrics::advice::advise;
use crate::metrics::Summary;
use crate::results::{load, Loaded};

/// `memrel advise` as the arguments ask: loads the directories, prints the
/// advice to `out`.
pub fn run(args: &AdviseArgs, out: &mut dyn Write) -> Result<ExitStatus> {
    let loaded = load_each_once(&args.dirs)?;
    let summaries: Vec<&Summary> = loaded.iter().map(|l| &l.summary).collect();
    let mut advice = advise(&summaries);
    let headers: Vec<&crate::record::Header> = loaded.iter().map(|l| &l.record.header).collect();
    super::output::on_the_servers_command_line(&mut advice, &headers);
    write!(out, "{}", export::advice::text(&advice))?;
    write!(
        out,
        "{}",
        super::output::mechanism_advice(
            &summaries,
            &headers,
            &loaded.iter().map(|l| l.dir.as_path()).collect::<Vec<_>>()
        )
    )?;
    Ok(ExitStatus::Success)
}

/// Each results directory of `dirs` loaded, once however it is spelled.
fn load_each_once(dirs: &[PathBuf]) -> Result<Vec<Loaded>> {
    if dirs.is_empty() {
        bail!("name at least one results directory (what `memrel run` or `memrel compare --scenario` wrote)");
    }
    let mut loaded = Vec::new();
    let mut seen: Vec<PathBuf> = Vec::new();
    for dir in dirs {
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
    Ok(loaded)
}
