//! A scenario and the header of a record made from it, both ways: the one
//! place a new record's header is built (`Scenario::header`: for a plan's
//! runs and for an attached process alike) and the one place a saved
//! header's scenario is read back (`Scenario::of_header`: the gate, a
//! baseline's save, the budget lines, `check`'s re-runs). The scenario text
//! travels in the header whole, `[[strategy]]` tables included, so reading
//! it back defines a user's strategies again. Nothing here runs anything.

use super::{parse_str, Scenario, ScenarioError};
use crate::fsutil::now_unix_s;
use crate::record::{Header, SCHEMA_VERSION};

impl Scenario {
    /// The scenario a record was made from, parsed again from its header
    /// (its name, origin and text as they were used).
    pub fn of_header(header: &Header) -> Result<Scenario, ScenarioError> {
        parse_str(
            &header.scenario,
            &header.scenario_origin,
            &header.scenario_toml,
        )
    }

    /// The header of a new record of this scenario on `device` (as the
    /// record names it: `cuda:0,1` for runs spread over GPUs), made by the
    /// command line `command`, sampled every `interval_s`: this memrel, now,
    /// this machine and the catalogued resources it reads. What the runs
    /// add (models, a program, an attached process, the container, the page
    /// cache) is empty here, for the caller to set.
    pub fn header(&self, device: String, command: Vec<String>, interval_s: f64) -> Header {
        Header {
            schema_version: SCHEMA_VERSION,
            memrel_version: env!("CARGO_PKG_VERSION").to_string(),
            memrel_commit: Some(crate::build_info::COMMIT.to_string()),
            scenario: self.name.clone(),
            scenario_origin: self.origin.clone(),
            scenario_toml: self.toml_text.clone(),
            device,
            command,
            created_unix_s: now_unix_s(),
            host: crate::host::describe(),
            sampler: "procfs-statm".to_string(),
            interval_s,
            cycles: self.cycles,
            retention_threshold_bytes: self.thresholds.retention_threshold_bytes,
            models: Vec::new(),
            program: None,
            attached: None,
            container: None,
            page_cache: None,
            probed: crate::sampler::resources::probed(),
            catalogue: Some(crate::sampler::resources::keys()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_reads_back_as_its_scenario_with_its_own_strategies() {
        let text = "description = \"t\"\nstrategies = [\"drop\", \"mine-of-header\"]\ncycles = 2\n\
                    [[strategy]]\nname = \"mine-of-header\"\nenv = { MALLOC_ARENA_MAX = \"2\" }\n\
                    [models.m]\nfake_anon_mib = 1\n[workload]\nsteps = [\"load m\", \"unload m\"]\n";
        let scenario = parse_str("t", "t.toml", text).expect("parses");
        let header = scenario.header("cpu".into(), vec!["memrel".into()], 0.01);
        assert_eq!(header.scenario_toml, text);
        assert_eq!(header.cycles, 2);
        let again = Scenario::of_header(&header).expect("reads back");
        assert_eq!(again.strategies, ["drop", "mine-of-header"]);
        assert_eq!(again.toml_text, scenario.toml_text);
    }
}
