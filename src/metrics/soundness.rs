//! Which runs of a summary are sound evidence: a run that failed, timed
//! out, was killed or measured fewer cycles than asked for is broken. One
//! rule, read by the gate (which reports or leaves out broken runs) and by
//! a baseline's save (which refuses them), so neither imports the other.

use super::{RunSummary, Summary};
use crate::record::RunStatus;

/// Why one run's evidence is broken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    /// The run's status as runs.json spells it, or `incomplete`.
    pub status: String,
    /// The run's error, or how many cycles it measured.
    pub why: String,
}

impl Summary {
    /// Why `run` (one of this summary's runs) is broken; `None` when it is
    /// complete.
    pub fn broken(&self, run: &RunSummary) -> Option<Broken> {
        if run.status != RunStatus::Completed {
            let why = run
                .error
                .clone()
                .unwrap_or_else(|| "no error recorded (see runs.json)".to_string());
            return Some(Broken {
                status: status_name(run.status),
                why,
            });
        }
        let expected = self.cycles_per_run(&run.strategy)?;
        let measured = run.cycles.len() as u32;
        (measured < expected).then(|| Broken {
            status: "incomplete".to_string(),
            why: format!("measured {measured} of {expected} cycles"),
        })
    }

    /// Every run that failed, timed out, was killed or measured fewer
    /// cycles than asked for, in the summary's order, with why.
    pub fn broken_runs(&self) -> Vec<(&RunSummary, Broken)> {
        self.runs
            .iter()
            .filter_map(|run| Some((run, self.broken(run)?)))
            .collect()
    }

    /// Cycles each run of `strategy` was asked for.
    fn cycles_per_run(&self, strategy: &str) -> Option<u32> {
        self.strategies
            .iter()
            .find(|s| s.strategy == strategy && s.runs > 0)
            .map(|s| s.cycles_expected / s.runs)
    }
}

/// The run's status as runs.json spells it.
fn status_name(status: RunStatus) -> String {
    serde_json::to_value(status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{status:?}"))
}
