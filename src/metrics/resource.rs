//! The memory memrel measures, as resources: host memory (the worker's RSS,
//! with its anonymous and file parts), device memory (the worker's own
//! VRAM on one CUDA device, `cuda:N`), the container's view (the working
//! set of the cgroup the worker runs in, `container`: the whole cgroup's,
//! memrel included, unless each worker has its own) and the model files'
//! page cache (`page_cache`). Every metric, chart panel, table
//! column and gate verdict is written once and applied to each resource; this
//! is the one place that knows where a resource's bytes live in a record.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::protocol::MemoryAtEdge;
use crate::record::{Header, Record, Sample};

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
        out
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
        }
    }

    pub fn parse(key: &str) -> Option<Resource> {
        match key {
            "host" => Some(Resource::Host),
            "container" => Some(Resource::Container),
            PAGE_CACHE_KEY => Some(Resource::PageCache),
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
        }
    }

    /// For people: `host RSS`, `VRAM cuda:0`, `container working set (whole cgroup)` or `page cache`.
    pub fn label(self) -> String {
        match self {
            Resource::Host => "host RSS".to_string(),
            Resource::Device(n) => format!("VRAM cuda:{n}"),
            Resource::Container => "container working set (whole cgroup)".to_string(),
            Resource::PageCache => "page cache".to_string(),
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

    /// This resource in one sample (`None`: not read at that instant).
    pub fn in_sample(self, sample: &Sample) -> Option<u64> {
        match self {
            Resource::Host => Some(sample.rss_bytes),
            Resource::Device(gpu) if sample.gpu_vram.was_read() => sample.gpu_vram.get(gpu),
            Resource::Device(_) => sample.vram_bytes,
            Resource::Container => sample.container.map(|c| c.working_set_bytes),
            Resource::PageCache => sample.page_cache_bytes,
        }
    }

    /// This resource at a phase edge, as the worker read it.
    pub fn at_edge(self, memory: &MemoryAtEdge) -> Option<u64> {
        match self {
            Resource::Host => Some(memory.rss_bytes),
            Resource::Device(_) => memory.vram_bytes,
            Resource::Container => memory.container_bytes,
            Resource::PageCache => memory.page_cache_bytes,
        }
    }

    /// The anonymous part at a phase edge, where the resource has parts (host only).
    pub fn anon_at_edge(self, memory: &MemoryAtEdge) -> Option<u64> {
        match self {
            Resource::Host => Some(memory.anon_bytes),
            Resource::Device(_) | Resource::Container | Resource::PageCache => None,
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
            format!("unknown resource {key:?}: expected host, cuda:N, container or page_cache")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_through_json() {
        for r in [
            Resource::Host,
            Resource::Device(0),
            Resource::Device(3),
            Resource::Container,
            Resource::PageCache,
        ] {
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
