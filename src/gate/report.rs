//! The verdict schema: what verdict.json holds and verdict.md shows. Types
//! and their names only; nothing here judges or reads a record.

use crate::metrics::ResourceFacts;
use serde::{Deserialize, Serialize};

use super::machine::OtherMachine;
use super::metric::{Judged, Per, Statistic};
use crate::machine::facts::MachineDifference;
use crate::metrics::catalogue::MemoryMetric;
use crate::metrics::Resource;

/// Bumped when verdict.json changes shape (2: rows name their resource, say
/// what one observation is, and budget rows carry their scenario key;
/// 3: rows report means (`baseline_value`, `new_value`, `statistic`) instead
/// of medians, the `retention_rate` rows carry their counts and p-value, the
/// `error` verdict, and the report lists `errors` and `broken_runs`;
/// 4: a budget row's `metric` is the metric's own name, no longer with
/// ` (budget)` appended (the row's `budget` says it is one), and a budget
/// nothing could be checked against says why in `budget.unchecked`;
/// 5: the report lists its coverage `gaps`, what one side covers and the
/// other does not judge, and `machine_differences`, the facts of the
/// machine that differ from the baseline's;
/// 6: a broken run carries the last lines its program wrote to stderr,
/// `stderr_tail`; 7: the report lists `other_machines`, scenarios whose
/// baseline was made on another kind of machine, and `any_machine`).
pub const VERDICT_SCHEMA_VERSION: u32 = 7;

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Regressed,
    Improved,
    NoChange,
    Inconclusive,
    /// An absolute budget from the scenario was exceeded.
    OverBudget,
    /// The baseline has no entry for this scenario × strategy (lenient mode).
    Skipped,
    /// The evidence cannot be judged (a budget with no observation, a
    /// strategy with no complete run): `memrel check` exits 2.
    Error,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Regressed => "regressed",
            Verdict::Improved => "improved",
            Verdict::NoChange => "no-change",
            Verdict::Inconclusive => "inconclusive",
            Verdict::OverBudget => "over-budget",
            Verdict::Skipped => "skipped",
            Verdict::Error => "error",
        }
    }

    /// A regression: exit 1.
    pub fn fails(self) -> bool {
        matches!(self, Verdict::Regressed | Verdict::OverBudget)
    }
}

/// The scenario's budget a row was checked against, in the metric's unit.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BudgetCheck {
    /// The `[thresholds]` key of the scenario file, e.g. `max_retained_vram_mib`.
    pub key: String,
    pub limit: f64,
    /// The worst run's value (`None`: nothing to check).
    pub worst: Option<f64>,
    /// Why the budget could not be checked (the row is then an `error`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unchecked: Option<String>,
}

/// The counts behind a `retention_rate` row.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RateTest {
    /// Retaining cycles on each side (out of `baseline_n` and `new_n`).
    pub baseline_retaining: u64,
    pub new_retaining: u64,
    /// Runs with a retaining cycle on each side.
    pub baseline_runs_retaining: usize,
    pub new_runs_retaining: usize,
    /// Fisher's exact test, two-sided.
    pub p_value: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MetricVerdict {
    pub scenario: String,
    pub strategy: String,
    /// `host` or `cuda:N`.
    pub resource: Resource,
    pub metric: MemoryMetric,
    /// What one observation is: a run, or a timed cycle of a run.
    pub per: Per,
    /// What `baseline_value` and `new_value` are.
    pub statistic: Statistic,
    pub verdict: Verdict,
    pub baseline_value: Option<f64>,
    pub new_value: Option<f64>,
    /// new_value − baseline_value.
    pub change: Option<f64>,
    /// 95 % interval of the change (new − baseline).
    pub interval: Option<(f64, f64)>,
    pub noise_band: Option<f64>,
    /// Observations on each side.
    pub baseline_n: usize,
    pub new_n: usize,
    /// Runs that gave those observations.
    pub baseline_runs: usize,
    pub new_runs: usize,
    /// Set on the rows of absolute budgets (and only on them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetCheck>,
    /// Set on the `retention_rate` rows that were tested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<RateTest>,
    pub note: String,
}

/// Which side of the comparison a run belongs to.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Side {
    Baseline,
    New,
}

impl Side {
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Baseline => "baseline",
            Side::New => "new",
        }
    }
}

/// Something one side covers and the other does not judge.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CoverageGap {
    pub scenario: String,
    /// `None`: the whole scenario.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    /// `None`: every resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<Resource>,
    /// `None`: every metric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<MemoryMetric>,
    /// The side that lacks it.
    pub missing_in: Side,
    /// What is missing, where, and how to fix it.
    pub why: String,
}

impl std::fmt::Display for CoverageGap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "scenario {}", self.scenario)?;
        if let Some(s) = &self.strategy {
            write!(f, ", strategy {s}")?;
        }
        if let Some(r) = self.resource {
            write!(f, ", {}", r.label())?;
        }
        if let Some(m) = self.metric {
            write!(f, ", {}", m.human())?;
        }
        write!(
            f,
            ": missing in the {}: {}",
            side_name(self.missing_in),
            self.why
        )
    }
}

fn side_name(side: Side) -> &'static str {
    match side {
        Side::Baseline => "baseline",
        Side::New => "new results",
    }
}

/// A run whose evidence is broken: it failed, timed out, was killed, or
/// measured fewer cycles than asked for.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BrokenRun {
    pub scenario: String,
    pub side: Side,
    pub run: u32,
    pub strategy: String,
    pub repetition: u32,
    /// The run's status as runs.json writes it (`failed`, `timed_out`, …),
    /// or `incomplete` for a completed run that measured too few cycles.
    pub status: String,
    /// Its error, or what is missing.
    pub why: String,
    /// The last lines ([`crate::textutil::STDERR_LINES`] at most) the run's program wrote
    /// to stderr, where it wrote any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stderr_tail: String,
}

impl BrokenRun {
    /// The stderr tail as lines under the run's line (indented by
    /// `indent`), or nothing when the run wrote none.
    pub fn stderr_lines(&self, indent: &str) -> String {
        if self.stderr_tail.trim().is_empty() {
            return String::new();
        }
        let mut out = format!("\n{indent}its stderr ended:");
        for line in self.stderr_tail.lines() {
            out.push_str(&format!("\n{indent}    {line}"));
        }
        out
    }
}

impl std::fmt::Display for BrokenRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "scenario {}, {} run {} ({} repetition {}): {}: {}",
            self.scenario,
            self.side.as_str(),
            self.run,
            self.strategy,
            self.repetition,
            self.status,
            self.why
        )
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct VerdictReport {
    pub schema_version: u32,
    pub baseline: String,
    /// A regression or a blown budget: exit 1.
    pub regressed: bool,
    /// Why the evidence cannot be judged: exit 2 when any (takes precedence).
    #[serde(default)]
    pub errors: Vec<String>,
    /// What one side covers and the other does not judge (each is also an error).
    #[serde(default)]
    pub gaps: Vec<CoverageGap>,
    /// Runs of either side that failed, timed out, were killed or are incomplete.
    #[serde(default)]
    pub broken_runs: Vec<BrokenRun>,
    /// `--complete-runs-only`: the broken runs were left out and the rest judged.
    #[serde(default)]
    pub complete_runs_only: bool,
    pub verdicts: Vec<MetricVerdict>,
    pub warnings: Vec<String>,
    /// The machine facts that differ from the baseline's (never the hostname).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub machine_differences: Vec<MachineDifference>,
    /// Scenarios whose baseline was made on another kind of machine (each
    /// an error, exit 2, unless `any_machine`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_machines: Vec<OtherMachine>,
    /// `--any-machine`: judged across machines; every row of such a scenario says so.
    #[serde(default)]
    pub any_machine: bool,
    /// Per scenario compared, the command that makes its baseline entry
    /// again from the new results' configuration (`hint::Hint`): how to
    /// accept an intended change.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remake: Vec<Remake>,
}

/// The command that re-makes a scenario's baseline entry.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Remake {
    pub scenario: String,
    pub command: String,
}

impl MetricVerdict {
    /// A `skipped` row with nothing measured, to be filled in.
    pub(super) fn blank(
        scenario: &str,
        strategy: &str,
        resource: Resource,
        metric: MemoryMetric,
    ) -> MetricVerdict {
        MetricVerdict {
            scenario: scenario.to_string(),
            strategy: strategy.to_string(),
            resource,
            metric,
            per: metric.per(),
            statistic: metric.statistic(),
            verdict: Verdict::Skipped,
            baseline_value: None,
            new_value: None,
            change: None,
            interval: None,
            noise_band: None,
            baseline_n: 0,
            new_n: 0,
            baseline_runs: 0,
            new_runs: 0,
            budget: None,
            rate: None,
            note: String::new(),
        }
    }
}
