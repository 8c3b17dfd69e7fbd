//! The catalogue of resources that are one probe each: a resource added here
//! is a probe file beside this one and one line in [`CATALOGUE`]; the
//! sampler, the edge reader, the record (its `readings`), the metrics, the
//! tables, the charts and the gate's budgets take it from there.
//!
//! Such a resource is a number of bytes read at each tick and at each phase
//! edge: its probe ([`Probe`]) gives that one number, and [`Catalogued`]
//! puts it under the resource's key as every other kind's probe does
//! (`sampler::probe::ResourceProbe`), in the same loop. A resource with
//! more shape says so in its [`Shape`] (its parts, read per GPU, drawn as
//! context or not) and its probe puts each reading itself
//! ([`Probe::read_into`]); the record carries it in the same `readings`
//! cell. The fixed resources (host memory, VRAM per process, the
//! container's counters, the page cache's files) keep their own probe files
//! in `sampler/` and their own columns in the record.

mod shm;
mod shmem;

use super::probe::{Got, Measured, ResourceProbe};
use crate::record::{Key, Part, Readings, Resource};

/// One catalogued resource: its names and how to open its probe.
pub struct ResourceDef {
    /// The key of its readings, columns and budgets (`max_retained_<key>_mib`):
    /// lowercase letters, digits and `_` (`record::is_reading_key`, tested).
    pub key: &'static str,
    /// What its numbers are, for column headers (`shm`).
    pub quantity: &'static str,
    /// For people: `shared memory (/dev/shm)`.
    pub label: &'static str,
    /// Opens its probe for the measured process `pid` (`Err`: why it cannot
    /// be read on this machine); the probe says what it reads ([`Probe::how`]).
    pub open: fn(pid: u32) -> Result<Box<dyn Probe>, String>,
    /// Its shape: one number ([`Shape::ONE_NUMBER`]), or parts, per GPU.
    pub shape: Shape,
}

/// What a catalogued resource looks like: what metrics, charts and the
/// trace take from it (`metrics::resource`'s facts), so that nothing above
/// the sampler names the resource.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Read per GPU: its readings are keyed `KEY:N` (`Resource::ProbedGpu`),
    /// one resource per GPU, its budgets one set for all.
    pub per_gpu: bool,
    /// Its parts, bottom up, each with its name in legends, keys and the
    /// trace; charts stack them, the last drawn up to the whole.
    pub parts: &'static [(Part, &'static str)],
    /// The machine's, not the measured process's: charts draw it as context.
    pub context: bool,
}

impl Shape {
    /// One number of bytes for the whole machine (`shm`) or process tree.
    pub const ONE_NUMBER: Shape = Shape {
        per_gpu: false,
        parts: &[],
        context: true,
    };
}

impl ResourceDef {
    /// Its key in the record (`record::Resource::Probed`; per GPU, GPU 0's,
    /// which stands for every GPU's where budgets are one set); the
    /// catalogue's keys are checked by a test, so `None` is never met.
    pub fn resource(&self) -> Option<Resource> {
        let key = Key::new(self.key)?;
        Some(if self.shape.per_gpu {
            Resource::ProbedGpu(key, 0)
        } else {
            Resource::Probed(key)
        })
    }
}

/// A catalogued resource's probe: one number of bytes per reading.
pub trait Probe: Send {
    /// The bytes now; `None`: not readable at this instant. `pids` are the
    /// processes measured now (the program, or its tree), root first.
    fn read(&mut self, pids: &[u32]) -> Option<u64>;
    /// What it reads, for the record's header: `/dev/shm in use (statvfs)`.
    fn how(&self) -> String;
    /// Its readings under `def`'s key into `into` (`false`: nothing read at
    /// this instant): [`Probe::read`]'s one number; a probe of a resource
    /// with parts or per GPU puts each of its readings itself.
    fn read_into(&mut self, pids: &[u32], def: &ResourceDef, into: &mut Readings) -> bool {
        match (def.resource(), self.read(pids)) {
            (Some(resource), Some(bytes)) => {
                into.set(resource, bytes);
                true
            }
            _ => false,
        }
    }
}

/// Every catalogued resource, in the order reports show them.
pub const CATALOGUE: &[&ResourceDef] = &[&shm::SHM, &shmem::SHMEM];

/// Every catalogued resource's key, in the catalogue's order: what this
/// memrel knows (a record's `Header::catalogue`).
pub fn keys() -> Vec<String> {
    CATALOGUE.iter().map(|d| d.key.to_string()).collect()
}

/// The catalogued resource named `key`.
pub fn find(key: &str) -> Option<&'static ResourceDef> {
    CATALOGUE.iter().copied().find(|d| d.key == key)
}

/// The probes that open for `pid`, each with its resource (a resource that
/// cannot be read on this machine is left out: its `Err` is not an error).
pub fn open_all(pid: u32) -> Vec<(&'static ResourceDef, Box<dyn Probe>)> {
    CATALOGUE
        .iter()
        .filter_map(|def| Some((*def, (def.open)(pid).ok()?)))
        .collect()
}

/// The catalogued resources that can be read on this machine, and how: the
/// record's header (`Header::probed`).
pub fn probed() -> Vec<crate::record::Probed> {
    open_all(std::process::id())
        .into_iter()
        .map(|(def, probe)| crate::record::Probed {
            key: def.key.to_string(),
            how: probe.how(),
        })
        .collect()
}

/// A catalogued resource's probe as a `ResourceProbe`: its bytes under its
/// key (a probe that reads nothing at this instant leaves its key out).
pub struct Catalogued {
    def: &'static ResourceDef,
    probe: Box<dyn Probe>,
}

impl Catalogued {
    /// Each of `probes` (`open_all`'s), as the probes of one reading.
    pub fn all(
        probes: Vec<(&'static ResourceDef, Box<dyn Probe>)>,
    ) -> impl Iterator<Item = Box<dyn ResourceProbe>> {
        probes
            .into_iter()
            .map(|(def, probe)| Box::new(Catalogued { def, probe }) as Box<dyn ResourceProbe>)
    }
}

impl ResourceProbe for Catalogued {
    fn read(&mut self, at: &Measured, into: &mut Readings) -> Got {
        if self.probe.read_into(at.pids, self.def, into) {
            Got::Read
        } else {
            Got::Nothing
        }
    }

    fn how(&self) -> String {
        self.probe.how()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_a_reading_key_and_unique() {
        for (i, def) in CATALOGUE.iter().enumerate() {
            assert!(crate::record::is_reading_key(def.key), "{}", def.key);
            assert!(CATALOGUE[..i].iter().all(|d| d.key != def.key));
            // Not a name the fixed resources use.
            assert!(!["host", "container", "page_cache"].contains(&def.key));
            assert!(!def.key.starts_with("cuda"));
        }
    }
}
