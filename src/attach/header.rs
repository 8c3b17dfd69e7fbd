//! The record header of an attached measurement: a scenario text like the
//! one `memrel exec` writes (so `report`, `compare` and `check` read the
//! directory like any other), parsed by the one scenario parser, and the
//! `attached` block that says memrel did not start the process. Its budgets
//! (`--budget KEY=VALUE`, a cycle file's `[thresholds]`) are the scenario's
//! `[thresholds]` keys, checked by the scenario parser and kept in that text,
//! so `memrel check` judges them as it judges a run's.

use std::path::Path;

use anyhow::{bail, Context, Result};

use super::target::Target;
use crate::fsutil::now_unix_s;
use crate::record::{Attached, Header};
use crate::scenario::{self, DeviceSpec, Scenario};

/// The strategy an attached run is recorded under: memrel gave the process
/// none, and `drop` is what `memrel exec` calls a program that only drops
/// its references.
pub const STRATEGY: &str = "drop";

/// What the header is made from.
pub struct Setup<'a> {
    pub name: &'a str,
    pub target: &'a Target,
    pub device: DeviceSpec,
    pub interval_ms: f64,
    pub duration_s: Option<f64>,
    pub tree: bool,
    pub log: Option<String>,
    pub command_line: Vec<String>,
    /// The model's files (`--model-files`): their page cache is read.
    pub model_files: Vec<std::path::PathBuf>,
    /// The scenario's `description`; `None`: `memrel attach PID (argv)`.
    pub description: Option<String>,
    /// `[thresholds]` keys and amounts (budgets), checked by [`budgets`].
    pub thresholds: Vec<(String, f64)>,
    /// The strategy this run is recorded under ([`STRATEGY`] where memrel
    /// gave the process none; a drive's `--strategy`).
    pub strategy: &'a str,
    /// Every strategy of the record this run joins (a drive's `--strategy`
    /// list); empty: `strategy` alone.
    pub strategies: Vec<String>,
}

impl<'a> Setup<'a> {
    /// What every attach and drive records, from their flags: `name`, the
    /// `target`, its `device`, the interval, the model files, the budgets
    /// and memrel's own `command_line`; the rest as `memrel attach` has it by
    /// default (the process's tree, until it ends, no log, recorded as
    /// [`STRATEGY`]), for the caller to change.
    pub fn new(
        name: &'a str,
        target: &'a Target,
        device: DeviceSpec,
        interval_ms: f64,
        model_files: Vec<std::path::PathBuf>,
        thresholds: Vec<(String, f64)>,
        command_line: Vec<String>,
    ) -> Setup<'a> {
        Setup {
            name,
            target,
            device,
            interval_ms,
            duration_s: None,
            tree: true,
            log: None,
            command_line,
            model_files,
            description: None,
            thresholds,
            strategy: STRATEGY,
            strategies: Vec::new(),
        }
    }

    /// The scenario an attached run is recorded as (its text in the header);
    /// `cycles` as the marks numbered them.
    pub fn scenario(&self, cycles: u32) -> Result<Scenario> {
        let mut table = toml::Table::new();
        let description = self.description.clone().unwrap_or_else(|| {
            format!(
                "memrel attach {} ({})",
                self.target.pid,
                self.target.argv.join(" ")
            )
        });
        table.insert("description".into(), description.into());
        table.insert("device".into(), self.device.to_string().into());
        table.insert("cycles".into(), i64::from(cycles.max(1)).into());
        table.insert("repeat".into(), 1.into());
        let strategies = if self.strategies.is_empty() {
            vec![self.strategy.to_string()]
        } else {
            self.strategies.clone()
        };
        // User-defined strategies travel with the record's scenario, so
        // reading it back defines them again.
        let defined: Vec<toml::Value> = strategies
            .iter()
            .filter_map(|name| crate::strategy::custom::definition(name))
            .filter_map(|d| toml::Value::try_from(d).ok())
            .collect();
        if !defined.is_empty() {
            table.insert("strategy".into(), defined.into());
        }
        table.insert("strategies".into(), strategies.into());
        table.insert("interval_ms".into(), self.interval_ms.into());
        table.insert(
            "timeout_s".into(),
            self.duration_s.unwrap_or(86_400.0).max(1.0).into(),
        );
        table.insert("command".into(), self.target.argv.clone().into());
        if !self.thresholds.is_empty() {
            let budgets: toml::Table = self
                .thresholds
                .iter()
                .map(|(key, amount)| (key.clone(), toml::Value::Float(*amount)))
                .collect();
            table.insert("thresholds".into(), budgets.into());
        }
        let text = toml::to_string(&table).context("cannot write the scenario of memrel attach")?;
        scenario::parse_str(self.name, "attach", &text)
            .with_context(|| format!("memrel attach {}", self.target.pid))
    }

    /// The header, before anything is measured.
    pub fn header(&self) -> Result<Header> {
        let scenario = self.scenario(1)?;
        Ok(Header {
            // The files named by --model-files: their page cache is a
            // resource of the record (its metrics, budgets and verdicts).
            page_cache: (!self.model_files.is_empty()).then(|| {
                let (_, method) = crate::sampler::page_cache::Method::choose(
                    self.model_files.first().map(|f| f.as_path()),
                );
                crate::record::PageCacheInfo {
                    method,
                    files: self
                        .model_files
                        .iter()
                        .map(|f| crate::record::WeightFile {
                            path: f.display().to_string(),
                            bytes: std::fs::metadata(f).map_or(0, |m| m.len()),
                        })
                        .collect(),
                    evicted_before_runs: false,
                    warmed_before_runs: false,
                }
            }),
            attached: Some(Attached {
                pid: self.target.pid,
                argv: self.target.argv.clone(),
                started_unix_s: self.target.started_unix_s,
                attached_unix_s: now_unix_s(),
                tree: self.tree,
                log: self.log.clone(),
                ended: String::new(),
            }),
            // The whole cgroup the process runs in (read only).
            container: Some(crate::cgroup::setup::whole_cgroup_of(self.target.pid)),
            ..scenario.header(
                scenario.device.to_string(),
                self.command_line.clone(),
                self.interval_ms / 1e3,
            )
        })
    }
}

/// The budgets of an attach or a drive: the `[thresholds]` table of `file`
/// (a cycle file; its other keys are not read here), then each `--budget
/// KEY=VALUE` of `flags` (a flag wins over the file's same key), each
/// checked by the scenario parser for `device`. An unknown key, an amount
/// that is not a number or out of range, a VRAM budget without `--device
/// cuda`: an error naming the flag or the file and the fix.
pub fn budgets(
    flags: &[String],
    file: Option<&Path>,
    device: DeviceSpec,
) -> Result<Vec<(String, f64)>> {
    let on_cpu = "this scenario runs on the cpu: remove it, or set device = \"cuda\"";
    let mut out: Vec<(String, f64)> = Vec::new();
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--cycle {}: cannot read it", path.display()))?;
        let origin = path.display().to_string();
        let pairs = scenario::thresholds_table(&origin, &text, device).map_err(|e| {
            anyhow::anyhow!(
                "--cycle {}",
                e.to_string().replace(
                    on_cpu,
                    "memrel reads host memory only: remove it, or pass --device cuda"
                )
            )
        })?;
        out.extend(pairs);
    }
    for flag in flags {
        let usage =
            "write it as KEY=VALUE, a [thresholds] budget key and its amount in the key's unit \
                     (MiB, MiB per cycle, ms), e.g. --budget max_retained_mib=64";
        let Some((key, value)) = flag.split_once('=') else {
            bail!("--budget {flag:?}: no `=`: {usage}");
        };
        let (key, value) = (key.trim(), value.trim());
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            bail!("--budget {flag:?}: {key:?} is not a budget key: {usage}");
        }
        let amount: f64 = match value.parse() {
            Ok(v) if f64::is_finite(v) => v,
            _ => bail!("--budget {flag:?}: {value:?} is not a number: {usage}"),
        };
        let text = format!("[thresholds]\n{key} = {amount:?}\n");
        let pairs = scenario::thresholds_table("--budget", &text, device).map_err(|e| {
            let why = match e {
                scenario::ScenarioError::Invalid { message, .. } => message,
                other => other.to_string(),
            };
            anyhow::anyhow!(
                "--budget {flag:?}: {}",
                why.replace(
                    on_cpu,
                    "memrel reads host memory only: remove it, or pass --device cuda"
                )
            )
        })?;
        for (key, amount) in pairs {
            out.retain(|(k, _)| *k != key);
            out.push((key, amount));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_flags_win_over_the_cycle_file_and_bad_ones_name_the_flag() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(
            &file,
            "[[request]]\nphase = \"load\"\npath = \"/l\"\n[thresholds]\nmax_retained_mib = 64\nmax_peak_mib = 900\n",
        )
        .unwrap();
        let flags = [
            "max_retained_mib=32".to_string(),
            "max_late_mib = 4".to_string(),
        ];
        let got = budgets(&flags, Some(&file), DeviceSpec::Cpu).unwrap();
        assert_eq!(
            got,
            [
                ("max_peak_mib".to_string(), 900.0),
                ("max_retained_mib".to_string(), 32.0),
                ("max_late_mib".to_string(), 4.0)
            ]
        );
        let err = |flag: &str| {
            budgets(&[flag.to_string()], None, DeviceSpec::Cpu)
                .unwrap_err()
                .to_string()
        };
        let e = err("max_peak_mib=-1");
        assert!(
            e.starts_with(
                "--budget \"max_peak_mib=-1\": [thresholds] max_peak_mib = -1 is out of range"
            ),
            "{e}"
        );
        assert!(err("Max=1").contains("\"Max\" is not a budget key"));
        assert!(err("max_peak_mib=inf").contains("\"inf\" is not a number"));
        assert!(err("max_peak_vram_mib=1").ends_with("remove it, or pass --device cuda"));
        assert!(budgets(
            &["max_peak_vram_mib=1".to_string()],
            None,
            DeviceSpec::Cuda(0)
        )
        .is_ok());
    }
}
