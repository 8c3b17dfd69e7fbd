//! Which facts of the machine differ between a baseline's record and the
//! new one: glibc, kernel, distribution, CPU model and count, RAM, GPU,
//! driver, CUDA and the allocator libraries' versions, each of which can
//! move memory numbers with no change in the code. The hostname is never
//! one of them: CI runners get a new one every job.
//!
//! Two levels. A baseline made on another kind of machine (another
//! `machine` key, `crate::machine`) is [`OtherMachine`]: `memrel check`
//! names the key facts that differ and exits 2, unless `--any-machine`,
//! when every verdict row of the scenario says it judged across machines.
//! Within one kind of machine, a fact outside the key that differs (the
//! kernel's build, the full driver version, a package revision) is a
//! warning and a line in verdict.md's headline, never a verdict. Compares
//! the records' `Host`s, nothing else; reads no files. The facts themselves
//! and how a difference reads are `machine::facts`; this file is the
//! gate's policy about them.

use serde::{Deserialize, Serialize};

use crate::machine::facts::{difference, facts, MachineDifference};
use crate::machine::{describe, differences};
use crate::record::Host;

/// What comparing one scenario's two machines found.
#[derive(Debug, Clone, PartialEq)]
pub struct MachineCheck {
    pub differences: Vec<MachineDifference>,
    /// The check's warnings: the differences, and a record made before
    /// memrel recorded the full facts.
    pub warnings: Vec<String>,
}

/// A baseline made on another kind of machine than the runs checked.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OtherMachine {
    pub scenario: String,
    /// The `machine` keys of each side.
    pub baseline_machine: String,
    pub new_machine: String,
    /// The key facts that differ, as (fact, baseline, new).
    pub differences: Vec<MachineDifference>,
}

impl OtherMachine {
    /// `scenario s: the baseline was made on machine A, these runs on B (CPUs 2 → 16)`.
    pub fn sentence(&self) -> String {
        let differ = if self.differences.is_empty() {
            String::new()
        } else {
            format!(" ({})", describe(&self.differences))
        };
        format!(
            "scenario {}: the baseline was made on machine {}, these runs on {}{differ}",
            self.scenario, self.baseline_machine, self.new_machine
        )
    }

    /// The note each verdict row of the scenario gets under `--any-machine`.
    pub fn row_note(&self) -> String {
        format!(
            "across machines (--any-machine): baseline on {}, new on {}",
            self.baseline_machine, self.new_machine
        )
    }
}

/// The baseline's machine against the new record's for `scenario`: `None`
/// when they are one kind of machine, or when either record has no full
/// facts (key `unknown`: [`compare`] warns about that instead).
pub fn other_machine(scenario: &str, baseline: &Host, new: &Host) -> Option<OtherMachine> {
    let (base_key, new_key) = (crate::machine::key(baseline), crate::machine::key(new));
    if base_key == new_key
        || base_key == crate::machine::UNKNOWN
        || new_key == crate::machine::UNKNOWN
    {
        return None;
    }
    let differences = crate::machine::key_differences(baseline, new)
        .unwrap_or_default()
        .into_iter()
        .map(|(fact, b, n)| difference(scenario, &fact, &b, &n))
        .collect();
    Some(OtherMachine {
        scenario: scenario.to_string(),
        baseline_machine: base_key,
        new_machine: new_key,
        differences,
    })
}

/// Compares the baseline's machine with the new record's for `scenario`.
pub fn compare(scenario: &str, baseline: &Host, new: &Host) -> MachineCheck {
    let both_full = baseline.machine.is_some() && new.machine.is_some();
    let (base_facts, new_facts) = (facts(baseline, both_full), facts(new, both_full));
    let differences: Vec<MachineDifference> = differences(&base_facts, &new_facts)
        .into_iter()
        .map(|(fact, b, n)| difference(scenario, &fact, &b, &n))
        .collect();
    let mut warnings = Vec::new();
    if !differences.is_empty() {
        warnings.push(format!(
            "scenario {scenario}: the machine differs from the baseline's: {} (memory numbers can move for that alone)",
            describe(&differences)
        ));
    }
    if !both_full {
        let which = if baseline.machine.is_none() {
            "the baseline's record"
        } else {
            "the new record"
        };
        warnings.push(format!(
            "scenario {scenario}: {which} predates memrel's machine facts: distribution, CPU model, GPU, driver, CUDA and allocator libraries were not compared (re-save the baseline to record them)"
        ));
    }
    MachineCheck {
        differences,
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fixture::header;
    use crate::record::Machine;

    /// The fixture's host with the full facts of a 4-CPU Ubuntu runner.
    fn ubuntu() -> Host {
        let mut host = header("s", 3).host;
        host.hostname = "runner-1".into();
        host.libc = "glibc 2.39".into();
        host.cpus = 4;
        host.machine = Some(Machine {
            distribution: Some("Ubuntu 24.04.1 LTS".into()),
            cpu_model: Some("AMD EPYC 7763 64-Core Processor".into()),
            gpus: Vec::new(),
            gpu_driver: None,
            cuda: None,
            allocators: [("libjemalloc2".to_string(), "5.3.0-2build1".to_string())]
                .into_iter()
                .collect(),
            name: None,
        });
        host
    }

    #[test]
    fn the_hostname_alone_is_no_difference() {
        let base = ubuntu();
        let mut new = ubuntu();
        new.hostname = "runner-2".into();
        let check = compare("s", &base, &new);
        assert!(check.differences.is_empty(), "{check:?}");
        assert!(check.warnings.is_empty(), "{check:?}");
    }

    #[test]
    fn glibc_cpus_distribution_and_allocators_are_listed() {
        let base = ubuntu();
        let mut new = ubuntu();
        new.hostname = "vm".into();
        new.libc = "glibc 2.36".into();
        new.cpus = 2;
        let m = new.machine.as_mut().unwrap();
        m.distribution = Some("Debian GNU/Linux 12 (bookworm)".into());
        m.allocators.clear();
        m.allocators
            .insert("libmimalloc2.0".into(), "2.0.9+ds-2".into());
        let check = compare("s", &base, &new);
        assert_eq!(
            describe(&check.differences),
            "glibc 2.39 → 2.36, distribution Ubuntu 24.04.1 LTS → Debian GNU/Linux 12 (bookworm), \
             CPUs 4 → 2, libjemalloc2 5.3.0-2build1 → absent, libmimalloc2.0 absent → 2.0.9+ds-2"
        );
        assert_eq!(check.warnings.len(), 1, "{check:?}");
        assert!(check.warnings[0].starts_with(
            "scenario s: the machine differs from the baseline's: glibc 2.39 → 2.36, distribution"
        ));
        assert!(!check.warnings[0].contains("runner"), "{check:?}");
    }

    #[test]
    fn a_gpu_and_its_driver_are_listed() {
        let base = ubuntu();
        let mut new = ubuntu();
        let m = new.machine.as_mut().unwrap();
        m.gpus = vec!["NVIDIA H100 80GB HBM3".into()];
        m.gpu_driver = Some("580.65.06".into());
        m.cuda = Some("13.0".into());
        let check = compare("s", &base, &new);
        assert_eq!(
            describe(&check.differences),
            "GPU absent → NVIDIA H100 80GB HBM3, driver absent → 580.65.06, CUDA absent → 13.0"
        );
    }

    #[test]
    fn a_baseline_made_before_the_full_facts_compares_what_it_has() {
        let mut base = ubuntu();
        base.machine = None;
        base.os = "Linux (Ubuntu 24.04)".into();
        let mut new = ubuntu();
        new.os = "Linux (Ubuntu 24.04)".into();
        new.total_memory_bytes = 16 << 30;
        let check = compare("s", &base, &new);
        assert_eq!(describe(&check.differences), "RAM 8.0 GiB → 16.0 GiB");
        assert_eq!(check.warnings.len(), 2, "{check:?}");
        assert!(check.warnings[1].contains("the baseline's record predates"));
    }

    #[test]
    fn another_kind_of_machine_names_its_key_and_the_facts() {
        let base = ubuntu();
        let mut fresh = ubuntu();
        fresh.hostname = "runner-9".into();
        fresh.kernel = format!("{}-build2", base.kernel);
        assert_eq!(other_machine("s", &base, &fresh), None);
        let mut other = ubuntu();
        other.cpus = 2;
        let o = other_machine("s", &base, &other).expect("2 CPUs is another machine");
        assert_ne!(o.baseline_machine, o.new_machine);
        assert!(
            o.baseline_machine
                .starts_with("amd-epyc-7763-4c-8g-glibc2.39-"),
            "{o:?}"
        );
        assert_eq!(describe(&o.differences), "CPUs 4 → 2");
        assert!(o.sentence().ends_with("(CPUs 4 → 2)"), "{}", o.sentence());
        assert!(o
            .row_note()
            .starts_with("across machines (--any-machine): baseline on amd-epyc-7763-4c"));
        let mut old = ubuntu();
        old.machine = None;
        assert_eq!(
            other_machine("s", &old, &other),
            None,
            "unknown: a warning, not this rule"
        );
    }
}
