//! `memrel exec -- CMD ARGS...`: a program measured like a scenario. The
//! options become a scenario file's text (kept in runs.json, so `report` and
//! `check` treat the results like any others), parsed by the one scenario
//! parser, and run by the [`Plan`].

use std::io::Write;

use anyhow::{Context, Result};

use super::{output, ExitStatus};
use crate::cli::ExecArgs;
use crate::metrics::measured::Measured;
use crate::plan::Plan;
use crate::record::{RunRecord, RunStatus};
use crate::results::check_output_args;
use crate::scenario::{self, DeviceSpec, Overrides};
use crate::textutil::last_stderr_lines;
use crate::worker::command::ProgramIo;

/// `memrel exec` as the arguments ask: runs, prints the table and where the
/// results went to `out`, and says how the runs ended.
pub fn run(args: &ExecArgs, out: &mut dyn Write) -> Result<ExitStatus> {
    if let Some(why) = program_missing(args)? {
        // Said once, before anything runs, with a shell's exit code.
        eprintln!("memrel: error: {why}");
        return Ok(ExitStatus::NotFound);
    }
    let plan = options(args)?;
    let measured = plan.execute(crate::plan::command_line())?;
    let status = output::finish_run(
        out,
        &measured,
        &args.output,
        output::view(args.console),
        false,
    )?;
    Ok(tell_run_ends(&measured, args.quiet, status))
}

/// Why the program after `--` cannot be run, if it cannot.
fn program_missing(args: &ExecArgs) -> Result<Option<String>> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    Ok(args
        .command
        .first()
        .and_then(|program| missing_program(program, &cwd)))
}

/// Says on stderr what each run of `measured` left unmeasured (no
/// readings, its stderr under `--quiet`) and which checks failed; the exit
/// status: `status`, or an error where a check failed.
fn tell_run_ends(measured: &Measured, quiet: bool, status: ExitStatus) -> ExitStatus {
    let runs: Vec<RunEnd> = measured.record.runs.iter().map(RunEnd::of).collect();
    for run in &runs {
        if let Some(note) = run.no_readings_note() {
            eprintln!("memrel: {note}");
        }
        // Shown as it came, unless --quiet: then its last lines, here.
        if quiet && run.failed && !run.stderr_tail.is_empty() {
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
        return status;
    }
    for check in &failed_checks {
        eprintln!("memrel: error: {check}");
    }
    eprintln!(
        "memrel: error: {} check(s) failed: the runs did not measure what was asked (results kept in {})",
        failed_checks.len(),
        measured.dir.display()
    );
    ExitStatus::Error
}

/// What `exec` tells of a run once it is over (from the run's record).
struct RunEnd {
    run: u32,
    strategy: String,
    failed: bool,
    stderr_tail: String,
    /// (name, detail) of each failed check.
    checks: Vec<(String, String)>,
    /// How long the program ran, in seconds.
    duration_s: f64,
    /// Whether the run has a sample or a phase edge.
    read: bool,
}

impl RunEnd {
    /// What `run` tells of itself.
    fn of(run: &RunRecord) -> RunEnd {
        let meta = &run.meta;
        RunEnd {
            run: meta.run,
            strategy: meta.strategy.clone(),
            failed: meta.status != RunStatus::Completed,
            stderr_tail: meta.stderr_tail.clone(),
            checks: meta
                .checks
                .iter()
                .filter(|c| !c.ok)
                .map(|c| (c.name.clone(), c.detail.clone()))
                .collect(),
            duration_s: meta.duration_s,
            read: !run.samples.is_empty() || !run.events.is_empty(),
        }
    }

    /// Says why a run has nothing to show, where the program exited before
    /// memrel's first reading of it (`/bin/true`): no sample, no phase edge.
    fn no_readings_note(&self) -> Option<String> {
        // A run that failed (a program that could not start) has its error.
        if self.failed || self.read {
            return None;
        }
        Some(format!(
            "run {} ({}): the program exited before memrel's first reading (it ran {:.3} s), so the run has no \
             readings: give it work to measure, or mark phases (docs/guide.md, \"Phase markers\")",
            self.run, self.strategy, self.duration_s
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

/// The runs to make: the scenario the options write, run from the
/// current directory, the program reading memrel's stdin.
fn options(args: &ExecArgs) -> Result<Plan> {
    let text = scenario_text(args)?;
    let scenario = scenario::parse_str(&args.name, "exec", &text)
        .with_context(|| format!("memrel exec {}", args.command.join(" ")))?;
    // The scenario text already holds the overrides; only the ones that are
    // not scenario keys remain.
    let rest = Overrides {
        python: args.overrides.python.clone(),
        tree: args.overrides.tree,
        cgroup_parent: args.overrides.cgroup_parent.clone(),
        memory_limit: args.overrides.memory_limit.clone(),
        ..Overrides::default()
    };
    let mut plan = Plan::new(scenario, &[], &rest, &args.output.out)?;
    plan.cwd = Some(std::env::current_dir().context("cannot read the current directory")?);
    plan.program_io = ProgramIo {
        stdin: true,
        show_output: !args.quiet,
    };
    plan.trace_allocations(args.trace_allocations)?;
    check_output_args(&args.output)?;
    Ok(plan)
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
        o.device.unwrap_or(DeviceSpec::Cpu).to_string().into(),
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

        let mut run = crate::record::fixture::run(1, "drop", 1, &[1]);
        run.meta.checks = vec![
            crate::protocol::Check {
                name: "vram sampler (nvml)".into(),
                ok: false,
                detail: "no driver".into(),
            },
            crate::protocol::Check {
                name: "glibc".into(),
                ok: true,
                detail: "fine".into(),
            },
        ];
        let read = [RunEnd::of(&run)];
        assert_eq!(read.len(), 1);
        assert!(!read[0].failed);
        assert_eq!(
            read[0].failed_checks(),
            ["run 1 (drop): check 'vram sampler (nvml)' failed: no driver"]
        );
    }
}
