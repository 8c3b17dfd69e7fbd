//! The readings of the catalogued resources (`sampler::resources`): one map
//! per sample and per phase edge, keyed by the resource's key (`shm`, …).
//!
//! The record knows a key and its bytes, nothing of what a resource is: a
//! resource added to the catalogue is carried, written and read back here
//! without a line changed. In samples.csv and events.csv the map is one
//! `readings` cell of `KEY=BYTES` entries separated by spaces, e.g.
//! `shm=67108864`, empty where nothing was read (and in older records).

use std::collections::BTreeMap;

/// Bytes per resource key; a key without an entry was not read at that instant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Readings(BTreeMap<String, u64>);

impl Readings {
    /// The bytes of `key`; `None` where it was not read.
    pub fn get(&self, key: &str) -> Option<u64> {
        self.0.get(key).copied()
    }

    pub fn set(&mut self, key: &str, bytes: u64) {
        self.0.insert(key.to_string(), bytes);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The keys read, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.0.keys().map(String::as_str)
    }

    /// The `readings` cell: `KEY=BYTES` entries separated by spaces.
    pub fn cell(&self) -> String {
        let entries: Vec<String> = self.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
        entries.join(" ")
    }

    /// The readings of a `readings` cell; `Err` names the entry that is not
    /// `KEY=BYTES`.
    pub fn parse(cell: &str) -> Result<Readings, String> {
        let mut out = Readings::default();
        for entry in cell.split_whitespace() {
            let parsed = entry
                .split_once('=')
                .and_then(|(k, v)| Some((k, v.parse::<u64>().ok()?)))
                .filter(|(k, _)| is_key(k));
            let Some((key, bytes)) = parsed else {
                return Err(format!(
                    "readings entry {entry:?} is not KEY=BYTES (a lowercase key, whole bytes)"
                ));
            };
            out.set(key, bytes);
        }
        Ok(out)
    }
}

/// A resource key: lowercase letters, digits and `_`, as files and budget keys name it.
pub fn is_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_round_trips() {
        let mut r = Readings::default();
        r.set("shm", 64 << 20);
        r.set("a_b", 0);
        assert_eq!(r.cell(), "a_b=0 shm=67108864");
        assert_eq!(Readings::parse(&r.cell()).unwrap(), r);
        assert_eq!(Readings::parse("").unwrap(), Readings::default());
    }

    #[test]
    fn a_bad_entry_is_named() {
        let e = Readings::parse("shm=12 Bad=3").unwrap_err();
        assert!(e.contains("\"Bad=3\""), "{e}");
        assert!(Readings::parse("shm=-1").is_err());
        assert!(Readings::parse("shm").is_err());
    }
}
