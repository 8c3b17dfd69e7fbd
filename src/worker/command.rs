//! The command worker: any program as a run's process (`memrel exec`, or a
//! scenario's `command`). The program runs in its scenario's directory with
//! the channel on `MEMREL_EVENT_FD` and the run's facts in `MEMREL_*`
//! variables; the `memrel` Python module (embedded here, put first on the
//! program's `PYTHONPATH`) speaks the protocol and carries out the strategy's
//! in-process steps.
//!
//! The parent does for a program what memrel's workers do for themselves:
//! it checks that the strategy's environment and allocator reached the
//! process (`/proc/PID/environ`, `/proc/PID/maps`) and numbers cycles where
//! the program leaves that out ([`CycleNumbering`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::protocol::{Check, Edge, Phase, PhaseEdge, CYCLE_UNSET, EVENT_FD, EVENT_FD_ENV};
use crate::scenario::DeviceSpec;
use crate::strategy::Strategy;

/// The `memrel` Python module, shipped inside the binary.
pub const PYTHON_MODULE: &str = include_str!("../../python/memrel/__init__.py");
/// Its `--trace-allocations` part (`memrel._trace`), imported only when asked.
pub const TRACE_MODULE: &str = include_str!("../../python/memrel/_trace.py");

/// Variables memrel gives a program (besides `MEMREL_EVENT_FD`).
pub const STRATEGY_ENV: &str = "MEMREL_STRATEGY";
pub const CYCLES_ENV: &str = "MEMREL_CYCLES";
pub const MODELS_ENV: &str = "MEMREL_MODELS";
pub const DEVICE_ENV: &str = "MEMREL_DEVICE";
/// The file the module writes the sites still holding memory into
/// (`--trace-allocations`; `memrel._trace`).
pub const TRACE_ALLOCATIONS_ENV: &str = "MEMREL_TRACE_ALLOCATIONS";

/// A program to run, as the plan resolved it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandSpec {
    /// Program and arguments; the program is looked up on `PATH` unless it has a `/`.
    pub argv: Vec<String>,
    /// Where it runs: the scenario file's directory, or memrel's for `exec`.
    pub cwd: PathBuf,
    /// (scenario model id, checkpoint directory), for `MEMREL_MODELS`.
    pub models: Vec<(String, PathBuf)>,
    pub device: DeviceSpec,
    pub cycles: u32,
    /// Where the `memrel` module was written, put first on `PYTHONPATH`.
    pub python_path: PathBuf,
    /// Sample the program's whole process tree (PSS), not only its own RSS.
    pub tree: bool,
    /// Its stdin and output (`memrel exec`'s; a scenario's program keeps none).
    #[serde(default)]
    pub io: ProgramIo,
    /// The model files whose page cache is read (`model_files`, resolved).
    #[serde(default)]
    pub model_files: Vec<PathBuf>,
    /// Where the module writes what tracemalloc saw still held
    /// (`--trace-allocations`): one file per run, set by the plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_allocations: Option<PathBuf>,
}

/// What a program gets of memrel's own stdin, stdout and stderr. Off (the
/// default, and always for memrel's workers): stdin is /dev/null and its
/// output is only captured, its tails kept in runs.json. `memrel exec`
/// passes its stdin through and shows the output live unless `--quiet`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramIo {
    /// The program reads memrel's stdin.
    pub stdin: bool,
    /// The program's stdout and stderr are copied to memrel's as they come.
    pub show_output: bool,
}

impl CommandSpec {
    /// The program's process, with memrel's variables for `strategy`.
    pub fn command(&self, strategy: &Strategy) -> Result<Command, String> {
        let actions = strategy.for_programs()?;
        let (program, args) = self
            .argv
            .split_first()
            .ok_or("the command is empty: name a program")?;
        let mut command = Command::new(program);
        command.args(args).current_dir(&self.cwd);
        let strategy_json = serde_json::json!({
            "name": strategy.name,
            "start": actions.start,
            "release": actions.release,
        });
        let models: serde_json::Map<String, serde_json::Value> = self
            .models
            .iter()
            .map(|(id, dir)| (id.clone(), dir.display().to_string().into()))
            .collect();
        command
            .env(STRATEGY_ENV, strategy_json.to_string())
            .env(CYCLES_ENV, self.cycles.to_string())
            .env(DEVICE_ENV, self.device.to_string());
        // `memrel exec` has no models of its own: the caller's MEMREL_MODELS
        // (if any) reaches the program as it is.
        if !models.is_empty() {
            command.env(MODELS_ENV, serde_json::Value::Object(models).to_string());
        }
        if let Some(file) = &self.trace_allocations {
            command.env(TRACE_ALLOCATIONS_ENV, file);
        }
        let mut python_path = self.python_path.clone().into_os_string();
        if let Some(old) = std::env::var_os("PYTHONPATH").filter(|p| !p.is_empty()) {
            python_path.push(":");
            python_path.push(old);
        }
        command.env("PYTHONPATH", python_path);
        Ok(command)
    }

    /// The variables memrel sets for the program under `strategy` (name →
    /// value), as the orchestrator starts it: [`CommandSpec::command`]'s,
    /// the strategy's (`preload` as `LD_PRELOAD`) and the channel's. The
    /// record keeps them so a re-run can say what changed.
    pub fn environment(
        &self,
        strategy: &Strategy,
        preload: Option<&Path>,
    ) -> Result<BTreeMap<String, String>, String> {
        let mut command = self.command(strategy)?;
        crate::strategy::clean_environment(&mut command, strategy, preload);
        let mut env: BTreeMap<String, String> = command
            .get_envs()
            .filter_map(|(name, value)| {
                Some((
                    name.to_string_lossy().into_owned(),
                    value?.to_string_lossy().into_owned(),
                ))
            })
            .collect();
        env.insert(EVENT_FD_ENV.to_string(), EVENT_FD.to_string());
        Ok(env)
    }
}

/// Writes the `memrel` package into `cache/python/<content hash>/memrel/`
/// (once per version of the module) and returns that directory.
pub fn python_module_dir(cache: &Path) -> anyhow::Result<PathBuf> {
    crate::fsutil::write_embedded(
        &cache.join("python"),
        &[
            ("memrel/__init__.py", PYTHON_MODULE),
            ("memrel/_trace.py", TRACE_MODULE),
        ],
    )
}

/// Whether the strategy's environment and allocator reached the program:
/// each variable as `/proc/PID/environ` shows it, the preloaded library in
/// `/proc/PID/maps`. Empty for a strategy that changes neither.
pub fn environment_checks(pid: u32, strategy: &Strategy, preload: Option<&Path>) -> Vec<Check> {
    let mut checks = Vec::new();
    if !strategy.env.is_empty() {
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let vars: Vec<&[u8]> = environ.split(|b| *b == 0).collect();
        for (key, want) in strategy.env {
            let prefix = format!("{key}=");
            let got = vars
                .iter()
                .find_map(|v| v.strip_prefix(prefix.as_bytes()))
                .map(|v| String::from_utf8_lossy(v).into_owned());
            checks.push(Check {
                name: format!("env {key}"),
                ok: got.as_deref() == Some(*want),
                detail: format!(
                    "the program's environment has {key}={}",
                    got.as_deref().unwrap_or("<unset>")
                ),
            });
        }
    }
    if let Some(library) = preload {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        let real = std::fs::canonicalize(library).unwrap_or_else(|_| library.to_path_buf());
        let mapped = maps.lines().any(|line| {
            line.ends_with(&*library.to_string_lossy()) || line.ends_with(&*real.to_string_lossy())
        });
        checks.push(Check {
            name: format!("allocator {}", strategy.allocator.name()),
            ok: mapped,
            detail: format!(
                "{} is {}mapped in the program (/proc/{pid}/maps)",
                real.display(),
                if mapped { "" } else { "NOT " }
            ),
        });
    }
    checks
}

/// Numbers the cycles of a program that leaves `cycle` out: baseline and
/// warm-up are cycle 0; a load that begins when no cycle is open (none yet,
/// or the current one has had an unload, release or settle) starts the next.
#[derive(Debug, Default)]
pub struct CycleNumbering {
    current: u32,
    closing: bool,
}

impl CycleNumbering {
    /// Gives `edge` its cycle if it has none; keeps the program's own numbers.
    pub fn assign(&mut self, edge: &mut PhaseEdge) {
        if edge.cycle != CYCLE_UNSET {
            self.current = self.current.max(edge.cycle);
            return;
        }
        edge.cycle = match edge.phase {
            Phase::Warmup | Phase::Baseline => 0,
            // A load, or a sleep (a server's cycle), after the last one closed.
            Phase::Load | Phase::Sleep
                if edge.edge == Edge::Begin && (self.current == 0 || self.closing) =>
            {
                self.current += 1;
                self.closing = false;
                self.current
            }
            Phase::Unload | Phase::Release | Phase::Settle | Phase::Wake => {
                self.closing = true;
                self.current
            }
            _ => self.current,
        };
    }
}

#[cfg(test)]
mod tests {

    /// The names in a Python tuple or dict literal `NAME = (...)` / `{...}`
    /// of the embedded module, in order (keys only for a dict).
    fn python_names(name: &str) -> Vec<String> {
        let start = PYTHON_MODULE
            .find(&format!("\n{name} = "))
            .unwrap_or_else(|| panic!("{name} is not in the memrel module"));
        let body = &PYTHON_MODULE[start..];
        let end = body.find([')', '}']).expect("a closing bracket");
        body[..end]
            .split([',', '\n', '(', '{'])
            .filter_map(|item| {
                let item = item.split(':').next()?.trim();
                item.strip_prefix('"')?
                    .strip_suffix('"')
                    .map(str::to_string)
            })
            .collect()
    }

    #[test]
    fn the_python_module_names_the_phases_and_steps_rust_does() {
        use crate::protocol::Phase;
        use crate::strategy::ProgramActions;
        let phases: Vec<&str> = Phase::ALL.iter().map(|p| p.as_str()).collect();
        assert_eq!(python_names("PHASES"), phases);
        // The module's release steps are its `_ACTIONS` table's keys; its
        // `RELEASE_ACTIONS` is made from them, never a list of its own.
        assert_eq!(python_names("_ACTIONS"), ProgramActions::release_steps());
        assert!(
            PYTHON_MODULE.contains("\nRELEASE_ACTIONS = tuple(_ACTIONS)\n"),
            "RELEASE_ACTIONS is _ACTIONS' keys"
        );
        assert_eq!(python_names("START_ACTIONS"), ProgramActions::start_steps());
    }

    #[test]
    fn every_step_a_strategy_asks_of_a_program_is_a_known_step() {
        use crate::strategy::{self, ProgramActions};
        for s in strategy::all() {
            let Ok(actions) = s.for_programs() else {
                continue;
            };
            for step in &actions.release {
                assert!(
                    ProgramActions::release_steps().contains(&step.as_str()),
                    "{}: {step}",
                    s.name
                );
            }
            for step in &actions.start {
                let name = step.split('=').next().unwrap_or(step);
                assert!(
                    ProgramActions::start_steps().contains(&name),
                    "{}: {step}",
                    s.name
                );
            }
        }
    }

    use super::*;
    use crate::protocol::MemoryAtEdge;

    fn edge(phase: Phase, e: Edge) -> PhaseEdge {
        PhaseEdge {
            phase,
            edge: e,
            cycle: CYCLE_UNSET,
            model: None,
            elapsed_s: None,
            memory: MemoryAtEdge::default(),
            allocator: None,
            heap: None,
            views: Default::default(),
            note: None,
            mono_s: None,
        }
    }

    #[test]
    fn cycles_start_at_the_first_load_after_a_release() {
        use Edge::{Begin, End};
        use Phase::*;
        let script = [
            (Baseline, Begin, 0),
            (Baseline, End, 0),
            (Load, Begin, 1),
            (Load, End, 1),
            (Load, Begin, 1), // a second model in the same cycle
            (Load, End, 1),
            (Forward, Begin, 1),
            (Forward, End, 1),
            (Unload, Begin, 1),
            (Unload, End, 1),
            (Release, Begin, 1),
            (Release, End, 1),
            (Settle, Begin, 1),
            (Settle, End, 1),
            (Load, Begin, 2),
            (Load, End, 2),
            (Unload, Begin, 2),
            (Load, Begin, 3),
        ];
        let mut numbering = CycleNumbering::default();
        for (phase, e, want) in script {
            let mut x = edge(phase, e);
            numbering.assign(&mut x);
            assert_eq!(x.cycle, want, "{phase:?} {e:?}");
        }
    }
}
