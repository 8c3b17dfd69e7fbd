//! Where a process's host memory is mapped (issue 49): `/proc/PID/smaps`
//! read once at a phase edge and each mapping's resident bytes put into one
//! of a few kinds, so that retained host memory can be split by what holds
//! it (the heap and anonymous memory, the GPU driver's mappings, shared
//! memory, the model's weight files, code, stacks, the rest).
//!
//! Read at edges only, never per sample: smaps walks every mapping and
//! every page table entry of the process, which for a process of several
//! GiB costs milliseconds (measured in `benches/`), too much for a 10 ms
//! sampler and nothing at an edge.
//!
//! What it cannot see: which allocator or object owns an anonymous page
//! (the heap kind is glibc's main heap and arenas, jemalloc's and
//! PyTorch's host caches alike: the in-process view splits it further);
//! thread stacks other than the main one (they are anonymous mappings);
//! pages the kernel holds for the process outside its mappings (page
//! tables, kernel buffers).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::probe::{Got, Measured, ResourceProbe};
use crate::record::{Part, Readings, Resource};

pub use crate::record::MappingKind;

/// File name endings taken for weights where no weight file is named.
pub const WEIGHT_EXTENSIONS: &[&str] = &[
    "safetensors",
    "gguf",
    "bin",
    "pt",
    "pth",
    "ckpt",
    "onnx",
    "msgpack",
    "h5",
    "npz",
];

/// The edge reader's probe of host memory by mapping: every measured
/// process's smaps split, summed (a tree's Pss, else the process's Rss),
/// into host memory's `Part::Mapped` parts. Never the sampler's: one smaps
/// walk costs milliseconds for a process of several GiB.
pub struct MappingsProbe {
    classifier: Classifier,
}

impl MappingsProbe {
    /// `weight_files`: the model files named (else weights go by extension).
    pub fn new(weight_files: &[PathBuf]) -> MappingsProbe {
        MappingsProbe {
            classifier: Classifier::new(weight_files),
        }
    }
}

impl ResourceProbe for MappingsProbe {
    fn read(&mut self, at: &Measured, into: &mut Readings) -> Got {
        let mut sum = MappedBytes::default();
        let mut read = false;
        for &pid in at.pids {
            if let Ok(split) = self.classifier.read(pid) {
                sum.add(&split);
                read = true;
            }
        }
        if !read {
            return Got::Nothing;
        }
        for kind in MappingKind::ALL {
            let bytes = if at.tree {
                sum.pss_bytes(kind)
            } else {
                sum.rss_bytes(kind)
            };
            into.set_part(Resource::Host, Part::Mapped(kind), bytes);
        }
        Got::Read
    }

    fn how(&self) -> String {
        "host memory by mapping (/proc/PID/smaps, at edges)".to_string()
    }
}

/// Resident bytes per kind of mapping (Rss and Pss, summed over the
/// mappings of that kind).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MappedBytes {
    rss_bytes: [u64; MappingKind::ALL.len()],
    pss_bytes: [u64; MappingKind::ALL.len()],
}

impl MappedBytes {
    pub fn rss_bytes(&self, kind: MappingKind) -> u64 {
        self.rss_bytes[kind as usize]
    }

    pub fn pss_bytes(&self, kind: MappingKind) -> u64 {
        self.pss_bytes[kind as usize]
    }

    /// Every kind's Rss, in [`MappingKind::ALL`]'s order.
    pub fn rss_by_kind(&self) -> impl Iterator<Item = (MappingKind, u64)> + '_ {
        MappingKind::ALL.into_iter().map(|k| (k, self.rss_bytes(k)))
    }

    pub fn total_rss_bytes(&self) -> u64 {
        self.rss_bytes.iter().sum()
    }

    /// Adds another process's bytes (a tree of processes).
    pub fn add(&mut self, other: &MappedBytes) {
        for i in 0..self.rss_bytes.len() {
            self.rss_bytes[i] += other.rss_bytes[i];
            self.pss_bytes[i] += other.pss_bytes[i];
        }
    }
}

/// How mappings are put into kinds: which files are the model's weights.
#[derive(Debug, Clone, Default)]
pub struct Classifier {
    /// The weight files named; empty: any file with a weight extension.
    weight_files: HashSet<PathBuf>,
}

impl Classifier {
    pub fn new(weight_files: &[PathBuf]) -> Classifier {
        Classifier {
            weight_files: weight_files
                .iter()
                .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
                .collect(),
        }
    }

    /// Reads `/proc/PID/smaps` and splits it.
    pub fn read(&self, pid: u32) -> std::io::Result<MappedBytes> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/smaps"))?;
        Ok(self.split(&text))
    }

    /// Splits the text of one smaps file.
    pub fn split(&self, smaps: &str) -> MappedBytes {
        let maps = parse(smaps);
        let gpu = maps.iter().any(|m| is_gpu_device(m.path));
        let code_files: HashSet<&str> = maps
            .iter()
            .filter(|m| m.perms.as_bytes().get(2) == Some(&b'x') && m.path.starts_with('/'))
            .map(|m| m.path)
            .collect();
        let mut bytes = MappedBytes::default();
        for m in &maps {
            let kind = self.kind(m, gpu, &code_files);
            bytes.rss_bytes[kind as usize] += m.rss_kb * 1024;
            bytes.pss_bytes[kind as usize] += m.pss_kb * 1024;
        }
        bytes
    }

    fn kind(&self, m: &Mapping, gpu: bool, code_files: &HashSet<&str>) -> MappingKind {
        let shared = m.perms.as_bytes().get(3) == Some(&b's');
        let path = m.path;
        if path.is_empty() || path == "[heap]" || path.starts_with("[anon:") {
            return if shared && gpu {
                MappingKind::Pinned
            } else if shared {
                MappingKind::Rest
            } else {
                MappingKind::Heap
            };
        }
        if path == "[stack]" {
            return MappingKind::Stack;
        }
        if is_gpu_device(path) {
            return MappingKind::Driver;
        }
        if path.starts_with("/dev/zero") || path.starts_with("[anon_shmem") {
            return if gpu {
                MappingKind::Pinned
            } else {
                MappingKind::Rest
            };
        }
        if path.starts_with("/dev/shm/") || path.starts_with("/memfd:") || path.starts_with("/SYSV")
        {
            return MappingKind::Shm;
        }
        let file = path.strip_suffix(" (deleted)").unwrap_or(path);
        if self.is_weights(file) {
            return MappingKind::Weights;
        }
        if code_files.contains(path) {
            return MappingKind::Code;
        }
        MappingKind::Rest
    }

    fn is_weights(&self, file: &str) -> bool {
        if !file.starts_with('/') {
            return false;
        }
        if !self.weight_files.is_empty() {
            return self.weight_files.contains(Path::new(file));
        }
        Path::new(file)
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| WEIGHT_EXTENSIONS.contains(&e))
    }
}

fn is_gpu_device(path: &str) -> bool {
    path.starts_with("/dev/nvidia") || path.starts_with("/dev/dri/")
}

/// One mapping of an smaps file: its header's permissions and path, and
/// its `Rss:` and `Pss:` lines.
struct Mapping<'a> {
    perms: &'a str,
    path: &'a str,
    rss_kb: u64,
    pss_kb: u64,
}

/// The mappings of an smaps file. A header line is `ADDR PERMS OFFSET DEV
/// INODE [PATH]`; the path may hold spaces (` (deleted)`), so it is what
/// follows the fifth field.
fn parse(smaps: &str) -> Vec<Mapping<'_>> {
    let mut maps: Vec<Mapping> = Vec::new();
    for line in smaps.lines() {
        if let Some(rest) = line.strip_prefix("Rss:") {
            if let Some(m) = maps.last_mut() {
                m.rss_kb = kb(rest);
            }
        } else if let Some(rest) = line.strip_prefix("Pss:") {
            if let Some(m) = maps.last_mut() {
                m.pss_kb = kb(rest);
            }
        } else if let Some(header) = header(line) {
            maps.push(header);
        }
    }
    maps
}

/// A mapping's header line, or `None` for a field line (`Rss:   4 kB`).
fn header(line: &str) -> Option<Mapping<'_>> {
    let (range, rest) = line.split_once(' ')?;
    if !range.contains('-') || !range.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
        return None;
    }
    let mut fields = rest.splitn(5, ' ');
    let perms = fields.next()?;
    let _offset = fields.next()?;
    let _dev = fields.next()?;
    let _inode = fields.next()?;
    let path = fields.next().unwrap_or("").trim_start();
    Some(Mapping {
        perms,
        path,
        rss_kb: 0,
        pss_kb: 0,
    })
}

fn kb(field: &str) -> u64 {
    field
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapping(range: &str, perms: &str, path: &str, rss_kb: u64) -> String {
        format!(
            "{range} {perms} 00000000 00:00 0          {path}\nSize: {rss_kb} kB\nRss: {rss_kb} kB\nPss: {} kB\nAnonymous: 0 kB\n",
            rss_kb / 2
        )
    }

    #[test]
    fn each_kind_of_mapping_lands_in_its_part() {
        let text = [
            mapping("55d0-55d1", "r--p", "/usr/bin/python3.11", 100),
            mapping("55d1-55d2", "r-xp", "/usr/bin/python3.11", 200),
            mapping("55e0-55e1", "rw-p", "[heap]", 1000),
            mapping("7f00-7f01", "rw-p", "", 3000),
            mapping("7f01-7f02", "rw-s", "/dev/shm/psm_abc", 64),
            mapping("7f02-7f03", "rw-s", "/memfd:buffer (deleted)", 32),
            mapping("7f03-7f04", "r--s", "/models/m/model.safetensors", 5000),
            mapping(
                "7f04-7f05",
                "r--p",
                "/usr/lib/x86_64-linux-gnu/libc.so.6",
                40,
            ),
            mapping(
                "7f05-7f06",
                "r-xp",
                "/usr/lib/x86_64-linux-gnu/libc.so.6",
                400,
            ),
            mapping("7f06-7f07", "r--p", "/usr/share/locale/de/x.mo", 8),
            mapping("7ffd-7ffe", "rw-p", "[stack]", 132),
            mapping("7ffe-7fff", "r--p", "[vvar]", 4),
        ]
        .concat();
        let split = Classifier::new(&[]).split(&text);
        let got: Vec<(MappingKind, u64)> = split.rss_by_kind().collect();
        let kib = |k: u64| k * 1024;
        assert_eq!(
            got,
            vec![
                (MappingKind::Heap, kib(4000)),
                (MappingKind::Driver, 0),
                (MappingKind::Pinned, 0),
                (MappingKind::Shm, kib(96)),
                (MappingKind::Weights, kib(5000)),
                (MappingKind::Code, kib(740)),
                (MappingKind::Stack, kib(132)),
                (MappingKind::Rest, kib(12)),
            ]
        );
        assert_eq!(split.pss_bytes(MappingKind::Weights), kib(2500));
        assert_eq!(split.total_rss_bytes(), kib(9980));
    }

    #[test]
    fn shared_anonymous_memory_is_pinned_in_a_process_that_maps_a_gpu() {
        let pinned = mapping("7f10-7f20", "rw-s", "/dev/zero (deleted)", 2048);
        let without = Classifier::new(&[]).split(&pinned);
        assert_eq!(without.rss_bytes(MappingKind::Rest), 2048 * 1024);
        let with_gpu = [
            pinned,
            mapping("7f20-7f21", "rw-s", "/dev/nvidiactl", 56),
            mapping("7f21-7f22", "rw-s", "/dev/nvidia0", 8),
            mapping("7f22-7f23", "rw-s", "/dev/nvidia-uvm", 4),
        ]
        .concat();
        let split = Classifier::new(&[]).split(&with_gpu);
        assert_eq!(split.rss_bytes(MappingKind::Pinned), 2048 * 1024);
        assert_eq!(split.rss_bytes(MappingKind::Driver), 68 * 1024);
        assert_eq!(split.rss_bytes(MappingKind::Rest), 0);
    }

    #[test]
    fn named_weight_files_replace_the_extension_rule() {
        let dir = tempfile::tempdir().unwrap();
        let named = dir.path().join("weights.dat");
        std::fs::write(&named, b"w").unwrap();
        let text = [
            mapping("1000-2000", "r--s", named.to_str().unwrap(), 300),
            mapping("2000-3000", "r--s", "/other/model.safetensors", 700),
        ]
        .concat();
        let split = Classifier::new(std::slice::from_ref(&named)).split(&text);
        assert_eq!(split.rss_bytes(MappingKind::Weights), 300 * 1024);
        assert_eq!(split.rss_bytes(MappingKind::Rest), 700 * 1024);
    }

    #[test]
    fn this_process_splits_into_parts_that_sum_to_its_rss() {
        let split = Classifier::new(&[]).read(std::process::id()).unwrap();
        // The test binary's code is mapped executable and resident.
        assert!(split.rss_bytes(MappingKind::Code) > 0, "{split:?}");
        assert!(split.rss_bytes(MappingKind::Heap) > 0, "{split:?}");
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let vm_rss_kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .map(kb)
            .unwrap();
        let total_kb = split.total_rss_bytes() / 1024;
        // The kernel's VmRSS counters lag per thread by up to 64 pages each;
        // the split is exact per mapping. Within 8 MiB of each other.
        assert!(
            total_kb.abs_diff(vm_rss_kb) < 8 * 1024,
            "{total_kb} kB split vs VmRSS {vm_rss_kb} kB"
        );
    }
}
