//! What a baseline entry covers (its strategies and measured resources),
//! and the facts `memrel baseline list|show` print about it: the runs,
//! cycles, when, on which machine, by which command. Read from the entry's
//! record, never from its summary.json (which a hand edit could leave
//! stale). Decides nothing.

use crate::metrics::ResourceFacts;
use crate::metrics::{Resource, Summary};
use crate::record::Record;

/// The strategies and resources a record's runs measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Coverage {
    pub strategies: Vec<String>,
    pub resources: Vec<Resource>,
}

impl Coverage {
    pub fn of(summary: &Summary) -> Coverage {
        Coverage {
            strategies: summary
                .strategies
                .iter()
                .map(|s| s.strategy.clone())
                .collect(),
            resources: summary.resources.clone(),
        }
    }

    /// What `self` covers and `new` does not, as people read it
    /// (`strategy malloc-trim`, `resource VRAM cuda:0`).
    pub fn dropped_by(&self, new: &Coverage) -> Vec<String> {
        let strategies = self
            .strategies
            .iter()
            .filter(|s| !new.strategies.contains(s))
            .map(|s| format!("strategy {s}"));
        let resources = self
            .resources
            .iter()
            .filter(|r| !new.resources.contains(r))
            .map(|r| format!("resource {}", r.label()));
        strategies.chain(resources).collect()
    }
}

/// One entry of a baseline, for `memrel baseline list|show`.
#[derive(Debug, Clone)]
pub struct EntrySummary {
    pub scenario: String,
    pub coverage: Coverage,
    /// Runs per strategy, in the coverage's order.
    pub runs: Vec<u32>,
    pub cycles: u32,
    pub device: String,
    pub created_unix_s: u64,
    pub memrel_version: String,
    /// The command line that made it.
    pub command: Vec<String>,
    /// The machine's facts as `check` compares them (`glibc`, `2.36`).
    pub machine: Vec<(String, String)>,
}

impl EntrySummary {
    pub fn of(record: &Record, summary: &Summary) -> EntrySummary {
        EntrySummary {
            scenario: record.header.scenario.clone(),
            coverage: Coverage::of(summary),
            runs: summary.strategies.iter().map(|s| s.runs).collect(),
            cycles: record.header.cycles,
            device: record.header.device.clone(),
            created_unix_s: record.header.created_unix_s,
            memrel_version: record.header.memrel_version.clone(),
            command: record.header.command.clone(),
            machine: crate::machine::facts::facts_of(&record.header.host),
        }
    }
}
