//! The one trait every probe implements, so the sampler's tick and the edge
//! reader read every kind of resource the same way: one loop over the
//! run's probes ([`read_each`]) into one map of readings
//! (`record::Readings`), which becomes a sample (`Sample::from_readings`)
//! or fills a phase edge in (`Readings::fill_memory`).
//!
//! One probe per kind, each in its own file: host memory (`procfs`'s statm,
//! `portable`'s sysinfo, `tree`'s PSS sum, behind [`super::Probe`]), VRAM
//! (`vram::Vram`, around a `VramProbe`: NVML per process, per tree, per
//! GPU), the container (`container::Container`, around the cgroup's
//! reader), the model files' page cache (`page_cache`: the sampled reading
//! of its thread, or a direct one at an edge) and every catalogued resource
//! (`resources::Catalogued`).
//!
//! The same rule serves both readers: a probe fills what the map does not
//! hold yet and keeps what it holds. The sampler starts each tick from an
//! empty map; an edge starts from what its line carried (the sender's own
//! reading, which stands), except where the reader's reading is the better
//! one: a process tree's sum replaces one process's (`Measured::tree`), and
//! the container is always the reader's own.

use std::any::Any;

use crate::record::Readings;

/// What a reading measures now, as the host probe decides it.
#[derive(Debug, Clone, Copy)]
pub struct Measured<'a> {
    /// The measured processes, root first (a tree's at its latest reading,
    /// else the process alone).
    pub pids: &'a [u32],
    /// They are a process tree: its sums replace a reading of one process
    /// already in the map.
    pub tree: bool,
}

impl<'a> Measured<'a> {
    /// One process, `pid` (a slice of one).
    pub fn process(pid: &'a [u32]) -> Measured<'a> {
        Measured {
            pids: pid,
            tree: false,
        }
    }
}

/// What one probe's reading did to the map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Got {
    /// Read: its entries are in the map.
    Read,
    /// The map already held the resource (the sender's own reading), which
    /// stands: nothing read.
    Kept,
    /// Nothing at this instant (not due yet, not readable now, a zombie's 0).
    Nothing,
    /// What it measures is gone for good (the process exited): a host
    /// probe's answer, which ends the samples.
    Gone,
}

/// A probe of one kind of resource (see the module's doc).
pub trait ResourceProbe: Send + Any {
    /// Reads the resource of `at` into `into` (see the module's doc for
    /// what it keeps). A sampler calls it at every tick: it keeps its
    /// buffers from one reading to the next.
    fn read(&mut self, at: &Measured, into: &mut Readings) -> Got;
    /// What it reads, for people: `/dev/shm in use (statvfs)`.
    fn how(&self) -> String;
}

/// Every probe of `probes` in turn, into `into`: the one loop of the
/// sampler's tick and of the edge reader.
pub fn read_each(probes: &mut [Box<dyn ResourceProbe>], at: &Measured, into: &mut Readings) {
    for probe in probes.iter_mut() {
        probe.read(at, into);
    }
}

/// The probe of type `T` in `probes`, if any (the VRAM probe's per-process
/// lists).
pub fn find_mut<T: ResourceProbe>(probes: &mut [Box<dyn ResourceProbe>]) -> Option<&mut T> {
    probes.iter_mut().find_map(|p| {
        let any: &mut dyn Any = p.as_mut();
        any.downcast_mut::<T>()
    })
}

/// Takes the probe of type `T` out of `probes`, if any (the VRAM probe
/// handed back at the end; a probe replaced).
pub fn take<T: ResourceProbe>(probes: &mut Vec<Box<dyn ResourceProbe>>) -> Option<Box<T>> {
    let at = probes.iter().position(|p| {
        let any: &dyn Any = p.as_ref();
        any.is::<T>()
    })?;
    let any: Box<dyn Any> = probes.remove(at);
    any.downcast::<T>().ok()
}

/// Puts `probe` in place of the probe of its type in `probes` (none: takes
/// that one out).
pub fn replace<T: ResourceProbe>(probes: &mut Vec<Box<dyn ResourceProbe>>, probe: Option<T>) {
    let _ = take::<T>(probes);
    if let Some(probe) = probe {
        probes.push(Box::new(probe));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Resource;

    struct Fixed(u64);

    impl ResourceProbe for Fixed {
        fn read(&mut self, at: &Measured, into: &mut Readings) -> Got {
            into.set(Resource::PageCache, self.0 * at.pids.len() as u64);
            Got::Read
        }
        fn how(&self) -> String {
            "fixed".into()
        }
    }

    #[test]
    fn probes_are_found_taken_and_replaced_by_their_type() {
        let mut probes: Vec<Box<dyn ResourceProbe>> = vec![Box::new(Fixed(3))];
        let mut into = Readings::default();
        read_each(&mut probes, &Measured::process(&[1]), &mut into);
        assert_eq!(into.get(Resource::PageCache), Some(3));
        assert_eq!(find_mut::<Fixed>(&mut probes).map(|f| f.0), Some(3));
        replace(&mut probes, Some(Fixed(5)));
        assert_eq!(probes.len(), 1);
        assert_eq!(take::<Fixed>(&mut probes).map(|f| f.0), Some(5));
        assert!(probes.is_empty() && take::<Fixed>(&mut probes).is_none());
    }
}
