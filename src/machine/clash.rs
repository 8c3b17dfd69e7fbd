//! A key clash: two records under one `machine` key whose key facts differ.
//! A derived key cannot clash short of a hash collision; a name given with
//! `MEMREL_MACHINE` can (two node types given one name), and grouping their
//! numbers as one machine would be wrong, so it is an error naming both.

use super::{describe, KeyFacts, UNKNOWN};
use crate::record::Host;

/// One record's machine, for the clash check.
pub struct Keyed<'a> {
    /// Where the record is (its results directory), for the message.
    pub who: String,
    pub key: String,
    pub host: &'a Host,
}

/// One error per pair of records that share a key but not its facts
/// (records without facts, key `unknown`, never clash).
pub fn clashes(records: &[Keyed]) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen: Vec<(String, &Keyed)> = Vec::new();
    for r in records.iter().filter(|r| r.key != UNKNOWN) {
        let Some(facts) = KeyFacts::of(r.host) else {
            continue;
        };
        let first = seen.iter().find(|(k, _)| *k == r.key).map(|(_, f)| *f);
        let Some(first) = first else {
            seen.push((r.key.clone(), r));
            continue;
        };
        let Some(first_facts) = KeyFacts::of(first.host) else {
            continue;
        };
        if first_facts == facts {
            continue;
        }
        let differ = super::key_differences(first.host, r.host)
            .map(|d| describe(&d))
            .unwrap_or_default();
        out.push(format!(
            "machine key clash: {} and {} both say machine {:?} but are different machines ({differ}); \
             give each kind of machine its own MEMREL_MACHINE name, or leave it unset to derive the key from the facts",
            first.who, r.who, r.key
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::key;
    use super::*;

    fn named(mut host: Host, name: &str) -> Host {
        if let Some(m) = host.machine.as_mut() {
            m.name = Some(name.into());
        }
        host
    }

    #[test]
    fn one_name_on_two_kinds_of_machine_is_an_error_naming_both() {
        let (a, b) = (
            named(super::super::tests::vm(), "node"),
            named(super::super::tests::h100(), "node"),
        );
        let keyed = |who: &str, host| Keyed {
            who: who.into(),
            key: key(host),
            host,
        };
        let errors = clashes(&[keyed("results/a", &a), keyed("results/b", &b)]);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with(
                "machine key clash: results/a and results/b both say machine \"node\""
            ),
            "{errors:?}"
        );
        assert!(errors[0].contains("CPUs 2 → 16"), "{errors:?}");
        // The same kind of machine twice, or unknown twice: no clash.
        let mut old = super::super::tests::vm();
        old.machine = None;
        assert!(clashes(&[
            keyed("a", &a),
            keyed("c", &a),
            keyed("o", &old),
            keyed("p", &old)
        ])
        .is_empty());
    }
}
