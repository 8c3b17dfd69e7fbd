//! `memrel exec -- CMD ARGS...`: a program measured like a scenario. The
//! options become a scenario file's text (kept in runs.json, so `report` and
//! `check` treat the results like any others), parsed by the one scenario
//! parser, and run by the [`Plan`].

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};

use super::{output, ExitStatus};
use crate::cli::{ExecArgs, ScenarioOverrides};
use crate::metrics::Summary;
use crate::plan::Plan;
use crate::results::check_output_args;
use crate::scenario;
use crate::textutil::last_stderr_lines;
use crate::worker::command::ProgramIo;

/// `memrel exec` as the arguments ask: runs, prints the table and where the
/// results went to `out`, and says how the runs ended.
pub fn run(args: &ExecArgs, out: &mut dyn Write) -> Result<ExitStatus> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    if let Some(why) = args
        .command
        .first()
        .and_then(|program| missing_program(program, &cwd))
    {
        // Said once, before anything runs, with a shell's exit code.
        eprintln!("memrel: error: {why}");
        return Ok(ExitStatus::NotFound);
    }
    let (dir, summary) = execute(args)?;
    let status = output::finish_run(
        out,
        &dir,
        &summary,
        &args.output,
        args.console.view(),
        false,
    )?;
    let runs = read_runs(&dir);
    for run in &runs {
        if let Some(note) = run.no_readings_note() {
            eprintln!("memrel: {note}");
        }
        // Shown as it came, unless --quiet: then its last lines, here.
        if args.quiet && run.failed && !run.stderr_tail.is_empty() {
            eprintln!(
                "memrel: run {} ({}): the last lines the program wrote to stderr:\n{}",
                run.run,
                run.strategy,
                indented(&last_stderr_lines(&run.stderr_tail))
            );
        }
    }
    let failed_checks: Vec<String> = runs.iter().flat_map(|r| r.failed_checks()).collect();
    if status != ExitStatus::Success || failed_checks.is_empty() {
        return Ok(status);
    }
    for check in &failed_checks {
        eprintln!("memrel: error: {check}");
    }
    eprintln!(
        "memrel: error: {} check(s) failed: the runs did not measure what was asked (results kept in {})",
        failed_checks.len(),
        dir.display()
    );
    Ok(ExitStatus::Error)
}

/// What `exec` tells of a run once it is over (from runs.json).
struct RunEnd {
    run: u64,
    strategy: String,
    failed: bool,
    stderr_tail: String,
    /// (name, detail) of each failed check.
    checks: Vec<(String, String)>,
    /// How long the program ran, in seconds (runs.json's `duration_s`).
    duration_s: Option<f64>,
    /// The run's rows in samples.csv and in events.csv.
    samples: usize,
    edges: usize,
}

impl RunEnd {
    /// Says why a run has nothing to show, where the program exited before
    /// memrel's first reading of it (`/bin/true`): no sample, no phase edge.
    fn no_readings_note(&self) -> Option<String> {
        // A run that failed (a program that could not start) has its error.
        if self.failed || self.samples > 0 || self.edges > 0 {
            return None;
        }
        let ran = self
            .duration_s
            .map(|s| format!("it ran {s:.3} s"))
            .unwrap_or_else(|| "it ran a moment".to_string());
        Some(format!(
            "run {} ({}): the program exited before memrel's first reading ({ran}), so the run has no \
             readings: give it work to measure, or mark phases (docs/guide.md, \"Phase markers\")",
            self.run, self.strategy
        ))
    }

    fn failed_checks(&self) -> Vec<String> {
        self.checks
            .iter()
            .map(|(name, detail)| {
                format!(
                    "run {} ({}): check '{name}' failed: {detail}",
                    self.run, self.strategy
                )
            })
            .collect()
    }
}

/// The runs of `dir`'s runs.json as `exec` reports them; none when it
/// cannot be read (the table above has already said what is known).
fn read_runs(dir: &std::path::Path) -> Vec<RunEnd> {
    let Ok(text) = std::fs::read_to_string(dir.join(crate::record::RUNS_FILE)) else {
        return Vec::new();
    };
    let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Vec::new();
    };
    let text_of = |v: &serde_json::Value, key: &str| v[key].as_str().unwrap_or("").to_string();
    let samples = rows_per_run(&dir.join(crate::record::SAMPLES_FILE));
    let edges = rows_per_run(&dir.join(crate::record::EVENTS_FILE));
    value["runs"]
        .as_array()
        .map(|runs| {
            runs.iter()
                .map(|r| RunEnd {
                    run: r["run"].as_u64().unwrap_or(0),
                    duration_s: r["duration_s"].as_f64(),
                    samples: r["run"]
                        .as_u64()
                        .and_then(|run| samples.get(&run).copied())
                        .unwrap_or(0),
                    edges: r["run"]
                        .as_u64()
                        .and_then(|run| edges.get(&run).copied())
                        .unwrap_or(0),
                    strategy: text_of(r, "strategy"),
                    failed: r["status"].as_str().is_some_and(|s| s != "completed"),
                    stderr_tail: text_of(r, "stderr_tail"),
                    checks: r["checks"]
                        .as_array()
                        .map(|checks| {
                            checks
                                .iter()
                                .filter(|c| c["ok"] == false)
                                .map(|c| (text_of(c, "name"), text_of(c, "detail")))
                                .collect()
                        })
                        .unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// How many rows each run has in a record's CSV file (its `run` column,
/// second after `t_s`, before any quoted text); none where it cannot be read.
fn rows_per_run(path: &std::path::Path) -> std::collections::HashMap<u64, usize> {
    let mut rows = std::collections::HashMap::new();
    let Ok(text) = std::fs::read_to_string(path) else {
        return rows;
    };
    for line in text.lines().skip(1) {
        if let Some(run) = line.split(',').nth(1).and_then(|r| r.parse().ok()) {
            *rows.entry(run).or_insert(0) += 1;
        }
    }
    rows
}

/// Why `program` (the first word after `--`) cannot be run, the way a shell
/// looks for it: a name with a `/` is a path (from `cwd`), any other is
/// looked for in the directories of `PATH`. `None`: it is there.
fn missing_program(program: &str, cwd: &std::path::Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |path: &std::path::Path| {
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let path = cwd.join(program);
        if runnable(&path) {
            return None;
        }
        let what = if path.exists() {
            "not an executable file"
        } else {
            "no such file"
        };
        return Some(format!(
            "cannot run {program:?}: {what}: check the path after `--` (from {})",
            cwd.display()
        ));
    }
    let path_var = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path_var).any(|dir| runnable(&cwd.join(dir).join(program))) {
        return None;
    }
    Some(format!(
        "cannot run {program:?}: command not found on PATH: check its name, install it, or \
         give its path after `--`"
    ))
}

/// `lines`, indented, one per line.
fn indented(lines: &[&str]) -> String {
    lines
        .iter()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The runs; returns the results directory and summary.
fn execute(args: &ExecArgs) -> Result<(PathBuf, Summary)> {
    let text = scenario_text(args)?;
    let scenario = scenario::parse_str(&args.name, "exec", &text)
        .with_context(|| format!("memrel exec {}", args.command.join(" ")))?;
    // The scenario text already holds the overrides; only the ones that are
    // not scenario keys remain.
    let rest = ScenarioOverrides {
        python: args.overrides.python.clone(),
        tree: args.overrides.tree,
        cgroup_parent: args.overrides.cgroup_parent.clone(),
        memory_limit: args.overrides.memory_limit.clone(),
        ..ScenarioOverrides::default()
    };
    let mut plan = Plan::new(scenario, &[], &rest, &args.output.out)?;
    plan.cwd = Some(std::env::current_dir().context("cannot read the current directory")?);
    plan.program_io = ProgramIo {
        stdin: true,
        show_output: !args.quiet,
    };
    check_output_args(&args.output)?;
    plan.execute(crate::plan::command_line())
}

/// The scenario `memrel exec` runs, as TOML.
fn scenario_text(args: &ExecArgs) -> Result<String> {
    let o = &args.overrides;
    let strategies = if args.strategies.is_empty() {
        vec!["drop".to_string()]
    } else {
        args.strategies.clone()
    };
    // Named here, the error names the flag (the scenario's parse would name
    // a line of the TOML written below, which the user never saw).
    for name in &strategies {
        crate::strategy::lookup(name).map_err(|e| anyhow::anyhow!("--strategy: {e}"))?;
    }
    let mut table = toml::Table::new();
    table.insert(
        "description".into(),
        format!("memrel exec -- {}", args.command.join(" ")).into(),
    );
    table.insert(
        "device".into(),
        o.device.clone().unwrap_or_else(|| "cpu".into()).into(),
    );
    table.insert("cycles".into(), i64::from(o.cycles.unwrap_or(1)).into());
    table.insert("repeat".into(), i64::from(o.repeat.unwrap_or(1)).into());
    table.insert("strategies".into(), strategies.into());
    table.insert("interval_ms".into(), o.interval_ms.unwrap_or(10.0).into());
    table.insert("timeout_s".into(), args.timeout_s.into());
    table.insert("command".into(), args.command.clone().into());
    if !args.model_files.is_empty() {
        // Checked here, each named by the flag; kept absolute in the
        // scenario text, so that `check` re-runs it from anywhere.
        crate::model::files::model_files(&args.model_files)?;
        let files: Result<Vec<String>> = args
            .model_files
            .iter()
            .map(|f| {
                std::fs::canonicalize(f)
                    .map(|f| f.display().to_string())
                    .with_context(|| format!("--model-files {}: cannot be resolved", f.display()))
            })
            .collect();
        table.insert("model_files".into(), files?.into());
    }
    toml::to_string(&table).context("cannot write the scenario of memrel exec")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stderr_shown_is_its_last_lines_and_failed_checks_are_named() {
        let tail: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        let shown = indented(&last_stderr_lines(&tail));
        assert_eq!(shown.lines().count(), 20);
        assert!(
            shown.starts_with("  line 11\n") && shown.ends_with("  line 30"),
            "{shown}"
        );
        assert_eq!(indented(&last_stderr_lines("one")), "  one");

        let dir = tempfile::tempdir().expect("tempdir");
        let runs = serde_json::json!({"runs": [{
            "run": 1, "strategy": "drop", "status": "completed", "stderr_tail": "",
            "checks": [
                {"name": "vram sampler (nvml)", "ok": false, "detail": "no driver"},
                {"name": "glibc", "ok": true, "detail": "fine"}
            ]
        }]});
        std::fs::write(dir.path().join(crate::record::RUNS_FILE), runs.to_string())
            .expect("write runs.json");
        let read = read_runs(dir.path());
        assert_eq!(read.len(), 1);
        assert!(!read[0].failed);
        assert_eq!(
            read[0].failed_checks(),
            ["run 1 (drop): check 'vram sampler (nvml)' failed: no driver"]
        );
    }
}
