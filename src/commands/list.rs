//! `memrel list`: built-in scenarios, strategies (with `--long`, why each one
//! works or not) and model presets.

use std::fmt::Write;

use anyhow::Result;

use super::ExitStatus;
use crate::cli::ListArgs;
use crate::model::preset::PRESETS;
use crate::scenario::{self, BUILTINS};
use crate::strategy;
use crate::textutil::MIB;

/// What a strategy does in a measured program (`memrel exec`), in one line.
fn for_programs(s: &strategy::Strategy) -> String {
    match (s.for_candle(), s.for_programs()) {
        (_, Err(why)) => format!("programs: not available ({why})"),
        (candle, Ok(a)) => {
            let mut steps = Vec::new();
            if !a.start.is_empty() {
                steps.push(format!("at import memrel: {}", a.start.join(", ")));
            }
            if !a.release.is_empty() {
                steps.push(format!("in memrel.release(): {}", a.release.join(", ")));
            }
            if steps.is_empty() {
                steps.push("the environment only".into());
            }
            let who = if candle { "programs" } else { "programs only" };
            format!("{who}: {}", steps.join("; "))
        }
    }
}

/// `text` indented under a strategy's line, wrapped at 76 columns.
fn wrapped(out: &mut String, text: &str) {
    let mut line = String::new();
    for word in text.split_whitespace() {
        if line.len() + word.len() > 76 {
            let _ = writeln!(out, "      {line}");
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        let _ = writeln!(out, "      {line}");
    }
}

/// `memrel list` (`--long`: with each strategy explained), printed to `out`.
pub fn run(args: &ListArgs, out: &mut dyn std::io::Write) -> Result<ExitStatus> {
    out.write_all(render(args.long).as_bytes())?;
    Ok(ExitStatus::Success)
}

/// The listing as text.
fn render(long: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "scenarios (memrel run --scenario NAME, or a path to your own TOML):"
    );
    for (name, _) in BUILTINS {
        let description = scenario::load(name)
            .map(|s| s.description)
            .unwrap_or_default();
        let _ = writeln!(out, "  {name:<22} {description}");
    }
    let _ = writeln!(
        out,
        "\nstrategies (memrel run --strategy NAME; for a program: memrel exec --strategy NAME; \
         NAME=VALUE for one that takes a value):"
    );
    for s in strategy::all() {
        let _ = writeln!(out, "  {:<21} [{}] {}", s.name, s.device, s.summary);
        if long {
            wrapped(&mut out, s.explanation);
            if let (Some(library), Some(package)) =
                (s.allocator.library(), s.allocator.debian_package())
            {
                let _ = writeln!(
                    out,
                    "      preloads: {library} (Debian/Ubuntu package {package})"
                );
            }
            if let Some(p) = s.param {
                let takes = format!(
                    "takes: {}={} ({}; {} alone means {}), e.g. --strategy {}={}",
                    s.name, p.name, p.about, s.name, p.default, s.name, p.example
                );
                wrapped(&mut out, &takes);
            }
            for (k, v) in s.env {
                let _ = writeln!(out, "      environment: {k}={v}");
            }
            for (k, v) in s.expect {
                let _ = writeln!(out, "      checks: {} reads {k} = {v}", s.allocator.name());
            }
            if s.needs_glibc {
                let _ = writeln!(out, "      needs glibc");
            }
            let _ = writeln!(out, "      {}", for_programs(s));
            let _ = writeln!(out);
        }
    }
    let _ = writeln!(
        out,
        "\nmodel presets (scenario: [models.x] preset = \"NAME\"; memrel model gen NAME DIR):"
    );
    for p in PRESETS {
        let _ = writeln!(
            out,
            "  {:<13} {:<7} {:>7.1} MiB  {}",
            p.name,
            p.architecture.as_str(),
            p.tensor_bytes() as f64 / MIB,
            p.summary
        );
    }
    out
}
