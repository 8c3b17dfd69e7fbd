//! A resource's name: the one key every reading, column, summary and budget
//! of it carries (`host`, `cuda:N`, `container`, `page_cache`, or a
//! catalogued resource's own key such as `shm`).
//!
//! It lives on the record's floor so that samples, edges, peaks and
//! summaries are keyed by it without knowing what a resource is. What a
//! resource *is* (its label, its budget keys, whether the gate judges it)
//! is the metrics floor's (`metrics::resource`), and how it is read is the
//! sampler's (`sampler::resources`).

use std::fmt;

use serde::{Deserialize, Serialize};

/// One kind of memory, named `host`, `cuda:N`, `container`, `page_cache` or
/// a catalogued resource's key in every file memrel writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Resource {
    /// The measured process's resident set (RSS = RssAnon + RssFile +
    /// RssShmem), or its tree's PSS sum.
    Host,
    /// The measured process's (or tree's) memory on GPU N (NVML).
    Device(u32),
    /// The working set (usage − inactive_file, as Kubernetes computes it)
    /// of the cgroup the worker runs in.
    Container,
    /// The model files' bytes in the kernel's page cache, whoever caused them.
    PageCache,
    /// A resource of the sampler's catalogue, by its key (`shm`).
    Probed(Key),
    /// A catalogued resource read per GPU: its key and the GPU (`KEY:N`).
    ProbedGpu(Key, u32),
}

/// The page cache's name in every file memrel writes.
const PAGE_CACHE_KEY: &str = "page_cache";

/// The longest key a catalogued resource may have.
pub const MAX_KEY_LEN: usize = 15;

/// A catalogued resource's key, kept inline (a `Resource` stays `Copy`):
/// lowercase letters, digits and `_`, at most [`MAX_KEY_LEN`] bytes, and
/// none of the fixed resources' names.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    len: u8,
    bytes: [u8; MAX_KEY_LEN],
}

impl Key {
    /// `key` as a catalogued resource's key; `None` where it is not one.
    pub const fn new(key: &str) -> Option<Key> {
        let b = key.as_bytes();
        if b.is_empty() || b.len() > MAX_KEY_LEN {
            return None;
        }
        let mut bytes = [0u8; MAX_KEY_LEN];
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            if !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_') {
                return None;
            }
            bytes[i] = c;
            i += 1;
        }
        Some(Key {
            len: b.len() as u8,
            bytes,
        })
    }

    pub fn as_str(&self) -> &str {
        // Only ASCII bytes are ever stored (`Key::new`).
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or("?")
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// A resource key: lowercase letters, digits and `_`, as files and budget keys name it.
pub fn is_key(key: &str) -> bool {
    Key::new(key).is_some()
}

impl Resource {
    /// `host`, `cuda:N`, `container`, `page_cache` or the catalogued key.
    pub fn key(self) -> String {
        match self {
            Resource::Host => "host".to_string(),
            Resource::Device(n) => format!("cuda:{n}"),
            Resource::Container => "container".to_string(),
            Resource::PageCache => PAGE_CACHE_KEY.to_string(),
            Resource::Probed(key) => key.as_str().to_string(),
            Resource::ProbedGpu(key, n) => format!("{}:{n}", key.as_str()),
        }
    }

    /// The resource a key names. Any key that is not a fixed resource's is a
    /// catalogued one (the record keeps what it read; whether the sampler
    /// has such a probe is the metrics floor's question).
    pub fn parse(key: &str) -> Option<Resource> {
        match key {
            "host" => Some(Resource::Host),
            "container" => Some(Resource::Container),
            PAGE_CACHE_KEY => Some(Resource::PageCache),
            other if other.starts_with("cuda") => other
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(Resource::Device),
            other => Resource::catalogued(other),
        }
    }

    /// A catalogued resource's key, `KEY` or per GPU `KEY:N`.
    pub fn catalogued(key: &str) -> Option<Resource> {
        match key.split_once(':') {
            Some((key, n)) => Some(Resource::ProbedGpu(Key::new(key)?, n.parse().ok()?)),
            None => Key::new(key).map(Resource::Probed),
        }
    }

    /// The catalogue's key of a catalogued resource (per GPU or not).
    pub fn catalogue_key(self) -> Option<Key> {
        match self {
            Resource::Probed(key) | Resource::ProbedGpu(key, _) => Some(key),
            _ => None,
        }
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

    pub fn is_device(self) -> bool {
        matches!(self, Resource::Device(_))
    }
}

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
            format!(
                "unknown resource {key:?}: expected host, cuda:N, container, page_cache or a \
                 catalogued resource's key (lowercase letters, digits and _)"
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_through_json() {
        let shm = Resource::Probed(Key::new("shm").unwrap());
        for r in [
            Resource::Host,
            Resource::Device(0),
            Resource::Device(3),
            Resource::Container,
            Resource::PageCache,
            shm,
            Resource::ProbedGpu(Key::new("shm").unwrap(), 2),
        ] {
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(serde_json::from_str::<Resource>(&json).unwrap(), r);
        }
        assert_eq!(
            serde_json::to_string(&Resource::Device(1)).unwrap(),
            "\"cuda:1\""
        );
        assert_eq!(
            Resource::parse("shm:1"),
            Some(Resource::ProbedGpu(Key::new("shm").unwrap(), 1))
        );
        for bad in [
            "\"GPU\"",
            "\"cuda\"",
            "\"cuda:x\"",
            "\"\"",
            "\"a_key_far_too_long\"",
            "\"shm:x\"",
        ] {
            assert!(serde_json::from_str::<Resource>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_cuda_record_has_a_device_resource() {
        assert_eq!(Resource::device_of("cpu"), None);
        assert_eq!(Resource::device_of("cuda"), Some(Resource::Device(0)));
        assert_eq!(Resource::device_of("cuda:2"), Some(Resource::Device(2)));
    }
}
