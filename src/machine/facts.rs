//! The facts of one machine as people compare them (glibc, kernel,
//! distribution, CPU model and count, RAM, GPU, driver, CUDA and the
//! allocator libraries' versions), and one fact that differs between two
//! records (how it reads: `machine::describe`). The gate judges with them (`gate::machine`: which difference is
//! a warning, which another kind of machine) and `memrel baseline show`
//! prints them; both read them here, so neither reaches into the other.
//! Reads a `Host`, nothing else.

use serde::{Deserialize, Serialize};

use super::ABSENT;
use crate::record::Host;

/// One fact that differs, as people read it (`glibc`, `2.39`, `2.36`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MachineDifference {
    pub scenario: String,
    pub fact: String,
    pub baseline: String,
    pub new: String,
}

impl super::AsDifference for MachineDifference {
    fn parts(&self) -> (&str, &str, &str) {
        (&self.fact, &self.baseline, &self.new)
    }
}

/// One fact of `scenario`'s two machines that differs.
pub fn difference(scenario: &str, fact: &str, baseline: &str, new: &str) -> MachineDifference {
    MachineDifference {
        scenario: scenario.to_string(),
        fact: fact.to_string(),
        baseline: baseline.to_string(),
        new: new.to_string(),
    }
}

/// The facts of one machine as `check` compares them (the full set when
/// its record has them), then its `machine key`, for `memrel baseline show`.
pub fn facts_of(host: &Host) -> Vec<(String, String)> {
    let mut out = facts(host, host.machine.is_some());
    out.push(("machine key".into(), super::key(host)));
    out
}

/// The compared facts of one machine, as people read them. `full`: both
/// records have the full facts (else the OS string stands in for the
/// distribution, and the rest is left out).
pub fn facts(host: &Host, full: bool) -> Vec<(String, String)> {
    let libc = host
        .libc
        .strip_prefix("glibc ")
        .map_or_else(|| host.libc.clone(), str::to_string);
    let mut facts = vec![
        ("glibc".to_string(), libc),
        ("kernel".to_string(), host.kernel.clone()),
    ];
    let machine = host.machine.as_ref().filter(|_| full);
    match machine {
        Some(m) => facts.push(("distribution".into(), or_absent(&m.distribution))),
        None => facts.push(("OS".into(), host.os.clone())),
    }
    if let Some(m) = machine {
        facts.push(("CPU model".into(), or_absent(&m.cpu_model)));
    }
    facts.push(("CPUs".into(), host.cpus.to_string()));
    facts.push((
        "RAM".into(),
        format!(
            "{:.1} GiB",
            host.total_memory_bytes as f64 / (1u64 << 30) as f64
        ),
    ));
    if let Some(m) = machine {
        let gpus = if m.gpus.is_empty() {
            ABSENT.to_string()
        } else {
            m.gpus.join(" + ")
        };
        facts.push(("GPU".into(), gpus));
        facts.push(("driver".into(), or_absent(&m.gpu_driver)));
        facts.push(("CUDA".into(), or_absent(&m.cuda)));
        for (package, version) in &m.allocators {
            facts.push((package.clone(), version.clone()));
        }
    }
    facts
}

fn or_absent(value: &Option<String>) -> String {
    value.clone().unwrap_or_else(|| ABSENT.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_difference_is_described_once_across_scenarios() {
        let d = |s: &str| difference(s, "CPUs", "4", "2");
        assert_eq!(super::super::describe(&[d("a"), d("b")]), "CPUs 4 → 2");
    }
}
