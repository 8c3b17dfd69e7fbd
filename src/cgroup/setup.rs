//! The container's view of one invocation and of each worker process: which
//! cgroup is read (the one memrel runs in, or the worker's own under
//! `--cgroup-parent`), how `--memory-limit` applies, and what a process's
//! run hands the orchestrator (the cgroup the sampler and the edges read,
//! the OOM counters before it started, its counters at start and end).

use std::path::Path;
use std::process::Command;

use super::delegate::{Delegation, WorkerCgroup};
use super::limit::{self, LimitKind};
use super::oom::OomWatch;
use super::probe::CgroupProbe;
use super::view::{CgroupRun, ContainerView, Scope};
use super::{locate, Counters, Located};

/// `--cgroup-parent` and `--memory-limit`, checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Setup {
    pub delegation: Option<Delegation>,
    pub memory_limit_bytes: Option<u64>,
}

impl Setup {
    /// Checks the flags before any run; errors name the flag.
    pub fn from_flags(parent: Option<&Path>, memory_limit: Option<&str>) -> Result<Setup, String> {
        Ok(Setup {
            delegation: parent.map(Delegation::open).transpose()?,
            memory_limit_bytes: memory_limit.map(limit::parse_size).transpose()?,
        })
    }

    /// How the limit applies: memory.max of each worker's cgroup, or RLIMIT_AS.
    pub fn limit_kind(&self) -> Option<LimitKind> {
        self.memory_limit_bytes.map(|_| match self.delegation {
            Some(_) => LimitKind::CgroupMax,
            None => LimitKind::RlimitAs,
        })
    }

    /// The container resource of the invocation, for the record's header:
    /// the workers' own cgroups, or the one memrel runs in (which the
    /// workers inherit), or why that cannot be read.
    pub fn view(&self) -> ContainerView {
        let mut view = ContainerView {
            scope: Scope::WholeCgroup,
            dir: String::new(),
            version: None,
            unavailable: None,
            memory_limit_bytes: self.memory_limit_bytes,
            limit: self.limit_kind(),
        };
        if let Some(d) = &self.delegation {
            view.scope = Scope::Worker;
            view.dir = d.parent.display().to_string();
            view.version = Some(super::Version::V2);
            return view;
        }
        ContainerView {
            memory_limit_bytes: self.memory_limit_bytes,
            limit: self.limit_kind(),
            ..whole_cgroup_of(std::process::id())
        }
    }

    /// Gets the cgroup side of one worker process ready, before its spawn:
    /// its own cgroup (`name`, under `--cgroup-parent`) or memrel's. `Err`
    /// only when its own cgroup cannot be made: the process must not run
    /// without the limit and the numbers it was asked to have.
    pub fn prepare(&self, name: &str) -> Result<Prepared, String> {
        let (own, located) = match &self.delegation {
            Some(d) => {
                let own = d.child(name, self.memory_limit_bytes)?;
                let at = own.located();
                (Some(own), Ok(at))
            }
            None => (None, locate(std::process::id())),
        };
        let oom = OomWatch::start(located.as_ref().ok());
        let at_start = located.as_ref().ok().and_then(|at| super::read(at).ok());
        Ok(Prepared {
            own,
            located,
            oom,
            at_start,
            rlimit_as_bytes: match self.limit_kind() {
                Some(LimitKind::RlimitAs) => self.memory_limit_bytes,
                _ => None,
            },
            limit_bytes: self.memory_limit_bytes,
            other_processes: None,
        })
    }
}

/// The whole cgroup `pid` runs in, as the record's header names it (or why
/// it cannot be read): memrel's own, which its workers inherit, or the
/// process `attach` watches.
pub fn whole_cgroup_of(pid: u32) -> ContainerView {
    let mut view = ContainerView {
        scope: Scope::WholeCgroup,
        dir: String::new(),
        version: None,
        unavailable: None,
        memory_limit_bytes: None,
        limit: None,
    };
    match locate(pid).and_then(|at| CgroupProbe::open(&at).map(|_| at)) {
        Ok(at) => {
            view.dir = at.dir.display().to_string();
            view.version = Some(at.version);
        }
        Err(why) => view.unavailable = Some(why),
    }
    view
}

/// One worker process's cgroup side.
pub struct Prepared {
    own: Option<WorkerCgroup>,
    located: Result<Located, String>,
    oom: OomWatch,
    at_start: Option<Counters>,
    rlimit_as_bytes: Option<u64>,
    limit_bytes: Option<u64>,
    other_processes: Option<u32>,
}

impl Prepared {
    /// Makes `command`'s process join its own cgroup, or take RLIMIT_AS.
    pub fn apply(&self, command: &mut Command) {
        if let Some(own) = &self.own {
            own.join_at_exec(command);
        }
        if let Some(bytes) = self.rlimit_as_bytes {
            limit::rlimit_as_at_exec(command, bytes);
        }
    }

    /// Counts the processes in the cgroup that are not memrel's (memrel and
    /// its descendants: the worker just started is one), for the record.
    pub fn count_others(&mut self) {
        if let Ok(at) = &self.located {
            self.other_processes = super::others::count(&at.dir, &[std::process::id()]);
        }
    }

    /// The process's cgroup, where it was found: what the sampler and the
    /// edges read (`session::ProbeSet`).
    pub fn located(&self) -> Option<&Located> {
        self.located.as_ref().ok()
    }

    /// Why the process was killed, where an OOM kill counter rose since it
    /// started: the counter, the limit and the last readings, as one sentence.
    pub fn oom_kill(&self, last_reading: &str) -> Option<String> {
        let rose = self.oom.rose()?;
        let limit = self
            .located
            .as_ref()
            .ok()
            .and_then(|at| super::read(at).ok())
            .and_then(|c| c.limit_bytes)
            .or(self.limit_bytes)
            // MiB as `textutil::format_mib` writes it; cgroup/ imports
            // nothing of memrel's (the bottom floor).
            .map(|b| format!("limit {:.1} MiB", b as f64 / (1024.0 * 1024.0)))
            .unwrap_or_else(|| "no cgroup limit (the machine ran out)".to_string());
        Some(format!(
            "out of memory: the kernel's OOM killer killed the worker ({rose}); {limit}; last reading: {last_reading}"
        ))
    }

    /// Reads the counters at the end, removes the worker's own cgroup, and
    /// returns what the record keeps of this process's cgroup.
    pub fn finish(self) -> CgroupRun {
        let (dir, version, at_end, error) = match &self.located {
            Ok(at) => {
                let end = super::read(at);
                (
                    at.dir.display().to_string(),
                    Some(at.version),
                    end.as_ref().ok().copied(),
                    end.err(),
                )
            }
            Err(why) => (String::new(), None, None, Some(why.clone())),
        };
        let removed = self.own.map(WorkerCgroup::remove).transpose().err();
        CgroupRun {
            dir,
            version,
            at_start: self.at_start,
            at_end,
            error: error.or(removed),
            other_processes: self.other_processes,
        }
    }
}
