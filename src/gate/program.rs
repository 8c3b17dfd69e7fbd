//! What a new program run did differently from the baseline's: the
//! command, interpreter, working directory or a variable memrel set. The
//! gate only reads the two records' headers here and turns each difference
//! into a warning; it decides no verdict.

use crate::record::Header;

/// What the new record's program ran with that differs from the baseline's
/// (the command, interpreter, directory, or a variable memrel set, per
/// strategy both ran): one warning each. Empty when either record has no
/// program block (memrel's own workers, or an older record).
pub fn program_differences(scenario: &str, base: &Header, new: &Header) -> Vec<String> {
    let (Some(b), Some(n)) = (&base.program, &new.program) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut differs = |what: &str, was: String, now: String| {
        if was != now {
            out.push(format!(
                "scenario {scenario}: the program's {what} differs from the baseline's: {was} (baseline) → {now} (new)"
            ));
        }
    };
    differs("command", b.argv.join(" "), n.argv.join(" "));
    let python = |p: &Option<String>| p.clone().unwrap_or_else(|| "none".into());
    differs("--python", python(&b.python), python(&n.python));
    differs("working directory", b.cwd.clone(), n.cwd.clone());
    for (strategy, base_env) in &b.env {
        let Some(new_env) = n.env.get(strategy) else {
            continue;
        };
        let names = base_env
            .keys()
            .chain(new_env.keys().filter(|k| !base_env.contains_key(*k)));
        for var in names {
            let value = |env: &std::collections::BTreeMap<String, String>| {
                env.get(var).cloned().unwrap_or_else(|| "<unset>".into())
            };
            differs(
                &format!("{var} ({strategy})"),
                value(base_env),
                value(new_env),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{fixture, Program};

    #[test]
    fn a_program_run_differently_is_named_variable_by_variable() {
        let program = Program {
            argv: vec!["/venv/bin/python".into(), "job.py".into()],
            python: Some("/venv/bin/python".into()),
            tree: false,
            cwd: "/work/repo".into(),
            env: [(
                "malloc-trim".to_string(),
                [
                    ("LD_PRELOAD".to_string(), "/lib/a.so".to_string()),
                    ("MEMREL_CYCLES".to_string(), "3".to_string()),
                ]
                .into(),
            )]
            .into(),
        };
        let mut base = fixture::header("s", 3);
        base.program = Some(program.clone());
        let mut new = base.clone();
        assert!(program_differences("s", &base, &new).is_empty());
        assert!(program_differences("s", &fixture::header("s", 3), &new).is_empty());
        let p = new.program.as_mut().expect("program");
        p.cwd = "/elsewhere".into();
        let env = p.env.get_mut("malloc-trim").expect("env");
        env.insert("LD_PRELOAD".into(), "/lib/b.so".into());
        env.remove("MEMREL_CYCLES");
        assert_eq!(
            program_differences("s", &base, &new),
            [
                "scenario s: the program's working directory differs from the baseline's: /work/repo (baseline) → /elsewhere (new)",
                "scenario s: the program's LD_PRELOAD (malloc-trim) differs from the baseline's: /lib/a.so (baseline) → /lib/b.so (new)",
                "scenario s: the program's MEMREL_CYCLES (malloc-trim) differs from the baseline's: 3 (baseline) → <unset> (new)",
            ]
        );
    }
}
