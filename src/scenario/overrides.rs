//! What a command line changes in a scenario before it runs (`--cycles`,
//! `--device`, …), as typed values: the flags (`cli::ScenarioOverrides`)
//! are parsed and range-checked by the argument parser, and the runner
//! (`plan`) takes this, never a clap struct. It must not read files or
//! run anything; applying an override is setting a field.

use std::path::PathBuf;

use super::{check_devices, DeviceSpec, Scenario};

/// A scenario's settings a command line overrides; `None` (or empty, or
/// false): the scenario's own.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// Cycles per worker process (1 or more).
    pub cycles: Option<u32>,
    /// Worker processes per strategy (1 or more).
    pub repeat: Option<u32>,
    /// Sampling interval in milliseconds (1 to 10000).
    pub interval_ms: Option<f64>,
    pub device: Option<DeviceSpec>,
    /// GPUs the runs are spread over in parallel.
    pub devices: Option<Vec<u32>>,
    /// The Python interpreter for a program started as python3 or python.
    pub python: Option<String>,
    /// Sample a program's whole process tree.
    pub tree: bool,
    /// `--cgroup-parent`: each worker its own cgroup under this directory.
    pub cgroup_parent: Option<PathBuf>,
    /// `--memory-limit` as given (`512M`, `2G`), parsed by `cgroup::setup`.
    pub memory_limit: Option<String>,
}

impl Overrides {
    /// Sets the scenario's device, GPUs, cycles, repeat and interval where
    /// given; a `devices` list that cannot spread runs on the device is an
    /// error naming `--devices`.
    pub fn apply(&self, scenario: &mut Scenario) -> Result<(), String> {
        if let Some(device) = self.device {
            scenario.device = device;
        }
        if let Some(devices) = &self.devices {
            scenario.devices = devices.clone();
            check_devices(devices, scenario.device).map_err(|e| format!("--devices: {e}"))?;
        }
        if let Some(&first) = scenario.devices.first() {
            // The record's device names every GPU; each run names its own.
            scenario.device = DeviceSpec::Cuda(first as usize);
        }
        if let Some(cycles) = self.cycles {
            scenario.cycles = cycles;
        }
        if let Some(repeat) = self.repeat {
            scenario.repeat = repeat;
        }
        if let Some(ms) = self.interval_ms {
            scenario.interval_ms = ms;
        }
        Ok(())
    }
}
