//! The memory memrel measures, as resources: host memory (the worker's RSS,
//! with its anonymous and file parts), device memory (the worker's own
//! VRAM on one CUDA device, `cuda:N`) and the model files' page cache
//! (`page_cache`). Every metric, chart panel, table
//! column and gate verdict is written once and applied to each resource; this
//! is the one place that knows where a resource's bytes live in a record.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::protocol::MemoryAtEdge;
use crate::record::{Header, Sample};

/// One kind of memory, named `host` or `cuda:N` in every file memrel writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Resource {
    /// The worker's resident set (RSS = RssAnon + RssFile + RssShmem).
    Host,
    /// The worker's own memory on CUDA device N (per-process VRAM, NVML).
    Device(u32),
    /// The model files' bytes in the kernel's page cache, whoever caused
    /// them (`sampler::page_cache`): what a cgroup charges after an unload.
    PageCache,
}

impl Resource {
    /// The resources a record measured: the host always, its CUDA device,
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
            Resource::PageCache => PAGE_CACHE_KEY.to_string(),
        }
    }

    pub fn parse(key: &str) -> Option<Resource> {
        match key {
            "host" => Some(Resource::Host),
            PAGE_CACHE_KEY => Some(Resource::PageCache),
            other => other
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(Resource::Device),
        }
    }

    /// What the numbers are, for column headers: `RSS`, `VRAM` or `cached`.
    pub fn quantity(self) -> &'static str {
        match self {
            Resource::Host => "RSS",
            Resource::Device(_) => "VRAM",
            Resource::PageCache => "cached",
        }
    }

    /// For people: `host RSS`, `VRAM cuda:0` or `page cache`.
    pub fn label(self) -> String {
        match self {
            Resource::Host => "host RSS".to_string(),
            Resource::Device(n) => format!("VRAM cuda:{n}"),
            Resource::PageCache => "page cache".to_string(),
        }
    }

    pub fn is_device(self) -> bool {
        matches!(self, Resource::Device(_))
    }

    /// This resource in one sample (`None`: not read at that instant).
    pub fn in_sample(self, sample: &Sample) -> Option<u64> {
        match self {
            Resource::Host => Some(sample.rss_bytes),
            Resource::Device(_) => sample.vram_bytes,
            Resource::PageCache => sample.page_cache_bytes,
        }
    }

    /// This resource at a phase edge, as the worker read it.
    pub fn at_edge(self, memory: &MemoryAtEdge) -> Option<u64> {
        match self {
            Resource::Host => Some(memory.rss_bytes),
            Resource::Device(_) => memory.vram_bytes,
            Resource::PageCache => memory.page_cache_bytes,
        }
    }

    /// The anonymous part at a phase edge, where the resource has parts (host only).
    pub fn anon_at_edge(self, memory: &MemoryAtEdge) -> Option<u64> {
        match self {
            Resource::Host => Some(memory.anon_bytes),
            Resource::Device(_) | Resource::PageCache => None,
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
        Resource::parse(&key)
            .ok_or_else(|| format!("unknown resource {key:?}: expected host, cuda:N or page_cache"))
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
