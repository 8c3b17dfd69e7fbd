//! The `machine` key: which kind of machine a record was made on, so results
//! from a fleet can be grouped (`memrel compare`), and a baseline is only
//! judged against runs of its own kind of machine (`memrel check`).
//!
//! The key is derived from the facts every record carries (`record::Host`),
//! normalised so that two machines of the same kind get the same key even
//! where a fresh VM or CI runner differs in what does not define it:
//!
//! | in the key | as |
//! |---|---|
//! | CPU model | the brand string, trimmed |
//! | CPU count | as recorded |
//! | RAM | whole GiB, rounded up (the kernel keeps a little back) |
//! | kernel | the upstream release only (`6.18.44` of `6.18.44-fc-v595`) |
//! | glibc | its version |
//! | distribution | name and version (`Ubuntu 24.04 LTS` of `Ubuntu 24.04.3 LTS`) |
//! | GPUs | each model, sorted |
//! | driver | its branch (`580` of `580.159.04`) |
//! | CUDA | the newest the driver supports (`13.0`) |
//! | allocators | each library's upstream version (`5.3.0` of `5.3.0-1`) |
//!
//! Never in the key: the hostname, uptime, load, the kernel's and packages'
//! build suffixes, the full driver version (those still show as warnings in
//! `memrel check`, `gate::machine`).
//!
//! The key reads `label-hash`: a readable label (`amd-epyc-2c-24g-glibc2.36`,
//! with the GPU: `…-h100-80gb-hbm3`) and the first 8 hex digits of a hash of
//! every key fact, so two kinds of machine that share a label still differ.
//! `MEMREL_MACHINE=NAME` at record time names the machine instead (a fleet's
//! node type, a runner label): the key is then that name. A record made
//! before memrel recorded the full facts has the key [`UNKNOWN`].
//!
//! Pure: reads a `Host`, no files (only [`name_from_env`] reads the
//! environment, at record time).

mod clash;
pub mod facts;

pub use clash::{clashes, Keyed};

use std::collections::BTreeMap;

use crate::record::Host;

/// The key of a record without the full machine facts.
pub const UNKNOWN: &str = "unknown";

/// The variable that names the machine at record time.
pub const NAME_ENV: &str = "MEMREL_MACHINE";

/// The machine's name from `MEMREL_MACHINE`, when set to a usable one
/// (letters, digits, `.`, `_`, `-`; anything else is replaced by `-`).
pub fn name_from_env() -> Option<String> {
    let raw = std::env::var(NAME_ENV).ok()?;
    let name = sanitize(raw.trim());
    (!name.is_empty() && name != UNKNOWN).then_some(name)
}

fn sanitize(raw: &str) -> String {
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// The facts that make up the key, normalised (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyFacts {
    pub cpu_model: String,
    pub cpus: usize,
    pub ram_gib: u64,
    pub kernel: String,
    pub glibc: String,
    pub distribution: String,
    /// GPU models, sorted.
    pub gpus: Vec<String>,
    pub driver_branch: String,
    pub cuda: String,
    /// Package → upstream version.
    pub allocators: BTreeMap<String, String>,
}

/// A fact a record does not have, as people read it.
pub const ABSENT: &str = "absent";

impl KeyFacts {
    /// The key facts of `host`; `None` for a record without the full facts.
    pub fn of(host: &Host) -> Option<KeyFacts> {
        let m = host.machine.as_ref()?;
        let absent = |v: &Option<String>| v.clone().unwrap_or_else(|| ABSENT.to_string());
        let mut gpus = m.gpus.clone();
        gpus.sort();
        Some(KeyFacts {
            cpu_model: absent(&m.cpu_model).trim().to_string(),
            cpus: host.cpus,
            ram_gib: host.total_memory_bytes.div_ceil(1 << 30),
            kernel: upstream_kernel(&host.kernel),
            glibc: host
                .libc
                .strip_prefix("glibc ")
                .unwrap_or(&host.libc)
                .to_string(),
            distribution: m
                .distribution
                .as_deref()
                .map_or_else(|| ABSENT.to_string(), distribution),
            gpus,
            driver_branch: m.gpu_driver.as_deref().map_or_else(
                || ABSENT.to_string(),
                |d| d.split('.').next().unwrap_or(d).to_string(),
            ),
            cuda: absent(&m.cuda),
            allocators: m
                .allocators
                .iter()
                .map(|(p, v)| (p.clone(), upstream_version(v)))
                .collect(),
        })
    }

    /// Every fact as people read it, in a fixed order: what the hash covers
    /// and what a difference names.
    pub fn list(&self) -> Vec<(String, String)> {
        let gpus = if self.gpus.is_empty() {
            ABSENT.to_string()
        } else {
            self.gpus.join(" + ")
        };
        let mut out = vec![
            ("CPU model".to_string(), self.cpu_model.clone()),
            ("CPUs".to_string(), self.cpus.to_string()),
            ("RAM".to_string(), format!("{} GiB", self.ram_gib)),
            ("kernel".to_string(), self.kernel.clone()),
            ("glibc".to_string(), self.glibc.clone()),
            ("distribution".to_string(), self.distribution.clone()),
            ("GPU".to_string(), gpus),
            ("driver".to_string(), self.driver_branch.clone()),
            ("CUDA".to_string(), self.cuda.clone()),
        ];
        for (package, version) in &self.allocators {
            out.push((package.clone(), version.clone()));
        }
        out
    }

    /// `amd-epyc-2c-24g-glibc2.36`, `…-h100-80gb-hbm3x2` with GPUs.
    pub fn label(&self) -> String {
        let mut label = format!(
            "{}-{}c-{}g-glibc{}",
            cpu_slug(&self.cpu_model),
            self.cpus,
            self.ram_gib,
            sanitize(&self.glibc)
        );
        if let Some(first) = self.gpus.first() {
            label.push('-');
            label.push_str(&gpu_slug(first));
            if self.gpus.len() > 1 {
                label.push_str(&format!("x{}", self.gpus.len()));
            }
        }
        label
    }

    /// The derived key: the label and 8 hex digits of the facts' hash.
    pub fn key(&self) -> String {
        let mut text = String::new();
        for (fact, value) in self.list() {
            text.push_str(&fact);
            text.push('=');
            text.push_str(&value);
            text.push('\n');
        }
        format!(
            "{}-{:08x}",
            self.label(),
            crate::fsutil::fnv1a64(text.bytes()) >> 32
        )
    }
}

/// The `machine` key of `host`: its `MEMREL_MACHINE` name, else the key
/// derived from its facts, else [`UNKNOWN`].
pub fn key(host: &Host) -> String {
    if let Some(name) = host.machine.as_ref().and_then(|m| m.name.as_deref()) {
        return name.to_string();
    }
    KeyFacts::of(host).map_or_else(|| UNKNOWN.to_string(), |f| f.key())
}

/// The key facts that differ between two machines, as (fact, a, b);
/// `None` when either side has no full facts (nothing to compare).
pub fn key_differences(a: &Host, b: &Host) -> Option<Vec<Difference>> {
    Some(differences(
        &KeyFacts::of(a)?.list(),
        &KeyFacts::of(b)?.list(),
    ))
}

/// One fact that differs between two machines: (fact, a's value, b's value).
pub type Difference = (String, String, String);

/// The facts of two machines' lists (fact, value) that differ, as
/// (fact, a, b): a's facts in a's order, then the facts only b has; a fact
/// one side lacks reads [`ABSENT`] there. The one diff of machine facts:
/// the key's (`key_differences`) and the gate's (`gate::machine`).
pub fn differences(a: &[(String, String)], b: &[(String, String)]) -> Vec<Difference> {
    let value = |list: &[(String, String)], fact: &str| {
        list.iter()
            .find(|(f, _)| f == fact)
            .map_or(ABSENT.to_string(), |(_, v)| v.clone())
    };
    let mut out = Vec::new();
    for (fact, x) in a {
        let y = value(b, fact);
        if *x != y {
            out.push((fact.clone(), x.clone(), y));
        }
    }
    for (fact, y) in b {
        if !a.iter().any(|(f, _)| f == fact) {
            out.push((fact.clone(), ABSENT.to_string(), y.clone()));
        }
    }
    out
}

/// A difference of machine facts as [`describe`] reads it: (fact, one
/// side's value, the other's).
pub trait AsDifference {
    fn parts(&self) -> (&str, &str, &str);
}

impl AsDifference for Difference {
    fn parts(&self) -> (&str, &str, &str) {
        (&self.0, &self.1, &self.2)
    }
}

/// `glibc 2.36 → 2.39, CPUs 2 → 16`: each distinct difference once, in
/// order (a difference several scenarios share is said once).
pub fn describe<D: AsDifference>(differences: &[D]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for d in differences {
        let (fact, a, b) = d.parts();
        let part = format!("{fact} {a} → {b}");
        if !parts.contains(&part) {
            parts.push(part);
        }
    }
    parts.join(", ")
}

/// The upstream part of a kernel release: up to the first `-` or `+`.
fn upstream_kernel(release: &str) -> String {
    release
        .split(['-', '+'])
        .next()
        .unwrap_or(release)
        .trim()
        .to_string()
}

/// A Debian version's upstream part: no epoch (`1:`), no revision (`-1`).
/// `so:` entries (no package known) stay as they are.
fn upstream_version(version: &str) -> String {
    if version.starts_with("so:") {
        return version.to_string();
    }
    let no_epoch = version.split_once(':').map_or(version, |(_, v)| v);
    no_epoch
        .rsplit_once('-')
        .map_or(no_epoch, |(v, _)| v)
        .to_string()
}

/// A distribution's name and version: the parenthesised codename dropped,
/// a point release cut to `major.minor` (`Ubuntu 24.04.3 LTS` → `Ubuntu 24.04 LTS`).
fn distribution(pretty: &str) -> String {
    let no_codename = match pretty.find('(') {
        Some(i) => &pretty[..i],
        None => pretty,
    };
    no_codename
        .split_whitespace()
        .map(|word| {
            let parts: Vec<&str> = word.split('.').collect();
            if parts.len() > 2 && parts.iter().all(|p| p.chars().all(|c| c.is_ascii_digit())) {
                parts[..2].join(".")
            } else {
                word.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `AMD EPYC 7763 64-Core Processor` → `amd-epyc-7763`;
/// `Intel(R) Xeon(R) Platinum 8480+` → `intel-xeon-platinum`.
fn cpu_slug(model: &str) -> String {
    let lower = model
        .to_lowercase()
        .replace("(r)", " ")
        .replace("(tm)", " ");
    let words: Vec<String> = lower
        .split(|c: char| c.is_whitespace() || c == '@')
        .map(sanitize)
        .map(|w| w.trim_matches(['-', '.']).to_string())
        .filter(|w| {
            !w.is_empty()
                && !matches!(
                    w.as_str(),
                    "processor" | "cpu" | "with" | "radeon" | "graphics"
                )
                && !w.contains("-core")
                && !w.ends_with("ghz")
        })
        .take(3)
        .collect();
    if words.is_empty() {
        "cpu".to_string()
    } else {
        words.join("-")
    }
}

/// `NVIDIA H100 80GB HBM3` → `h100-80gb-hbm3`.
fn gpu_slug(model: &str) -> String {
    let words: Vec<String> = model
        .to_lowercase()
        .split_whitespace()
        .filter(|w| !matches!(*w, "nvidia" | "geforce" | "tesla"))
        .map(sanitize)
        .take(3)
        .collect();
    if words.is_empty() {
        "gpu".to_string()
    } else {
        words.join("-")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fixture::header;
    use crate::record::Machine;

    /// This VM as results/baselines/ci records it.
    pub(super) fn vm() -> Host {
        let mut host = header("s", 3).host;
        host.os = "Linux (Debian GNU/Linux 12)".into();
        host.kernel = "6.18.44-fc-v782".into();
        host.total_memory_bytes = 25_276_063_744;
        host.machine = Some(Machine {
            distribution: Some("Debian GNU/Linux 12 (bookworm)".into()),
            cpu_model: Some("AMD EPYC".into()),
            allocators: [
                ("libjemalloc2", "5.3.0-1"),
                ("libmimalloc2.0", "2.0.9+ds-2"),
                ("libtcmalloc-minimal4", "2.10-1"),
            ]
            .into_iter()
            .map(|(p, v)| (p.to_string(), v.to_string()))
            .collect(),
            ..Machine::default()
        });
        host
    }

    /// The GPU machine's host as results/baselines/gpu records it.
    pub(super) fn h100() -> Host {
        let mut host = header("s", 3).host;
        host.kernel = "6.18.44-fc-v657-gpu".into();
        host.libc = "glibc 2.39".into();
        host.cpus = 16;
        host.total_memory_bytes = 135_148_564_480;
        host.machine = Some(Machine {
            distribution: Some("Ubuntu 24.04.3 LTS".into()),
            cpu_model: Some("Intel(R) Xeon(R) Processor".into()),
            gpus: vec!["NVIDIA H100 80GB HBM3".into()],
            gpu_driver: Some("580.159.04".into()),
            cuda: Some("13.0".into()),
            ..Machine::default()
        });
        host
    }

    #[test]
    fn keys_read_as_the_kind_of_machine() {
        let vm = key(&vm());
        assert!(vm.starts_with("amd-epyc-2c-24g-glibc2.36-"), "{vm}");
        assert_eq!(vm.len(), "amd-epyc-2c-24g-glibc2.36-".len() + 8, "{vm}");
        let gpu = key(&h100());
        assert!(
            gpu.starts_with("intel-xeon-16c-126g-glibc2.39-h100-80gb-hbm3-"),
            "{gpu}"
        );
    }

    /// A fresh VM of the same class: another hostname, kernel build, a few
    /// KiB less RAM, a distribution point release, a package revision.
    #[test]
    fn what_a_fresh_vm_of_the_same_class_changes_keeps_the_key() {
        let base = vm();
        let mut fresh = vm();
        fresh.hostname = "runner-7".into();
        fresh.kernel = "6.18.44-fc-v595".into();
        fresh.total_memory_bytes = 25_276_514_304 - 300 * 1024;
        let m = fresh.machine.as_mut().unwrap();
        m.distribution = Some("Debian GNU/Linux 12 (bookworm)".into());
        m.allocators
            .insert("libjemalloc2".into(), "5.3.0-1+deb12u1".into());
        assert_eq!(key(&base), key(&fresh));
        assert_eq!(key_differences(&base, &fresh), Some(Vec::new()));
        let mut ubuntu = h100();
        ubuntu.machine.as_mut().unwrap().distribution = Some("Ubuntu 24.04.1 LTS".into());
        ubuntu.machine.as_mut().unwrap().gpu_driver = Some("580.65.06".into());
        assert_eq!(key(&h100()), key(&ubuntu));
    }

    #[test]
    fn what_defines_the_machine_changes_the_key_and_is_named() {
        let base = vm();
        let mut other = vm();
        other.cpus = 4;
        other.kernel = "6.19.1-fc".into();
        other
            .machine
            .as_mut()
            .unwrap()
            .allocators
            .remove("libjemalloc2");
        assert_ne!(key(&base), key(&other));
        let d = key_differences(&base, &other).unwrap();
        assert_eq!(
            describe(&d),
            "CPUs 2 → 4, kernel 6.18.44 → 6.19.1, libjemalloc2 5.3.0 → absent"
        );
        // Same label, other facts: the hash tells them apart.
        let mut driver = h100();
        driver.machine.as_mut().unwrap().gpu_driver = Some("590.1".into());
        assert_eq!(
            KeyFacts::of(&driver).unwrap().label(),
            KeyFacts::of(&h100()).unwrap().label()
        );
        assert_ne!(key(&driver), key(&h100()));
    }

    #[test]
    fn a_record_without_facts_is_unknown_and_a_name_wins() {
        let mut old = vm();
        old.machine = None;
        assert_eq!(key(&old), UNKNOWN);
        assert_eq!(key_differences(&old, &vm()), None);
        let mut named = vm();
        named.machine.as_mut().unwrap().name = Some("ci-2core".into());
        assert_eq!(key(&named), "ci-2core");
    }

    #[test]
    fn normalisers() {
        assert_eq!(upstream_kernel("6.8.0-45-generic"), "6.8.0");
        assert_eq!(upstream_version("1:2.10-1"), "2.10");
        assert_eq!(upstream_version("2.0.9+ds-2"), "2.0.9+ds");
        assert_eq!(
            upstream_version("so:libjemalloc.so.2"),
            "so:libjemalloc.so.2"
        );
        assert_eq!(distribution("Ubuntu 24.04.3 LTS"), "Ubuntu 24.04 LTS");
        assert_eq!(
            distribution("Debian GNU/Linux 12 (bookworm)"),
            "Debian GNU/Linux 12"
        );
        assert_eq!(cpu_slug("AMD EPYC 7763 64-Core Processor"), "amd-epyc-7763");
        assert_eq!(
            cpu_slug("Intel(R) Xeon(R) Platinum 8480+"),
            "intel-xeon-platinum"
        );
        assert_eq!(gpu_slug("NVIDIA H200"), "h200");
        assert_eq!(sanitize("gpu a/b"), "gpu-a-b");
    }
}
