//! The text of [`Advice`]: one line per resource that retains, naming the
//! strategy, its price and the exact setting, or the one line that says why
//! there is no advice. Formats only; the choice is `metrics::advice`'s.

use crate::metrics::advice::{Advice, Pick, MIN_COMPLETED_RUNS};

/// The advice as lines of text, each ending in a newline.
pub fn text(advice: &Advice) -> String {
    let mut out = String::new();
    match advice {
        Advice::TooFewRuns { strategies } => {
            out.push_str(&format!(
                "too few runs to advise: {} (a strategy needs {MIN_COMPLETED_RUNS} completed runs; \
                 run again with --repeat {MIN_COMPLETED_RUNS})\n",
                runs_list(strategies)
            ));
        }
        Advice::NothingRetains { not_judged } => {
            out.push_str("nothing to advise: every strategy gives back\n");
            out.push_str(&not_judged_line(not_judged));
        }
        Advice::Resources {
            resources,
            not_judged,
        } => {
            for r in resources {
                let p = &r.pick;
                if r.every_run {
                    out.push_str(&format!(
                        "{}: use {} (gives back in {} of {} runs; {}): {}\n",
                        r.resource,
                        p.strategy,
                        p.runs,
                        p.runs,
                        price(p),
                        setting(p)
                    ));
                } else {
                    out.push_str(&format!(
                        "{}: no strategy gives back in every run; the best, {}, retains in {} of {} \
                         runs ({}): {}\n",
                        r.resource,
                        p.strategy,
                        p.retaining_runs,
                        p.runs,
                        price(p),
                        setting(p)
                    ));
                }
            }
            out.push_str(&not_judged_line(not_judged));
        }
    }
    out
}

fn runs_list(strategies: &[(String, u32)]) -> String {
    strategies
        .iter()
        .map(|(name, n)| {
            format!(
                "{name} has {n} completed run{}",
                if *n == 1 { "" } else { "s" }
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn not_judged_line(not_judged: &[(String, u32)]) -> String {
    if not_judged.is_empty() {
        return String::new();
    }
    format!(
        "not judged (fewer than {MIN_COMPLETED_RUNS} completed runs): {}\n",
        runs_list(not_judged)
    )
}

fn price(p: &Pick) -> String {
    let release = match p.release_action_s {
        Some(s) => format!("release {}", seconds(s)),
        None => "no release step".to_string(),
    };
    match p.ready_s {
        Some(s) => format!("{release}, ready again after {}", seconds(s)),
        None => release,
    }
}

fn setting(p: &Pick) -> String {
    p.setting.clone().unwrap_or_else(|| {
        format!(
            "strategy {:?} is unknown to this memrel: see `memrel list --long`",
            p.strategy
        )
    })
}

/// Seconds as people read them: `1.2 ms`, `0.45 s`.
fn seconds(s: f64) -> String {
    if s < 1.0 {
        format!("{:.1} ms", s * 1000.0)
    } else {
        format!("{s:.2} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::advice::ResourceAdvice;
    use crate::metrics::Resource;

    fn pick(strategy: &str, retaining_runs: u32) -> Pick {
        Pick {
            strategy: strategy.to_string(),
            runs: 3,
            retaining_runs,
            release_action_s: Some(0.0012),
            ready_s: None,
            setting: Some("the setting".to_string()),
        }
    }

    #[test]
    fn each_case_has_its_line() {
        let few = Advice::TooFewRuns {
            strategies: vec![("drop".to_string(), 1)],
        };
        assert!(text(&few).starts_with("too few runs to advise: drop has 1 completed run"));
        let nothing = Advice::NothingRetains { not_judged: vec![] };
        assert_eq!(
            text(&nothing),
            "nothing to advise: every strategy gives back\n"
        );
        let every = Advice::Resources {
            resources: vec![ResourceAdvice {
                resource: Resource::Host,
                pick: pick("malloc-trim", 0),
                every_run: true,
            }],
            not_judged: vec![],
        };
        assert_eq!(
            text(&every),
            "host: use malloc-trim (gives back in 3 of 3 runs; release 1.2 ms): the setting\n"
        );
        let none = Advice::Resources {
            resources: vec![ResourceAdvice {
                resource: Resource::Host,
                pick: pick("drop", 2),
                every_run: false,
            }],
            not_judged: vec![],
        };
        assert!(text(&none)
            .contains("no strategy gives back in every run; the best, drop, retains in 2 of 3"));
    }
}
