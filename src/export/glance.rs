//! The answer at a glance, under a console table: one line per resource
//! that matters, saying what each strategy does with it ("host RSS: drop
//! retains 335 MiB in 4 of 5 runs; malloc-trim gives back 99.1 % in 5 of
//! 5 runs"), and the notes, each said once with the strategies and
//! resources it applies to.
//!
//! The default console of `run`, `exec`, `attach` and `compare` is a table
//! and these lines, so it fits one screen; `--verbose` adds each run's
//! verdict, the retained per cycle and every note (see `console`, `table`).
//!
//! Formats what the summary holds (`table::said`); computes nothing.

use super::table::{held_text, percent, said, sig, Line, Said, COMPACT_MAX_CHARS};
use crate::metrics::Resource;
use crate::metrics::ResourceFacts;
use crate::textutil::MIB;

/// Notes the default console shows; `--verbose` shows every one.
pub const NOTES_SHOWN: usize = 4;

/// One line per resource of `resources` that some line has a verdict for
/// (wrapped at 100 columns), in the order given.
pub(super) fn answers(resources: &[Resource], lines: &[Line], threshold_bytes: u64) -> Vec<String> {
    let mut out = Vec::new();
    for &r in resources {
        let said: Vec<(&Line, Said)> = lines
            .iter()
            .filter_map(|l| said(l, r).map(|s| (l, s)))
            .collect();
        if said.is_empty() {
            continue;
        }
        let head = r.label();
        if let Some(level) = one_level(&said) {
            // Nothing any strategy did moved it: say so once.
            out.push(format!(
                "{head}: {}; no strategy frees them",
                held_text(r, level)
            ));
            continue;
        }
        if let Some(context) = one_context(&said) {
            out.push(format!("{head}: not judged, {context}"));
            continue;
        }
        // The strategies that give back are one part, where the first is; so
        // are those that held one level.
        let (mut gave_back, mut held) = (false, false);
        let mut parts: Vec<String> = Vec::new();
        for (l, s) in &said {
            match s {
                Said::GivesBack { .. } if !gave_back => {
                    gave_back = true;
                    parts.push(give_back(&said, r));
                }
                Said::Held { .. } if !held => {
                    held = true;
                    parts.push(held_level(&said, r));
                }
                Said::GivesBack { .. } | Said::Held { .. } => {}
                _ => parts.push(phrase(l, r, s, threshold_bytes)),
            }
        }
        out.extend(wrap(&head, &parts));
    }
    out
}

/// The level every line held from start to end (the largest, where they
/// differ by rounding), or `None` where some line moved.
fn one_level(said: &[(&Line, Said)]) -> Option<f64> {
    said.iter()
        .map(|(_, s)| match s {
            Said::Held { level_bytes } => Some(*level_bytes),
            _ => None,
        })
        .try_fold(0.0_f64, |most, level| level.map(|l| most.max(l)))
}

/// The context every line was not judged for, where it is one.
fn one_context<'a>(said: &'a [(&Line, Said)]) -> Option<&'a str> {
    let mut contexts = said.iter().map(|(_, s)| match s {
        Said::NotJudged(c) => Some(c.as_str()),
        _ => None,
    });
    let first = contexts.next()??;
    contexts.all(|c| c == Some(first)).then_some(first)
}

/// One strategy's part of a resource's line.
fn phrase(line: &Line, resource: Resource, said: &Said, threshold_bytes: u64) -> String {
    let name = &line.label;
    let row = line.summary.resource(resource).and_then(|m| m.row.as_ref());
    let in_runs = |k: u32, n: u32| {
        if n == 1 {
            "in its one run".to_string()
        } else {
            format!("in {k} of {n} runs")
        }
    };
    match said {
        Said::NotJudged(context) => format!("{name} not judged ({context})"),
        Said::Held { level_bytes } => {
            let what = if resource.look().cache {
                "keeps cached"
            } else {
                "holds"
            };
            format!(
                "{name} {what} {} MiB from start to end",
                sig(level_bytes / MIB)
            )
        }
        Said::Retains { retaining, runs } => {
            let retained = row.map(|r| r.retained_bytes as f64);
            match retained {
                Some(b) if b >= threshold_bytes as f64 => format!(
                    "{name} retains {} MiB {}",
                    sig(b / MIB),
                    in_runs(*retaining, *runs)
                ),
                // Some cycle retained, the last did not: the count is the news.
                Some(b) => format!(
                    "{name} retains {} ({} MiB after the last cycle)",
                    in_runs(*retaining, *runs),
                    sig(b / MIB)
                ),
                None => format!("{name} retains {}", in_runs(*retaining, *runs)),
            }
        }
        Said::GivesBack { runs } => match row.and_then(|r| r.released_fraction) {
            Some(f) => format!(
                "{name} gives back {} % {}",
                percent(f * 100.0),
                in_runs(*runs, *runs)
            ),
            None => format!("{name} gives back {}", in_runs(*runs, *runs)),
        },
    }
}

/// The strategies of `said` that give back, as one part: "malloc-trim
/// gives back 99.1 % in 5 of 5 runs", or "malloc-trim and mallopt give back
/// 99.0–99.6 % in every run (3 or 5)".
fn give_back(said: &[(&Line, Said)], resource: Resource) -> String {
    let who: Vec<(&Line, u32)> = said
        .iter()
        .filter_map(|(l, s)| match s {
            Said::GivesBack { runs } => Some((*l, *runs)),
            _ => None,
        })
        .collect();
    if let [(line, runs)] = who[..] {
        return phrase(line, resource, &Said::GivesBack { runs }, 0);
    }
    let names = names(who.iter().map(|(l, _)| l.label.as_str()));
    let released: Vec<f64> = who
        .iter()
        .filter_map(|(l, _)| {
            l.summary
                .resource(resource)
                .and_then(|m| m.row.as_ref())
                .and_then(|r| r.released_fraction)
        })
        .map(|f| f * 100.0)
        .collect();
    let amount = if released.len() != who.len() {
        String::new()
    } else {
        format!(" {} %", span(&released, percent))
    };
    let (fewest, most) = who
        .iter()
        .fold((u32::MAX, 0), |(lo, hi), (_, n)| (lo.min(*n), hi.max(*n)));
    let runs = if most == 1 {
        "each in its one run".to_string()
    } else if fewest == most {
        format!("in {most} of {most} runs")
    } else {
        format!("in every run ({fewest} to {most})")
    };
    format!("{names} give back{amount} {runs}")
}

/// The strategies of `said` that held one level from start to end, as one
/// part: "drop, sync and to-cpu hold 450–537 MiB from start to end".
fn held_level(said: &[(&Line, Said)], resource: Resource) -> String {
    let who: Vec<(&Line, f64)> = said
        .iter()
        .filter_map(|(l, s)| match s {
            Said::Held { level_bytes } => Some((*l, *level_bytes)),
            _ => None,
        })
        .collect();
    if let [(line, level_bytes)] = who[..] {
        return phrase(line, resource, &Said::Held { level_bytes }, 0);
    }
    let levels: Vec<f64> = who.iter().map(|w| w.1 / MIB).collect();
    let level = span(&levels, sig);
    let what = if resource.look().cache {
        "keep cached"
    } else {
        "hold"
    };
    format!(
        "{} {what} {level} MiB from start to end",
        names(who.iter().map(|(l, _)| l.label.as_str()))
    )
}

/// The smallest and largest of `values` as `show` writes them, "lo–hi", or
/// one where they read the same.
fn span(values: &[f64], show: fn(f64) -> String) -> String {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi) = (show(lo), show(hi));
    if lo == hi {
        lo
    } else {
        format!("{lo}–{hi}")
    }
}

/// "a", "a and b", "a, b and c".
pub fn names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        Some((last, _)) => (*last).to_string(),
        None => String::new(),
    }
}

/// `head: a; b; c` in lines of at most 100 characters, a line breaking
/// between parts where it can and between words where a part is longer,
/// the later lines indented under the first part.
fn wrap(head: &str, parts: &[String]) -> Vec<String> {
    let indent = " ".repeat(head.chars().count() + 2);
    let width = |s: &str| s.chars().count();
    let mut out = Vec::new();
    let mut line = format!("{head}:");
    // The line holds only the indent.
    let mut blank = false;
    for (i, part) in parts.iter().enumerate() {
        let piece = if i + 1 < parts.len() {
            format!("{part};")
        } else {
            part.clone()
        };
        // A part that fits a line of its own starts one rather than break.
        let own_line = width(&indent) + width(&piece) <= COMPACT_MAX_CHARS;
        if i > 0 && !blank && own_line && width(&line) + 1 + width(&piece) > COMPACT_MAX_CHARS {
            out.push(std::mem::replace(&mut line, indent.clone()));
            blank = true;
        }
        for word in piece.split(' ') {
            if !blank && width(&line) + 1 + width(word) > COMPACT_MAX_CHARS {
                out.push(std::mem::replace(&mut line, indent.clone()));
                blank = true;
            }
            if !blank {
                line.push(' ');
            }
            line.push_str(word);
            blank = false;
        }
    }
    out.push(line);
    out
}

/// Notes, each text once with every strategy, run or resource it applies
/// to, in the order first said.
#[derive(Debug, Default)]
pub struct Notes {
    items: Vec<(String, Vec<String>)>,
}

impl Notes {
    /// `text` applies to `who` (a strategy, a run, a resource; empty: to all).
    pub fn add(&mut self, text: impl Into<String>, who: impl Into<String>) {
        let (text, who) = (text.into(), who.into());
        let whom = match self.items.iter_mut().find(|(t, _)| *t == text) {
            Some((_, whom)) => whom,
            None => {
                self.items.push((text, Vec::new()));
                match self.items.last_mut() {
                    Some((_, whom)) => whom,
                    None => return,
                }
            }
        };
        if !who.is_empty() && !whom.contains(&who) {
            whom.push(who);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// `note: text (who, who)` per note, on one line however long (a path
    /// in it stays whole for grep); with a `limit`, at most that many notes
    /// and a last line saying how many more `--verbose` shows.
    pub fn lines(&self, limit: Option<usize>) -> Vec<String> {
        let shown = limit.unwrap_or(usize::MAX).min(self.items.len());
        let mut out: Vec<String> = self.items[..shown]
            .iter()
            .map(|(text, whom)| {
                if whom.is_empty() {
                    format!("note: {text}")
                } else {
                    format!("note: {text} ({})", whom.join(", "))
                }
            })
            .collect();
        let more = self.items.len() - shown;
        if more > 0 {
            out.push(format!(
                "note: {more} more note{} (--verbose shows every one)",
                if more == 1 { "" } else { "s" }
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_answer_wraps_under_its_first_part() {
        let parts: Vec<String> = (0..4)
            .map(|i| format!("strategy-{i} gives back 99.1 % in 5 of 5 runs"))
            .collect();
        let lines = wrap("host RSS", &parts);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines.iter().all(|l| l.chars().count() <= COMPACT_MAX_CHARS));
        assert!(lines[1].starts_with("          strategy-2"), "{lines:?}");
        assert!(lines[0].ends_with("runs;") && !lines[1].ends_with(';'));
        assert_eq!(wrap("VRAM", &["a".into()]), vec!["VRAM: a".to_string()]);
        // A part longer than a line breaks between its words.
        let long = vec!["a-strategy-name ".repeat(10).trim().to_string(), "b".into()];
        let lines = wrap("host RSS", &long);
        assert!(lines.len() >= 2, "{lines:?}");
        assert!(
            lines.iter().all(|l| l.chars().count() <= COMPACT_MAX_CHARS),
            "{lines:?}"
        );
        assert_eq!(lines.concat().split_whitespace().count(), 13, "{lines:?}");
    }

    #[test]
    fn a_note_is_said_once_with_everyone_it_applies_to() {
        let mut notes = Notes::default();
        notes.add("worker killed by signal 9", "drop run 3");
        notes.add("no samples", "");
        notes.add("worker killed by signal 9", "mallopt run 6");
        notes.add("worker killed by signal 9", "drop run 3");
        assert_eq!(
            notes.lines(None),
            vec![
                "note: worker killed by signal 9 (drop run 3, mallopt run 6)".to_string(),
                "note: no samples".to_string(),
            ]
        );
        assert_eq!(
            notes.lines(Some(1)),
            vec![
                "note: worker killed by signal 9 (drop run 3, mallopt run 6)".to_string(),
                "note: 1 more note (--verbose shows every one)".to_string(),
            ]
        );
    }
}
