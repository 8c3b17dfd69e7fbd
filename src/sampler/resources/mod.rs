//! The catalogue of resources that are one probe each: a resource added here
//! is a probe file beside this one and one line in [`CATALOGUE`]; the
//! sampler, the edge reader, the record (its `readings`), the metrics, the
//! tables, the charts and the gate's budgets take it from there.
//!
//! Such a resource is a number of bytes read at each tick and at each phase
//! edge: its probe ([`Probe`]) gives that one number, and [`Catalogued`]
//! puts it under the resource's key as every other kind's probe does
//! (`sampler::probe::ResourceProbe`), in the same loop. The resources with
//! more shape (host memory's parts, VRAM per GPU and per process, the
//! container's counters, the page cache's files) have their own probe
//! files in `sampler/` and their own fields in the record.

mod shm;
mod shmem;

use super::probe::{Got, Measured, ResourceProbe};

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
}

impl ResourceDef {
    /// Its key in the record (`record::Resource::Probed`); the catalogue's
    /// keys are checked by a test, so `None` is never met.
    pub fn resource(&self) -> Option<crate::record::Resource> {
        crate::record::Key::new(self.key).map(crate::record::Resource::Probed)
    }
}

/// A catalogued resource's probe: one number of bytes per reading.
pub trait Probe: Send {
    /// The bytes now; `None`: not readable at this instant. `pids` are the
    /// processes measured now (the program, or its tree), root first.
    fn read(&mut self, pids: &[u32]) -> Option<u64>;
    /// What it reads, for the record's header: `/dev/shm in use (statvfs)`.
    fn how(&self) -> String;
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
    fn read(&mut self, at: &Measured, into: &mut crate::record::Readings) -> Got {
        match (self.def.resource(), self.probe.read(at.pids)) {
            (Some(resource), Some(bytes)) => {
                into.set(resource, bytes);
                Got::Read
            }
            _ => Got::Nothing,
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
