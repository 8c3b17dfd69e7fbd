//! The record header of an attached measurement: a scenario text like the
//! one `memrel exec` writes (so `report`, `compare` and `check` read the
//! directory like any other), parsed by the one scenario parser, and the
//! `attached` block that says memrel did not start the process.

use anyhow::{Context, Result};

use super::target::Target;
use crate::fsutil::now_unix_s;
use crate::record::{Attached, Header, SCHEMA_VERSION};
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
}

impl Setup<'_> {
    /// The scenario an attached run is recorded as (its text in the header);
    /// `cycles` as the marks numbered them.
    pub fn scenario(&self, cycles: u32) -> Result<Scenario> {
        let mut table = toml::Table::new();
        table.insert(
            "description".into(),
            format!(
                "memrel attach {} ({})",
                self.target.pid,
                self.target.argv.join(" ")
            )
            .into(),
        );
        table.insert("device".into(), self.device.to_string().into());
        table.insert("cycles".into(), i64::from(cycles.max(1)).into());
        table.insert("repeat".into(), 1.into());
        table.insert("strategies".into(), vec![STRATEGY.to_string()].into());
        table.insert("interval_ms".into(), self.interval_ms.into());
        table.insert(
            "timeout_s".into(),
            self.duration_s.unwrap_or(86_400.0).max(1.0).into(),
        );
        table.insert("command".into(), self.target.argv.clone().into());
        let text = toml::to_string(&table).context("cannot write the scenario of memrel attach")?;
        scenario::parse_str(self.name, "attach", &text)
            .with_context(|| format!("memrel attach {}", self.target.pid))
    }

    /// The header, before anything is measured.
    pub fn header(&self) -> Result<Header> {
        let scenario = self.scenario(1)?;
        Ok(Header {
            schema_version: SCHEMA_VERSION,
            memrel_version: env!("CARGO_PKG_VERSION").to_string(),
            memrel_commit: Some(crate::build_info::COMMIT.to_string()),
            scenario: scenario.name.clone(),
            scenario_origin: scenario.origin.clone(),
            scenario_toml: scenario.toml_text.clone(),
            device: scenario.device.to_string(),
            command: self.command_line.clone(),
            created_unix_s: now_unix_s(),
            host: crate::host::describe(),
            sampler: "procfs-statm".to_string(),
            interval_s: self.interval_ms / 1e3,
            cycles: 1,
            retention_threshold_bytes: scenario.thresholds.retention_threshold_bytes,
            models: Vec::new(),
            program: None,
            page_cache: None,
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
            probed: crate::sampler::resources::probed(),
        })
    }
}
