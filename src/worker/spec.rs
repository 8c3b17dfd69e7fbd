//! What the parent tells a worker to do: one JSON argument, built by the
//! orchestrator from the scenario and the resolved models.

use serde::{Deserialize, Serialize};

use crate::model::spec::FakeModel;
use crate::model::ModelDir;
use crate::protocol::Resume;
use crate::scenario::{DeviceSpec, Workload};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WorkerSpec {
    pub strategy: String,
    pub device: DeviceSpec,
    pub cycles: u32,
    /// (scenario model id, resolved directory), ordered by model id.
    pub models: Vec<(String, ModelDir)>,
    /// The fake worker's models (scenario id, bytes); when set, `models` is empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fakes: Vec<(String, FakeModel)>,
    pub workload: Workload,
    /// Set for a process that takes over from one that ended at a release
    /// step (`respawn`): no warm-up or baseline, it ends that release and goes on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<Resume>,
}
