//! One map of readings: the bytes of every resource read at one instant (a
//! sample, or a phase edge), keyed by the resource (`record::Resource`) and,
//! where a resource has parts, by the part (host memory's anonymous and
//! file pages, the container's usage).
//!
//! The record knows a key and its bytes, nothing of what a resource is or
//! how it is read: a resource added to the sampler's catalogue is carried,
//! written and read back here without a line changed. In samples.csv and
//! events.csv the fixed resources keep their own columns (`rss_bytes`,
//! `vram_bytes`, `gpu_vram`, `container_bytes`, `page_cache_bytes`, …) and
//! the catalogued ones share one `readings` cell of `KEY=BYTES` entries
//! separated by spaces, e.g. `shm=67108864`, empty where nothing was read;
//! one read per GPU is keyed `KEY:N`, a part follows with its word
//! (`KEY:N.anon=BYTES`).

use super::gpu::GpuVram;
use super::mapping::MappingKind;
use super::resource::Resource;
use super::view::ViewKind;
use crate::cgroup::view::ContainerSample;
use crate::protocol::MemoryAtEdge;

/// What of a resource a reading is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Part {
    /// The resource's bytes (host RSS or PSS, a GPU's VRAM, the container's
    /// working set, the cached bytes, a catalogued resource's bytes).
    Whole,
    /// The anonymous part (host memory; the container's `memory.stat` anon).
    Anon,
    /// The file-backed part (host memory; the container's `memory.stat` file).
    File,
    /// The container's whole charge (`memory.current`), page cache included.
    Usage,
    /// At a phase edge, the kernel's peak of host memory over the span the
    /// edge closes (VmHWM, reset at each edge: `sampler::hwm`): the exact
    /// peak, which samples can miss.
    Peak,
    /// On a machine of several GPUs: the root process's own VRAM on the GPU
    /// that lists it (the resource's `Whole` is every measured process's sum).
    Own,
    /// Host memory by the kind of mapping that holds it, read at phase
    /// edges only (`sampler::mappings`: the heap, the GPU driver's, shared
    /// memory, the weight files, code, the stack, the rest).
    Mapped(MappingKind),
    /// What the program's framework says it holds of the resource, sent by
    /// the program at a phase edge (`record::view`: PyTorch's allocated and
    /// reserved VRAM, its pinned host cache, JAX's arrays and pool).
    View(ViewKind),
}

impl Part {
    /// Its word in a `readings` cell entry (`shm:0.anon=…`); the whole has none.
    pub fn word(self) -> &'static str {
        match self {
            Part::Whole => "",
            Part::Anon => "anon",
            Part::File => "file",
            Part::Usage => "usage",
            Part::Peak => "peak",
            Part::Own => "own",
            Part::Mapped(kind) => kind.key(),
            Part::View(kind) => kind.key(),
        }
    }

    /// The part a cell entry's word names.
    pub fn of_word(word: &str) -> Option<Part> {
        [Part::Anon, Part::File, Part::Usage, Part::Peak, Part::Own]
            .into_iter()
            .find(|p| p.word() == word)
            .or_else(|| MappingKind::parse(word).map(Part::Mapped))
            .or_else(|| ViewKind::parse(word).map(Part::View))
    }
}

/// Whether an entry goes into the `readings` cell: a catalogued resource's,
/// host memory's split by mapping (`host.heap=BYTES`; the host's other
/// parts have columns of their own), or a framework's view of the host or a
/// GPU (`cuda:0.torch_reserved=BYTES`).
fn in_cell(resource: Resource, part: Part) -> bool {
    resource.catalogue_key().is_some()
        || matches!(part, Part::View(_))
        || (resource == Resource::Host && matches!(part, Part::Mapped(_)))
}

/// Bytes per resource and part; a resource without an entry was not read at
/// that instant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Readings {
    /// Sorted by (resource, part); a handful of entries.
    entries: Vec<(Resource, Part, u64)>,
    /// VRAM was read per GPU (NVML sees several GPUs): the `Device` entries
    /// are the GPUs that listed a measured process so far, possibly none.
    per_gpu: bool,
}

impl Readings {
    /// The bytes of `resource`; `None` where it was not read.
    pub fn get(&self, resource: Resource) -> Option<u64> {
        self.part(resource, Part::Whole)
    }

    /// The bytes of one part of `resource`; `None` where it was not read.
    pub fn part(&self, resource: Resource, part: Part) -> Option<u64> {
        self.find(resource, part).ok().map(|i| self.entries[i].2)
    }

    fn find(&self, resource: Resource, part: Part) -> Result<usize, usize> {
        self.entries
            .binary_search_by(|(r, p, _)| (*r, *p).cmp(&(resource, part)))
    }

    pub fn set(&mut self, resource: Resource, bytes: u64) {
        self.set_part(resource, Part::Whole, bytes);
    }

    pub fn set_part(&mut self, resource: Resource, part: Part, bytes: u64) {
        match self.find(resource, part) {
            Ok(i) => self.entries[i].2 = bytes,
            Err(i) => self.entries.insert(i, (resource, part, bytes)),
        }
    }

    /// Sets `part` to `bytes` where there are bytes; leaves it unread otherwise.
    pub fn set_opt(&mut self, resource: Resource, part: Part, bytes: Option<u64>) {
        if let Some(bytes) = bytes {
            self.set_part(resource, part, bytes);
        }
    }

    /// Forgets one part of `resource`.
    pub fn remove_part(&mut self, resource: Resource, part: Part) {
        if let Ok(i) = self.find(resource, part) {
            self.entries.remove(i);
        }
    }

    /// Forgets every reading of `resource` (all its parts).
    pub fn remove(&mut self, resource: Resource) {
        self.entries.retain(|(r, _, _)| *r != resource);
    }

    /// Every reading of `other` into this one (its entries win).
    pub fn extend(&mut self, other: &Readings) {
        for (r, p, b) in &other.entries {
            self.set_part(*r, *p, *b);
        }
        self.per_gpu |= other.per_gpu;
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && !self.per_gpu
    }

    /// The resources read (their `Whole`), in order.
    pub fn resources(&self) -> impl Iterator<Item = Resource> + '_ {
        self.entries
            .iter()
            .filter(|(_, p, _)| *p == Part::Whole)
            .map(|(r, _, _)| *r)
    }

    /// Every (resource, part) read, in order.
    pub fn keys(&self) -> impl Iterator<Item = (Resource, Part)> + '_ {
        self.entries.iter().map(|(r, p, _)| (*r, *p))
    }

    /// The bytes on GPU `gpu`: with VRAM read per GPU that GPU's sum, else
    /// the one device's reading (a run's VRAM is one device's: its index is
    /// the record's device, not the slot's).
    pub fn device(&self, gpu: u32) -> Option<u64> {
        if self.per_gpu {
            self.get(Resource::Device(gpu))
        } else {
            self.vram_column()
        }
    }

    /// This resource's bytes, a GPU's as [`Readings::device`] reads them.
    pub fn at(&self, resource: Resource) -> Option<u64> {
        match resource {
            Resource::Device(gpu) => self.device(gpu),
            other => self.get(other),
        }
    }

    /// Makes these readings one device's: `bytes` on GPU `gpu` and no other
    /// VRAM reading (one GPU's view of a run of several: `metrics::gpu_view`).
    pub fn set_one_device(&mut self, gpu: u32, bytes: Option<u64>) {
        self.entries.retain(|(r, _, _)| !r.is_device());
        self.per_gpu = false;
        self.set_opt(Resource::Device(gpu), Part::Whole, bytes);
    }

    /// The container's view, where its working set and usage were read.
    pub fn container(&self) -> Option<ContainerSample> {
        let c = Resource::Container;
        Some(ContainerSample {
            working_set_bytes: self.get(c)?,
            usage_bytes: self.part(c, Part::Usage)?,
            anon_bytes: self.part(c, Part::Anon),
            file_bytes: self.part(c, Part::File),
        })
    }

    /// The container's view into these readings.
    pub fn set_container(&mut self, c: Option<ContainerSample>) {
        if let Some(c) = c {
            let r = Resource::Container;
            self.set(r, c.working_set_bytes);
            self.set_part(r, Part::Usage, c.usage_bytes);
            self.set_opt(r, Part::Anon, c.anon_bytes);
            self.set_opt(r, Part::File, c.file_bytes);
        }
    }

    /// Whether VRAM was read per GPU (a machine of several GPUs).
    pub fn per_gpu(&self) -> bool {
        self.per_gpu
    }

    /// The GPUs read, with their bytes, in order.
    pub fn gpus(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.entries.iter().filter_map(|(r, p, b)| match (r, p) {
            (Resource::Device(n), Part::Whole) => Some((*n, *b)),
            _ => None,
        })
    }

    /// Every GPU's sum of a per-GPU reading (a machine of several GPUs):
    /// replaces the `Device` entries.
    pub fn set_gpu_vram(&mut self, gpus: &GpuVram) {
        self.entries
            .retain(|(r, p, _)| !(r.is_device() && *p == Part::Whole));
        if gpus.was_read() {
            self.per_gpu = true;
            for gpu in gpus.gpus() {
                self.set_opt(Resource::Device(gpu), Part::Whole, gpus.get(gpu));
            }
        }
    }

    /// The per-GPU reading as `GpuVram` (empty, not read, where VRAM was one
    /// device's reading: see [`Readings::per_gpu`]).
    pub fn gpu_vram(&self) -> GpuVram {
        if !self.per_gpu {
            return GpuVram::default();
        }
        let mut out = GpuVram::read_none();
        for (gpu, bytes) in self.gpus() {
            out.add(gpu, bytes);
        }
        out
    }

    /// The `vram_bytes` column: the one device's reading, or on a machine of
    /// several GPUs the root process's own.
    pub fn vram_column(&self) -> Option<u64> {
        if self.per_gpu {
            self.entries
                .iter()
                .find(|(r, p, _)| r.is_device() && *p == Part::Own)
                .map(|e| e.2)
        } else {
            self.gpus().next().map(|(_, b)| b)
        }
    }

    /// The `vram_bytes` column read back: the reading of `device` (the
    /// run's), or its own part where the GPUs were read one by one.
    pub fn set_vram_column(&mut self, device: u32, bytes: Option<u64>) {
        let part = if self.per_gpu { Part::Own } else { Part::Whole };
        self.set_opt(Resource::Device(device), part, bytes);
    }

    /// The `readings` cell: the catalogued resources' `KEY=BYTES` entries
    /// separated by spaces; a per-GPU one's key is `KEY:N`, a part's is
    /// followed by its word (`KEY:N.anon=BYTES`).
    pub fn cell(&self) -> String {
        let entries: Vec<String> = self
            .entries
            .iter()
            .filter(|(r, p, _)| in_cell(*r, *p))
            .map(|(r, p, b)| match p {
                Part::Whole => format!("{r}={b}"),
                part => format!("{r}.{}={b}", part.word()),
            })
            .collect();
        entries.join(" ")
    }

    /// Whether a catalogued resource was read (a `readings` cell to write).
    pub fn has_probed(&self) -> bool {
        self.entries.iter().any(|(r, p, _)| in_cell(*r, *p))
    }

    /// The catalogued resources of a `readings` cell, into these readings;
    /// `Err` names the entry that is not `KEY=BYTES`.
    pub fn parse_cell(&mut self, cell: &str) -> Result<(), String> {
        for entry in cell.split_whitespace() {
            let parsed = entry.split_once('=').and_then(|(name, v)| {
                let (key, part) = match name.split_once('.') {
                    Some((key, word)) => (key, Part::of_word(word)?),
                    None => (name, Part::Whole),
                };
                let resource = match (key, part) {
                    ("host", Part::Mapped(_)) => Resource::Host,
                    (key, Part::View(kind)) => match Resource::parse(key)? {
                        Resource::Host if kind.on_host() => Resource::Host,
                        Resource::Device(n) if !kind.on_host() => Resource::Device(n),
                        _ => return None,
                    },
                    _ => Resource::catalogued(key)?,
                };
                Some((resource, part, v.parse::<u64>().ok()?))
            });
            let Some((resource, part, bytes)) = parsed else {
                return Err(format!(
                    "readings entry {entry:?} is not KEY=BYTES (a lowercase key, whole bytes)"
                ));
            };
            self.set_part(resource, part, bytes);
        }
        Ok(())
    }

    /// The readings of a `readings` cell alone.
    pub fn parse(cell: &str) -> Result<Readings, String> {
        let mut out = Readings::default();
        out.parse_cell(cell)?;
        Ok(out)
    }
}

impl Readings {
    /// The readings a phase edge's line carried (the sender's own).
    pub fn of_memory(memory: &MemoryAtEdge) -> Readings {
        let mut r = Readings::default();
        if memory.rss_bytes > 0 {
            r.set(Resource::Host, memory.rss_bytes);
            r.set_part(Resource::Host, Part::Anon, memory.anon_bytes);
            r.set_part(Resource::Host, Part::File, memory.file_bytes);
        }
        r.set_opt(Resource::Device(0), Part::Whole, memory.vram_bytes);
        r.set_opt(Resource::PageCache, Part::Whole, memory.page_cache_bytes);
        r
    }

    /// The readings of an edge whose line's memory is all there is (host
    /// memory read as its line says, 0 included).
    pub fn of_line(memory: &MemoryAtEdge) -> Readings {
        let mut r = Readings::of_memory(memory);
        r.or_unread_host();
        r
    }

    /// Host memory nobody read at an edge reads 0, as the line's own
    /// fields (and events.csv's `rss_bytes` column) have always said.
    pub fn or_unread_host(&mut self) {
        if self.get(Resource::Host).is_none() {
            self.set(Resource::Host, 0);
            self.set_part(Resource::Host, Part::Anon, 0);
            self.set_part(Resource::Host, Part::File, 0);
        }
    }

    /// These readings into a phase edge's memory (what it has columns for).
    pub fn fill_memory(&self, memory: &mut MemoryAtEdge) {
        if let Some(rss) = self.get(Resource::Host) {
            memory.rss_bytes = rss;
            memory.anon_bytes = self.part(Resource::Host, Part::Anon).unwrap_or(0);
            memory.file_bytes = self.part(Resource::Host, Part::File).unwrap_or(0);
        }
        memory.vram_bytes = self.vram_column();
        memory.page_cache_bytes = self.get(Resource::PageCache);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Key;

    fn probed(key: &str) -> Resource {
        Resource::Probed(Key::new(key).unwrap())
    }

    #[test]
    fn a_cell_round_trips() {
        let mut r = Readings::default();
        r.set(probed("shm"), 64 << 20);
        r.set(probed("a_b"), 0);
        r.set(Resource::Host, 5);
        assert_eq!(r.cell(), "a_b=0 shm=67108864");
        let mut back = Readings::parse(&r.cell()).unwrap();
        back.set(Resource::Host, 5);
        assert_eq!(back, r);
        assert_eq!(Readings::parse("").unwrap(), Readings::default());
        // Per GPU and by part.
        let mut shaped = Readings::default();
        let gpu = |n| Resource::ProbedGpu(Key::new("demo").unwrap(), n);
        shaped.set(gpu(1), 9);
        shaped.set_part(gpu(1), Part::Anon, 4);
        shaped.set(gpu(0), 3);
        assert_eq!(shaped.cell(), "demo:0=3 demo:1=9 demo:1.anon=4");
        assert_eq!(Readings::parse(&shaped.cell()).unwrap(), shaped);
    }

    #[test]
    fn mapped_and_framework_parts_round_trip_on_their_own_resources() {
        let mut r = Readings::default();
        r.set(Resource::Host, 7);
        r.set_part(Resource::Host, Part::Mapped(MappingKind::Heap), 5);
        r.set_part(Resource::Host, Part::View(ViewKind::TorchPinnedHeld), 4);
        r.set_part(Resource::Device(1), Part::View(ViewKind::TorchReserved), 3);
        assert_eq!(
            r.cell(),
            "host.heap=5 host.torch_pinned_held=4 cuda:1.torch_reserved=3"
        );
        let mut back = Readings::parse(&r.cell()).unwrap();
        back.set(Resource::Host, 7);
        assert_eq!(back, r);
        // A GPU's view on the host, the host's on a GPU, a view of a
        // catalogued resource: not readings.
        assert!(Readings::parse("host.torch_reserved=1").is_err());
        assert!(Readings::parse("cuda:0.torch_pinned_held=1").is_err());
        assert!(Readings::parse("shm.jax_pool=1").is_err());
    }

    #[test]
    fn a_bad_entry_is_named() {
        let e = Readings::parse("shm=12 Bad=3").unwrap_err();
        assert!(e.contains("\"Bad=3\""), "{e}");
        assert!(Readings::parse("shm=-1").is_err());
        assert!(Readings::parse("shm").is_err());
        assert!(Readings::parse("shm.bad=1").is_err());
        assert!(Readings::parse("shm:x=1").is_err());
    }

    #[test]
    fn parts_are_kept_apart_and_in_order() {
        let mut r = Readings::default();
        r.set_part(Resource::Host, Part::Anon, 3);
        r.set(Resource::Host, 5);
        r.set_part(Resource::Host, Part::File, 2);
        r.set(Resource::Device(1), 7);
        assert_eq!(r.get(Resource::Host), Some(5));
        assert_eq!(r.part(Resource::Host, Part::Anon), Some(3));
        assert_eq!(r.part(Resource::Host, Part::Usage), None);
        assert_eq!(
            r.resources().collect::<Vec<_>>(),
            [Resource::Host, Resource::Device(1)]
        );
        assert_eq!(r.vram_column(), Some(7));
        r.remove(Resource::Host);
        assert_eq!(r.part(Resource::Host, Part::Anon), None);
    }

    #[test]
    fn a_per_gpu_reading_keeps_the_roots_own_apart() {
        let mut gpus = GpuVram::read_none();
        gpus.add(0, 10);
        gpus.add(1, 0);
        let mut r = Readings::default();
        r.set_gpu_vram(&gpus);
        r.set_vram_column(0, Some(4));
        assert_eq!(r.get(Resource::Device(0)), Some(10));
        assert_eq!(r.get(Resource::Device(1)), Some(0));
        assert_eq!(r.vram_column(), Some(4));
        assert_eq!(r.gpu_vram(), gpus);
        // Asked, none listed yet: still a per-GPU reading.
        let mut none = Readings::default();
        none.set_gpu_vram(&GpuVram::read_none());
        assert!(none.per_gpu() && !none.is_empty());
        assert_eq!(none.gpu_vram(), GpuVram::read_none());
    }
}
