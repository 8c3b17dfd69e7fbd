//! Strategies that take a value after their name (`xla-mem-fraction=0.40`):
//! the row in its family's table declares a [`Param`] (its name, what the
//! bare name means, an example, the check a value must pass) and writes
//! [`Param::VALUE`] where the value goes (its environment's values, its
//! program steps, its summary). [`instance`] makes the strategy a name asks
//! for, once per name for the life of the process (leaked, so it is as
//! `&'static` as a table row and every caller keeps its `&'static Strategy`).
//!
//! The name with its value is the strategy's name everywhere after: what
//! runs.json saves, what `compare`, `advise` and `report` read back and look
//! up again. The bare name means the default value and keeps its name, so
//! results and scenarios written before the value existed stay valid. This
//! module checks and substitutes; it never runs anything.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use super::{ReleaseAction, StartAction, Strategy, StrategyError};

/// The value a strategy takes after `=` in its name.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    /// What `memrel list` calls the value (`FRACTION`).
    pub name: &'static str,
    /// What the value is, in a few words, for `memrel list --long`.
    pub about: &'static str,
    /// What the bare name means (it passes [`Param::check`]; a test says so).
    pub default: &'static str,
    /// A value to show in an error's fix (it passes the check too).
    pub example: &'static str,
    /// Why a value is no good, in lowercase words (the message adds the fix).
    pub check: fn(&str) -> Result<(), String>,
}

impl Param {
    /// Where the value goes in a parameterized row's strings.
    pub const VALUE: &'static str = "{value}";
}

/// A fraction above 0 and at most 1, written as a plain decimal (`0.4`,
/// `.25`, `1`): what `XLA_PYTHON_CLIENT_MEM_FRACTION` takes.
pub fn fraction(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err("no value after \"=\"".to_string());
    }
    let plain = value.chars().all(|c| c.is_ascii_digit() || c == '.')
        && value.chars().filter(|c| *c == '.').count() <= 1
        && value.chars().any(|c| c.is_ascii_digit());
    let number = if plain {
        value.parse::<f64>().ok()
    } else {
        None
    };
    match number {
        None => Err(format!("{value:?} is not a number")),
        Some(n) if n <= 0.0 => Err(format!("{value} is not above 0")),
        Some(n) if n > 1.0 => Err(format!("{value} is more than 1")),
        Some(_) => Ok(()),
    }
}

/// The strategy `row` (a parameterized table row) with `value`, named
/// `row.name=value`, or with its default and its bare name (`value` None).
/// Each name is made once; later calls return the same strategy.
pub fn instance(
    row: &'static Strategy,
    value: Option<&str>,
) -> Result<&'static Strategy, StrategyError> {
    let Some(param) = row.param else {
        return match value {
            None => Ok(row),
            Some(value) => Err(StrategyError::TakesNoValue {
                name: row.name,
                value: value.to_string(),
            }),
        };
    };
    let (name, value) = match value {
        None => (row.name.to_string(), param.default),
        Some(value) => {
            (param.check)(value).map_err(|why| StrategyError::BadValue {
                name: format!("{}={value}", row.name),
                why,
                fix: format!(
                    "write {} as {}={} ({} alone means {})",
                    param.name, row.name, param.example, row.name, param.default
                ),
            })?;
            (format!("{}={value}", row.name), value)
        }
    };
    static MADE: OnceLock<Mutex<HashMap<String, &'static Strategy>>> = OnceLock::new();
    let mut made = MADE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(s) = made.get(&name) {
        return Ok(s);
    }
    let s: &'static Strategy = Box::leak(Box::new(substitute(row, leak(name.clone()), value)));
    made.insert(name, s);
    Ok(s)
}

/// `row` with [`Param::VALUE`] replaced by `value` wherever the row wrote it.
fn substitute(row: &Strategy, name: &'static str, value: &str) -> Strategy {
    let put = |text: &'static str| -> &'static str {
        if text.contains(Param::VALUE) {
            leak(text.replace(Param::VALUE, value))
        } else {
            text
        }
    };
    let pairs = |pairs: &'static [(&'static str, &'static str)]| -> &'static [(&'static str, &'static str)] {
        Box::leak(
            pairs
                .iter()
                .map(|(k, v)| (*k, put(v)))
                .collect::<Vec<_>>()
                .into_boxed_slice(),
        )
    };
    let steps = |steps: &'static [&'static str]| -> &'static [&'static str] {
        Box::leak(
            steps
                .iter()
                .map(|s| put(s))
                .collect::<Vec<_>>()
                .into_boxed_slice(),
        )
    };
    Strategy {
        name,
        summary: put(row.summary),
        explanation: put(row.explanation),
        env: pairs(row.env),
        expect: pairs(row.expect),
        start: match row.start {
            StartAction::ProgramOnly(s) => StartAction::ProgramOnly(steps(s)),
            other => other,
        },
        release: match row.release {
            ReleaseAction::ProgramOnly(s) => ReleaseAction::ProgramOnly(steps(s)),
            other => other,
        },
        ..*row
    }
}

fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

#[cfg(test)]
mod tests {
    use super::super::{all, lookup, rows};
    use super::*;

    #[test]
    fn a_fraction_is_a_plain_decimal_above_0_and_at_most_1() {
        for good in ["0.4", "0.40", ".25", "1", "1.0", "0.001"] {
            assert_eq!(fraction(good), Ok(()), "{good}");
        }
        for (bad, why) in [
            ("", "no value after \"=\""),
            ("abc", "\"abc\" is not a number"),
            ("0.4.1", "\"0.4.1\" is not a number"),
            ("-0.5", "\"-0.5\" is not a number"),
            ("1e-1", "\"1e-1\" is not a number"),
            ("nan", "\"nan\" is not a number"),
            (".", "\".\" is not a number"),
            ("0", "0 is not above 0"),
            ("0.0", "0.0 is not above 0"),
            ("2", "2 is more than 1"),
            ("1.01", "1.01 is more than 1"),
        ] {
            assert_eq!(fraction(bad), Err(why.to_string()), "{bad:?}");
        }
    }

    #[test]
    fn a_value_reaches_the_environment_the_steps_and_the_name() {
        let s = lookup("xla-mem-fraction=0.40").expect("a good fraction");
        assert_eq!(s.name, "xla-mem-fraction=0.40");
        assert_eq!(s.env, &[("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.40")]);
        assert_eq!(
            s.for_programs().expect("for programs").start,
            vec!["xla_env=XLA_PYTHON_CLIENT_MEM_FRACTION:0.40"]
        );
        assert!(s.summary.contains("=0.40"), "{}", s.summary);
        assert!(!s.summary.contains(Param::VALUE), "{}", s.summary);
        assert!(
            s.setting().contains("XLA_PYTHON_CLIENT_MEM_FRACTION=0.40"),
            "{}",
            s.setting()
        );
        // The same name is the same strategy (made once), and it round-trips.
        assert!(std::ptr::eq(s, lookup(s.name).expect("again")));
        let bare = lookup("xla-mem-fraction").expect("bare");
        assert_eq!(bare.name, "xla-mem-fraction");
        assert_eq!(bare.env, &[("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.25")]);
    }

    #[test]
    fn bad_values_say_why_and_the_fix() {
        let err = |name: &str| lookup(name).map(|s| s.name).unwrap_err().to_string();
        let e = err("xla-mem-fraction=2");
        assert_eq!(
            e,
            "strategy \"xla-mem-fraction=2\": 2 is more than 1; write FRACTION as \
             xla-mem-fraction=0.40 (xla-mem-fraction alone means 0.25)"
        );
        assert!(err("xla-mem-fraction=0").contains("0 is not above 0"));
        assert!(err("xla-mem-fraction=half").contains("\"half\" is not a number"));
        assert!(err("xla-mem-fraction=").contains("no value after \"=\""));
        assert_eq!(
            err("drop=1"),
            "strategy \"drop\" takes no value (\"=1\"): name it alone, as \"drop\""
        );
        let typo = err("xla-mem-fractoin=0.4");
        assert!(typo.contains("did you mean \"xla-mem-fraction\""), "{typo}");
    }

    #[test]
    fn every_parameterized_row_is_whole() {
        // A row writes the value's place if and only if it declares a value.
        let mentions = |s: &Strategy| {
            let steps = |a: &[&str]| a.iter().any(|t| t.contains(Param::VALUE));
            [s.summary, s.explanation]
                .iter()
                .chain(s.env.iter().map(|(_, v)| v))
                .chain(s.expect.iter().map(|(_, v)| v))
                .any(|t| t.contains(Param::VALUE))
                || matches!(s.start, StartAction::ProgramOnly(a) if steps(a))
                || matches!(s.release, ReleaseAction::ProgramOnly(a) if steps(a))
        };
        assert!(rows().any(|r| r.param.is_some()));
        for row in rows() {
            assert_eq!(mentions(row), row.param.is_some(), "{}", row.name);
            assert!(!row.name.contains('='), "{}", row.name);
            if let Some(p) = row.param {
                assert_eq!((p.check)(p.default), Ok(()), "{}", row.name);
                assert_eq!((p.check)(p.example), Ok(()), "{}", row.name);
                assert_ne!(p.default, p.example, "{}", row.name);
            }
        }
        // What `memrel list` and the palette see has every value in place.
        for s in all() {
            assert!(!mentions(s), "{}", s.name);
        }
    }
}
