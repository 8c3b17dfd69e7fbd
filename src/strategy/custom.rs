//! Strategies a user defines without code: a name, the environment variables
//! a process starts with and an optional preloaded allocator, written as a
//! TOML `[[strategy]]` table (in a scenario file, or the file `memrel drive
//! --strategy-file` reads), so a server's own knob
//! (`VLLM_SLEEP_MODE_RELEASE_HOST_MEMORY=1`, `OLLAMA_KEEP_ALIVE=0`) is run,
//! compared, gated and advised like a built-in strategy.
//!
//! A definition is made `&'static` once per process (as a strategy with a
//! value is, `param.rs`) and found by [`super::lookup`] after the built-in
//! rows; a record keeps its definitions in its scenario's text, so reading
//! the record back defines them again. It only describes: the orchestrator
//! and the drive apply the environment as they do a built-in's.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, OnceLock};

use serde::{Deserialize, Serialize};

use super::{Allocator, Strategy};

/// One `[[strategy]]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Definition {
    /// How results name it (`a-z`, `0-9`, `-`, `_`, `.`); not a built-in's.
    pub name: String,
    /// Set in the environment the process starts with.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// An allocator preloaded with `LD_PRELOAD`: jemalloc, tcmalloc or mimalloc.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preload: Option<String>,
    /// One line for `memrel list` and the tables (default: its settings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub about: Option<String>,
}

impl Definition {
    /// The strategy it defines, checked: every problem named with its fix.
    fn strategy(&self) -> Result<Strategy, String> {
        let name = self.name.as_str();
        let lead = format!("[[strategy]] {name:?}");
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c))
        {
            return Err(format!(
                "{lead}: a name is lowercase letters, digits, `-`, `_` and `.` (e.g. \"trim-0\")"
            ));
        }
        if super::rows().any(|row| row.name == name) {
            return Err(format!(
                "{lead}: a built-in strategy has that name (see `memrel list`): name yours \
                 otherwise, e.g. \"{name}-mine\""
            ));
        }
        for key in self.env.keys() {
            let valid = !key.is_empty()
                && !key.starts_with(|c: char| c.is_ascii_digit())
                && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid || key == "LD_PRELOAD" {
                return Err(format!(
                    "{lead}: {key:?} is not an environment variable it may set (letters, digits \
                     and `_`; a preload is `preload = \"jemalloc\"`)"
                ));
            }
        }
        let allocator = match self.preload.as_deref() {
            None => Allocator::Glibc,
            Some("jemalloc") => Allocator::Jemalloc,
            Some("tcmalloc") => Allocator::Tcmalloc,
            Some("mimalloc") => Allocator::Mimalloc,
            Some(other) => {
                return Err(format!(
                    "{lead}: preload {other:?} is not an allocator memrel preloads: use \
                     jemalloc, tcmalloc or mimalloc"
                ))
            }
        };
        if self.env.is_empty() && allocator == Allocator::Glibc {
            return Err(format!(
                "{lead}: it sets nothing: give it env = {{ NAME = \"value\" }} or a preload"
            ));
        }
        let env: Vec<(&'static str, &'static str)> = self
            .env
            .iter()
            .map(|(k, v)| (leak(k.clone()), leak(v.clone())))
            .collect();
        let settings: Vec<String> = allocator
            .library()
            .map(|l| format!("LD_PRELOAD={l}"))
            .into_iter()
            .chain(self.env.iter().map(|(k, v)| format!("{k}={v}")))
            .collect();
        let summary = self
            .about
            .clone()
            .unwrap_or_else(|| format!("user-defined: {}", settings.join(" ")));
        Ok(Strategy {
            name: leak(name.to_string()),
            summary: leak(summary),
            explanation: "Defined by the user in a [[strategy]] table: the environment it \
                          sets and the allocator it preloads, applied as a process starts.",
            env: Box::leak(env.into_boxed_slice()),
            allocator,
            ..Strategy::PLAIN
        })
    }
}

/// Every definition made in this process, by name.
fn made() -> std::sync::MutexGuard<'static, HashMap<String, (Definition, &'static Strategy)>> {
    static MADE: OnceLock<Mutex<HashMap<String, (Definition, &'static Strategy)>>> =
        OnceLock::new();
    MADE.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Defines the strategy `def` names (again: the same definition is the same
/// strategy; a different one under a name already defined is an error).
pub fn define(def: &Definition) -> Result<&'static Strategy, String> {
    let mut made = made();
    if let Some((known, strategy)) = made.get(&def.name) {
        if known == def {
            return Ok(strategy);
        }
        return Err(format!(
            "[[strategy]] {:?} is defined twice, differently: give each its own name",
            def.name
        ));
    }
    let strategy: &'static Strategy = Box::leak(Box::new(def.strategy()?));
    made.insert(def.name.clone(), (def.clone(), strategy));
    Ok(strategy)
}

/// The user-defined strategy of that name, if one was defined.
pub fn defined(name: &str) -> Option<&'static Strategy> {
    made().get(name).map(|(_, s)| *s)
}

/// The definition of a user-defined strategy (to keep in a record's
/// scenario), if `name` is one.
pub fn definition(name: &str) -> Option<Definition> {
    made().get(name).map(|(d, _)| d.clone())
}

/// The `[[strategy]]` tables of a TOML file (a drive's `--strategy-file`),
/// each defined; every problem names the file.
pub fn read_file(path: &std::path::Path) -> Result<Vec<&'static Strategy>, String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        #[serde(default)]
        strategy: Vec<Definition>,
    }
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let file: File = toml::from_str(&text).map_err(|e| {
        format!(
            "{shown}: {}",
            e.to_string().lines().collect::<Vec<_>>().join(" ")
        )
    })?;
    if file.strategy.is_empty() {
        return Err(format!(
            "{shown} defines no strategy: write [[strategy]] tables (name, env, preload)"
        ));
    }
    file.strategy
        .iter()
        .map(|d| define(d).map_err(|e| format!("{shown}: {e}")))
        .collect()
}

/// Defines the `[[strategy]]` tables of a record's scenario (the TOML a
/// run or drive kept in its header), so that the commands reading saved
/// results (`compare`, `check`, `advise`, `report`) know the strategies a
/// user defined for it. Other keys of the scenario are not read here.
pub fn define_kept(scenario_toml: &str) -> Result<(), String> {
    #[derive(Deserialize)]
    struct Kept {
        #[serde(default)]
        strategy: Vec<Definition>,
    }
    let kept: Kept = toml::from_str(scenario_toml)
        .map_err(|e| e.to_string().lines().collect::<Vec<_>>().join(" "))?;
    kept.strategy.iter().try_for_each(|d| define(d).map(|_| ()))
}

fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(name: &str, env: &[(&str, &str)], preload: Option<&str>) -> Definition {
        Definition {
            name: name.into(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            preload: preload.map(str::to_string),
            about: None,
        }
    }

    #[test]
    fn a_records_kept_tables_are_defined_and_its_other_keys_ignored() {
        let kept = "cycles = 2\ndevice = \"cpu\"\n\n[[strategy]]\nname = \"kept-knob\"\n\n\
                    [strategy.env]\nKEPT_KNOB = \"1\"\n";
        assert!(crate::strategy::lookup("kept-knob").is_err());
        define_kept(kept).expect("defined");
        let s = crate::strategy::lookup("kept-knob").expect("found after");
        assert_eq!(s.env, &[("KEPT_KNOB", "1")]);
        define_kept(kept).expect("the same table again is the same strategy");
        let other = kept.replace("\"1\"", "\"2\"");
        assert!(define_kept(&other).unwrap_err().contains("defined twice"));
    }

    #[test]
    fn a_defined_strategy_is_found_by_name_with_its_environment_and_preload() {
        let d = def(
            "server-knob",
            &[("VLLM_SLEEP_MODE_RELEASE_HOST_MEMORY", "1")],
            Some("jemalloc"),
        );
        let s = define(&d).unwrap();
        assert_eq!(s.env, &[("VLLM_SLEEP_MODE_RELEASE_HOST_MEMORY", "1")]);
        assert_eq!(s.allocator, Allocator::Jemalloc);
        assert!(s.works_from_outside());
        assert!(std::ptr::eq(
            super::super::lookup("server-knob").unwrap(),
            s
        ));
        // The same definition again is the same strategy; a different one is refused.
        assert!(std::ptr::eq(define(&d).unwrap(), s));
        let other = def("server-knob", &[("X", "2")], None);
        assert!(define(&other).unwrap_err().contains("defined twice"));
    }

    #[test]
    fn a_bad_definition_names_the_problem_and_the_fix() {
        for (d, says) in [
            (
                def("drop", &[("X", "1")], None),
                "a built-in strategy has that name",
            ),
            (def("Bad Name", &[("X", "1")], None), "a name is lowercase"),
            (def("empty", &[], None), "it sets nothing"),
            (
                def("pre", &[("LD_PRELOAD", "x.so")], None),
                "preload = \\\"jemalloc\\\"",
            ),
            (
                def("alloc", &[], Some("hoard")),
                "use jemalloc, tcmalloc or mimalloc",
            ),
        ] {
            let e = define(&d).unwrap_err();
            assert!(
                e.contains(says) || e.contains(&says.replace('\\', "")),
                "{e}"
            );
        }
    }
}
