//! The memory memrel measures, as resources: host memory (the worker's RSS,
//! with its anonymous and file parts), device memory (the worker's own
//! VRAM on one CUDA device, `cuda:N`), the container's view (the working
//! set of the cgroup the worker runs in, `container`: the whole cgroup's,
//! memrel included, unless each worker has its own) and the model files'
//! page cache (`page_cache`), and every resource of the catalogue
//! (`sampler::resources`: `shm`, …), which needs no line here. Every metric,
//! chart panel, table column and gate verdict is written once and applied to
//! each resource; this is the one place that knows where a resource's bytes
//! live in a record.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::protocol::MemoryAtEdge;
use crate::record::{Event, Header, Record, Sample};
use crate::sampler::resources::{ResourceDef, CATALOGUE};

/// How far a catalogued resource must move during a record to be one of its
/// resources: less is the machine's own noise (a semaphore file of 4 KiB),
/// not something the measured program did.
pub const MOVED_BYTES: u64 = 1 << 20;

/// One kind of memory, named `host` or `cuda:N` in every file memrel writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Resource {
    /// The worker's resident set (RSS = RssAnon + RssFile + RssShmem).
    Host,
    /// The worker's own memory on CUDA device N (per-process VRAM, NVML).
    Device(u32),
    /// The working set (usage − inactive_file, as Kubernetes computes it)
    /// of the cgroup the worker runs in: the whole cgroup's, which may
    /// include memrel, unless `--cgroup-parent` gave each worker its own.
    Container,
    /// The model files' bytes in the kernel's page cache, whoever caused
    /// them (`sampler::page_cache`): what a cgroup charges after an unload.
    PageCache,
    /// The catalogue's resource at this index (`sampler::resources`).
    Probed(u8),
}

impl Resource {
    /// The resources a record measured: the host always, its CUDA device,
    /// and the container where the record names a cgroup (even one it could
    /// not read: its columns then say why).
    /// and the model files' page cache where the weights files were known.
    /// A record holds one device's readings per run (a worker uses one device);
    /// the names carry the device so records of several devices stay apart.
    pub fn of(header: &Header) -> Vec<Resource> {
        let mut out = vec![Resource::Host];
        if let Some(device) = Resource::device_of(&header.device) {
            out.push(device);
        }
        if header.page_cache.is_some() {
            out.push(Resource::PageCache);
        }
        if header.container.is_some() {
            out.push(Resource::Container);
        }
        out
    }

    /// The resources a record measured: the host, its header's device, each
    /// run's own device (runs spread over GPUs) and every GPU a run's samples
    /// read per GPU (a machine of several), in order.
    pub fn of_record(record: &Record) -> Vec<Resource> {
        let of_header = Resource::of(&record.header);
        let mut devices: Vec<Resource> = of_header
            .iter()
            .copied()
            .filter(|r| r.is_device())
            .collect();
        for run in &record.runs {
            let own = run.meta.device.as_deref().and_then(Resource::device_of);
            let per_gpu = run
                .samples
                .iter()
                .flat_map(|s| s.gpu_vram.gpus().map(Resource::Device));
            for r in own.into_iter().chain(per_gpu) {
                if !devices.contains(&r) {
                    devices.push(r);
                }
            }
        }
        devices.sort();
        let mut out = vec![Resource::Host];
        out.extend(devices);
        out.extend(
            of_header
                .into_iter()
                .filter(|r| *r != Resource::Host && !r.is_device()),
        );
        out.extend(Resource::probed().filter(|r| {
            r.range_in(record)
                .is_some_and(|(low, high)| high - low >= MOVED_BYTES)
        }));
        out
    }

    /// Every resource of the catalogue, in its order.
    pub fn probed() -> impl Iterator<Item = Resource> {
        (0..CATALOGUE.len()).map(|i| Resource::Probed(i as u8))
    }

    /// The catalogue's entry of a catalogued resource.
    pub fn def(self) -> Option<&'static ResourceDef> {
        match self {
            Resource::Probed(i) => CATALOGUE.get(usize::from(i)).copied(),
            _ => None,
        }
    }

    /// Every reading of this resource in `record`: its samples and edges, over all runs.
    fn values_in(self, record: &Record) -> impl Iterator<Item = u64> + '_ {
        record.runs.iter().flat_map(move |run| {
            let samples = run.samples.iter().filter_map(move |s| self.in_sample(s));
            samples.chain(run.events.iter().filter_map(move |e| self.at_event(e)))
        })
    }

    /// The lowest and highest reading in `record` (`None`: never read).
    /// A catalogued resource is one of the record's where they are
    /// [`MOVED_BYTES`] or more apart; else it stayed still (`Summary::still`).
    pub fn range_in(self, record: &Record) -> Option<(u64, u64)> {
        self.values_in(record).fold(None, |range, v| match range {
            None => Some((v, v)),
            Some((lo, hi)) => Some((v.min(lo), v.max(hi))),
        })
    }

    /// `cuda:N` (or `cuda`) as a device resource; `None` for the CPU.
    pub fn device_of(device: &str) -> Option<Resource> {
        match device.trim() {
            "cuda" => Some(Resource::Device(0)),
            other => other
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(Resource::Device),
        }
    }

    /// `host`, `cuda:N` or `page_cache`.
    pub fn key(self) -> String {
        match self {
            Resource::Host => "host".to_string(),
            Resource::Device(n) => format!("cuda:{n}"),
            Resource::Container => "container".to_string(),
            Resource::PageCache => PAGE_CACHE_KEY.to_string(),
            Resource::Probed(_) => self.def().map_or("?", |d| d.key).to_string(),
        }
    }

    pub fn parse(key: &str) -> Option<Resource> {
        match key {
            "host" => Some(Resource::Host),
            "container" => Some(Resource::Container),
            PAGE_CACHE_KEY => Some(Resource::PageCache),
            other if crate::sampler::resources::find(other).is_some() => {
                Resource::probed().find(|r| r.def().is_some_and(|d| d.key == other))
            }
            other => other
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(Resource::Device),
        }
    }

    /// What the numbers are, for column headers: `RSS`, `VRAM`, `cgroup WS` or `cached`.
    pub fn quantity(self) -> &'static str {
        match self {
            Resource::Host => "RSS",
            Resource::Device(_) => "VRAM",
            Resource::Container => "cgroup WS",
            Resource::PageCache => "cached",
            Resource::Probed(_) => self.def().map_or("?", |d| d.quantity),
        }
    }

    /// For people: `host RSS`, `VRAM cuda:0`, `container working set (whole cgroup)` or `page cache`.
    pub fn label(self) -> String {
        match self {
            Resource::Host => "host RSS".to_string(),
            Resource::Device(n) => format!("VRAM cuda:{n}"),
            Resource::Container => "container working set (whole cgroup)".to_string(),
            Resource::PageCache => "page cache".to_string(),
            Resource::Probed(_) => self.def().map_or("?", |d| d.label).to_string(),
        }
    }

    pub fn is_device(self) -> bool {
        matches!(self, Resource::Device(_))
    }

    /// Whether the gate judges it: not the container, whose cgroup holds
    /// other processes than the worker (memrel itself, at least) and whose
    /// page cache moves with the whole machine's memory pressure.
    pub fn is_gated(self) -> bool {
        !matches!(self, Resource::Container)
    }

    /// The word `[thresholds]` keys put after the metric's (`vram` in
    /// `max_retained_vram_mib`); `""` for host memory, `None` where nothing
    /// is budgeted (the container).
    pub fn budget_infix(self) -> Option<String> {
        match self {
            Resource::Host => Some(String::new()),
            Resource::Device(_) => Some("vram".to_string()),
            Resource::Container => None,
            Resource::PageCache | Resource::Probed(_) => Some(self.key()),
        }
    }

    /// The resources whose budgets are one set (every device shares the
    /// `vram` keys): `Device(0)` stands for any device.
    pub fn budget_class(self) -> Resource {
        match self {
            Resource::Device(_) => Resource::Device(0),
            other => other,
        }
    }

    /// Whether it is the machine's, not the measured process's: the page
    /// cache and the catalogued resources (charts draw them as context).
    pub fn is_machine_wide(self) -> bool {
        matches!(self, Resource::PageCache | Resource::Probed(_))
    }

    /// This resource in one sample (`None`: not read at that instant).
    pub fn in_sample(self, sample: &Sample) -> Option<u64> {
        match self {
            Resource::Host => Some(sample.rss_bytes),
            Resource::Device(gpu) if sample.gpu_vram.was_read() => sample.gpu_vram.get(gpu),
            Resource::Device(_) => sample.vram_bytes,
            Resource::Container => sample.container.map(|c| c.working_set_bytes),
            Resource::PageCache => sample.page_cache_bytes,
            Resource::Probed(_) => sample.readings.get(&self.key()),
        }
    }

    /// This resource at a phase edge: the line's memory, or for a
    /// catalogued resource the parent's reading of it.
    pub fn at_event(self, event: &Event) -> Option<u64> {
        match self {
            Resource::Probed(_) => event.readings.get(&self.key()),
            _ => self.at_edge(&event.edge.memory),
        }
    }

    /// This resource at a phase edge, as the worker read it.
    pub fn at_edge(self, memory: &MemoryAtEdge) -> Option<u64> {
        match self {
            Resource::Host => Some(memory.rss_bytes),
            Resource::Device(_) => memory.vram_bytes,
            Resource::Container => memory.container_bytes,
            Resource::PageCache => memory.page_cache_bytes,
            // The parent's reading, not the line's: see `at_event`.
            Resource::Probed(_) => None,
        }
    }

    /// The anonymous part at a phase edge, where the resource has parts
    /// (host memory; the container, where its edges read memory.stat).
    pub fn anon_at_edge(self, memory: &MemoryAtEdge) -> Option<u64> {
        match self {
            Resource::Host => Some(memory.anon_bytes),
            Resource::Container => memory.container_anon_bytes,
            Resource::Device(_) | Resource::PageCache | Resource::Probed(_) => None,
        }
    }
}

/// The page cache's name in every file memrel writes.
const PAGE_CACHE_KEY: &str = "page_cache";

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key())
    }
}

impl From<Resource> for String {
    fn from(r: Resource) -> String {
        r.key()
    }
}

impl TryFrom<String> for Resource {
    type Error = String;
    fn try_from(key: String) -> Result<Resource, String> {
        Resource::parse(&key).ok_or_else(|| {
            let probed: Vec<&str> = CATALOGUE.iter().map(|d| d.key).collect();
            format!(
                "unknown resource {key:?}: expected host, cuda:N, container, page_cache or {}",
                probed.join(", ")
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_through_json() {
        let fixed = [
            Resource::Host,
            Resource::Device(0),
            Resource::Device(3),
            Resource::Container,
            Resource::PageCache,
        ];
        for r in fixed.into_iter().chain(Resource::probed()) {
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(serde_json::from_str::<Resource>(&json).unwrap(), r);
        }
        assert_eq!(
            serde_json::to_string(&Resource::Device(1)).unwrap(),
            "\"cuda:1\""
        );
        assert!(serde_json::from_str::<Resource>("\"gpu\"").is_err());
    }

    #[test]
    fn a_cuda_record_has_a_device_resource() {
        assert_eq!(Resource::device_of("cpu"), None);
        assert_eq!(Resource::device_of("cuda"), Some(Resource::Device(0)));
        assert_eq!(Resource::device_of("cuda:2"), Some(Resource::Device(2)));
    }
}
