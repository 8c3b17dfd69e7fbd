//! The container as a probe: the cgroup the worker runs in, read through
//! its reader (`cgroup::probe::CgroupProbe`) into `Resource::Container`
//! (the working set as its whole, usage, and memory.stat's anon and file).
//!
//! The sampler's copy reads at most every `cgroup::probe::USAGE_EVERY`
//! with memory.stat at most every `STAT_EVERY` ([`Container::sampled`]:
//! a tick in between reads nothing); the edge reader's reads both now
//! ([`Container::at_edges`]). Its reading is always the reader's own: one a
//! line carried is replaced (or dropped where the cgroup cannot be read).

use super::probe::{Got, Measured, ResourceProbe};
use crate::cgroup::probe::CgroupProbe;
use crate::record::{Part, Readings, Resource};

/// The cgroup's probe, at the sampler's rate or fresh at every reading.
pub struct Container {
    probe: CgroupProbe,
    /// Every reading reads memory.stat now (a phase edge's).
    fresh: bool,
}

impl Container {
    /// For the sampler's ticks (see the module's doc).
    pub fn sampled(probe: CgroupProbe) -> Container {
        Container {
            probe,
            fresh: false,
        }
    }

    /// For phase edges: usage and memory.stat read at every reading.
    pub fn at_edges(probe: CgroupProbe) -> Container {
        Container { probe, fresh: true }
    }
}

impl ResourceProbe for Container {
    fn read(&mut self, _at: &Measured, into: &mut Readings) -> Got {
        into.remove(Resource::Container);
        let Some(sample) = self.probe.read(self.fresh) else {
            return Got::Nothing;
        };
        into.set(Resource::Container, sample.working_set_bytes);
        into.set_part(Resource::Container, Part::Usage, sample.usage_bytes);
        into.set_opt(Resource::Container, Part::Anon, sample.anon_bytes);
        into.set_opt(Resource::Container, Part::File, sample.file_bytes);
        Got::Read
    }

    fn how(&self) -> String {
        "the cgroup's working set (usage less inactive_file)".into()
    }
}
