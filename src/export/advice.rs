//! The text of [`Advice`]: one line per resource that retains, naming the
//! strategy, its price and the exact setting, or the one line that says why
//! there is no advice. Formats only; the choice is `metrics::advice`'s.

use crate::metrics::advice::{Advice, Pick, ResourceAdvice, MIN_COMPLETED_RUNS};

/// The advice as lines of text, each ending in a newline.
pub fn text(advice: &Advice) -> String {
    let mut out = String::new();
    match advice {
        Advice::NothingMeasured { runs } => {
            out.push_str(&format!(
                "nothing measured: no cycle was marked in the {runs} completed run{} (each is one \
                 phase, with no release to judge); mark each load, unload and release \
                 (docs/guide.md, \"Phase markers\") to compare strategies\n",
                if *runs == 1 { "" } else { "s" }
            ));
        }
        Advice::TooFewRuns { strategies } => {
            out.push_str(&format!(
                "too few runs to advise: {} (a strategy needs {MIN_COMPLETED_RUNS} completed runs; \
                 run again with --repeat {MIN_COMPLETED_RUNS})\n",
                runs_list(strategies)
            ));
        }
        Advice::NothingToDo {
            threshold_bytes,
            not_judged,
        } => {
            out.push_str(&format!(
                "nothing to do: no strategy retains more than the retention threshold \
                 ({:.0} MiB) after its release\n",
                *threshold_bytes as f64 / (1024.0 * 1024.0)
            ));
            out.push_str(&not_judged_line(not_judged));
        }
        Advice::Resources {
            resources,
            not_judged,
        } => {
            // Resources with the same pick are one line: "host, cuda:0: use …"
            // (what each retained is the resource's own, not said here).
            let same = |a: &Pick, b: &Pick| {
                Pick {
                    retained_bytes: None,
                    ..a.clone()
                } == Pick {
                    retained_bytes: None,
                    ..b.clone()
                }
            };
            let mut lines: Vec<(Vec<String>, &ResourceAdvice)> = Vec::new();
            for r in resources {
                match lines
                    .iter_mut()
                    .find(|(_, a)| same(&a.pick, &r.pick) && a.every_run == r.every_run)
                {
                    Some((names, _)) => names.push(r.resource.to_string()),
                    None => lines.push((vec![r.resource.to_string()], r)),
                }
            }
            for (names, r) in lines {
                let p = &r.pick;
                let names = names.join(", ");
                if r.every_run {
                    out.push_str(&format!(
                        "{names}: use {} (gives back in {} of {} runs; {}): {}\n",
                        p.strategy,
                        p.runs,
                        p.runs,
                        price(p),
                        setting(p)
                    ));
                } else {
                    out.push_str(&format!(
                        "{names}: no strategy gives back in every run; the best, {}, retains in {} \
                         of {} runs ({}): {}\n",
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
            "strategy {:?} is unknown to this memrel: see `{}`",
            p.strategy,
            crate::hint::Hint::ListLong
        )
    })
}

/// Seconds as people read them: `1.2 ms`, `0.45 s`, `< 0.1 ms`.
pub(crate) fn seconds(s: f64) -> String {
    if s < 0.000_05 {
        "< 0.1 ms".to_string()
    } else if s < 1.0 {
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
            moved_runs: 3,
            retained_bytes: Some(32 << 20),
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
        let nothing = Advice::NothingToDo {
            threshold_bytes: 16 << 20,
            not_judged: vec![],
        };
        assert_eq!(
            text(&nothing),
            "nothing to do: no strategy retains more than the retention threshold (16 MiB) after \
             its release\n"
        );
        let unmarked = Advice::NothingMeasured { runs: 3 };
        assert!(text(&unmarked)
            .starts_with("nothing measured: no cycle was marked in the 3 completed runs"));
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
        // Two resources with one pick are one line; a release too quick for 0.1 ms says so.
        let mut quick = pick("malloc-trim", 0);
        quick.release_action_s = Some(0.000_01);
        let two = Advice::Resources {
            resources: [Resource::Host, Resource::PageCache]
                .into_iter()
                .map(|resource| ResourceAdvice {
                    resource,
                    pick: quick.clone(),
                    every_run: true,
                })
                .collect(),
            not_judged: vec![],
        };
        assert_eq!(
            text(&two),
            "host, page_cache: use malloc-trim (gives back in 3 of 3 runs; release < 0.1 ms): the \
             setting\n"
        );
    }
}
