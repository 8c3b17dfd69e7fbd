//! What the record keeps of the container's view: which cgroup the
//! `container` resource is (per invocation, in the header), one reading per
//! sample ([`ContainerSample`], which the sampler's probe reads) and each
//! run's full counter sets (in runs.json), or why they could not be read.

use serde::{Deserialize, Serialize};

use super::limit::LimitKind;
use super::{Counters, Version};

/// The container's view in one sample: the cgroup the worker runs in (the
/// whole cgroup's, memrel included, unless each worker has its own under
/// `--cgroup-parent`; see `cgroup`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ContainerSample {
    /// usage − inactive_file, Kubernetes' working set: the resource's value.
    pub working_set_bytes: u64,
    /// memory.current (v2) or memory.usage_in_bytes (v1).
    pub usage_bytes: u64,
    /// memory.stat anon and file (v1: total_rss and total_cache), as of the
    /// latest memory.stat read (at most 100 ms old).
    pub anon_bytes: Option<u64>,
    pub file_bytes: Option<u64>,
}

/// Whose memory the `container` resource counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The cgroup memrel and its workers run in: every process in it, memrel
    /// itself included, counts.
    WholeCgroup,
    /// Each worker's own cgroup under `--cgroup-parent`: the worker alone.
    Worker,
}

/// The container resource of an invocation (runs.json's header).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContainerView {
    pub scope: Scope,
    /// The cgroup (whole) or the delegated parent (worker).
    pub dir: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<Version>,
    /// Why its counters cannot be read; the container columns say "not
    /// available" with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// `--memory-limit`, in bytes, and how it was applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<LimitKind>,
}

/// One run's cgroup (runs.json, per run): every counter as the run started
/// and as it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CgroupRun {
    /// The cgroup's directory (empty: none could be found).
    pub dir: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<Version>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_start: Option<Counters>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_end: Option<Counters>,
    /// Why a reading is missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Processes in the cgroup that were neither memrel nor the measured
    /// tree, counted as the process started (`cgroup::others`): where there
    /// are any, the cgroup is shared and its lane is context only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_processes: Option<u32>,
}
