//! Every memrel command line that memrel prints for a person to run (a
//! hint: "create it with `…`", "re-make the baseline with `…`", "see `…`")
//! is built here, by [`Hint::line`], so that a hint is never a command that
//! fails when followed: the tests run each kind of hint through the real
//! argument parser (`Cli::try_parse_from`), placeholders (`<scenario>`,
//! `PHASE`) filled in. A hint that repeats what made a record
//! ([`Hint::Again`]) edits that record's own command line (its `--repeat`,
//! `--save-baseline` and `--out` flags), so it names the command that
//! really made the results, not a guess such as `run --scenario exec`.
//!
//! It must not decide when a hint is due or what the numbers say: callers
//! choose the hint, this file only spells it.

use std::path::Path;

/// The name memrel's hints start with (the binary, as a person types it).
const MEMREL: &str = "memrel";

/// A command memrel suggests.
#[derive(Debug, Clone)]
pub enum Hint<'a> {
    /// `memrel run --scenario S [--repeat N] --save-baseline B [--replace] [--out O]`:
    /// make (or re-make) a baseline's entry of a scenario (a built-in name
    /// or a path to its file; `<scenario>` where none is known).
    SaveScenario {
        scenario: &'a str,
        repeat: Option<usize>,
        baseline: &'a str,
        replace: bool,
        out: Option<&'a Path>,
    },
    /// The command line that made a record (`Header::command`, its
    /// program's path first), again: with `--repeat N` (replacing the one
    /// given), `--save-baseline B` where asked (replacing the one given) and
    /// `--out O` where asked (a `--dir`, which must name a new directory,
    /// left out). `None` from [`Hint::again`] where it cannot be
    /// made again this way (a process `memrel attach` measured, a command
    /// line that does not parse).
    Again {
        command: &'a [String],
        repeat: usize,
        save_baseline: Option<&'a str>,
        out: Option<&'a Path>,
    },
    /// `memrel drive <its flags> --name N --repeat R --save-baseline B`: a
    /// drive again, where its own flags are not at hand.
    DriveAgain {
        name: &'a str,
        repeat: usize,
        baseline: &'a str,
    },
    /// `memrel exec --repeat N --save-baseline B -- <the program>`: measure a
    /// program under memrel (what an attached process cannot be).
    ExecProgram { repeat: usize, baseline: &'a str },
    /// `memrel check --baseline B DIR`.
    Check { baseline: &'a str, dir: &'a str },
    /// `memrel baseline show B`.
    BaselineShow { baseline: &'a str },
    /// `memrel list --long`: every strategy explained.
    ListLong,
    /// `memrel list`: scenarios, strategies and presets.
    List,
    /// `memrel attach --dir D PID`.
    Attach { dir: &'a Path, pid: &'a str },
    /// `memrel mark D PHASE`.
    Mark { dir: &'a Path, phase: &'a str },
    /// `memrel report DIR --out NEWDIR`.
    ReportInto { dir: &'a Path, out: &'a str },
    /// `memrel calibrate --device cuda`.
    CalibrateCuda,
}

impl<'a> Hint<'a> {
    /// [`Hint::Again`] where the command can be made again with its own
    /// flags: `memrel run`, `compare --scenario`, `exec` and `drive` (which
    /// drives the server again); `None` for `attach`, `check` and anything
    /// else.
    pub fn again(
        command: &'a [String],
        repeat: usize,
        save_baseline: Option<&'a str>,
        out: Option<&'a Path>,
    ) -> Option<Hint<'a>> {
        let sub = command.get(1).map(String::as_str)?;
        let compare_runs = sub == "compare"
            && command
                .iter()
                .any(|a| a == "--scenario" || a == "-s" || a.starts_with("--scenario="));
        (matches!(sub, "run" | "exec" | "drive") || compare_runs).then_some(Hint::Again {
            command,
            repeat,
            save_baseline,
            out,
        })
    }

    /// The command line, its words quoted for a shell where they need it.
    pub fn line(&self) -> String {
        let words = self.words();
        std::iter::once(MEMREL.to_string())
            .chain(words.iter().map(|w| shell_word(w)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The words after `memrel`, unquoted.
    pub fn words(&self) -> Vec<String> {
        let s = |v: &str| v.to_string();
        match self {
            Hint::SaveScenario {
                scenario,
                repeat,
                baseline,
                replace,
                out,
            } => {
                let mut w = vec![s("run"), s("--scenario"), s(scenario)];
                if let Some(n) = repeat {
                    w.extend([s("--repeat"), n.to_string()]);
                }
                w.extend([s("--save-baseline"), s(baseline)]);
                if *replace {
                    w.push(s("--replace"));
                }
                if let Some(out) = out {
                    w.extend([s("--out"), out.display().to_string()]);
                }
                w
            }
            Hint::Again {
                command,
                repeat,
                save_baseline,
                out,
            } => again_words(command, *repeat, *save_baseline, *out),
            Hint::DriveAgain {
                name,
                repeat,
                baseline,
            } => vec![
                s("drive"),
                s("<its flags>"),
                s("--name"),
                s(name),
                s("--repeat"),
                repeat.to_string(),
                s("--save-baseline"),
                s(baseline),
            ],
            Hint::ExecProgram { repeat, baseline } => vec![
                s("exec"),
                s("--repeat"),
                repeat.to_string(),
                s("--save-baseline"),
                s(baseline),
                s("--"),
                s("<the program>"),
            ],
            Hint::Check { baseline, dir } => {
                vec![s("check"), s("--baseline"), s(baseline), s(dir)]
            }
            Hint::BaselineShow { baseline } => vec![s("baseline"), s("show"), s(baseline)],
            Hint::ListLong => vec![s("list"), s("--long")],
            Hint::List => vec![s("list")],
            Hint::Attach { dir, pid } => {
                vec![s("attach"), s("--dir"), dir.display().to_string(), s(pid)]
            }
            Hint::Mark { dir, phase } => vec![s("mark"), dir.display().to_string(), s(phase)],
            Hint::ReportInto { dir, out } => {
                vec![s("report"), dir.display().to_string(), s("--out"), s(out)]
            }
            Hint::CalibrateCuda => vec![s("calibrate"), s("--device"), s("cuda")],
        }
    }
}

impl std::fmt::Display for Hint<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.line())
    }
}

/// `command` (its program first) with `--repeat`, `--save-baseline` and
/// `--out` set: each replaces the one given, or goes before `--` (or at the
/// end) where none was.
fn again_words(
    command: &[String],
    repeat: usize,
    save_baseline: Option<&str>,
    out: Option<&Path>,
) -> Vec<String> {
    let mut set: Vec<(&str, String)> = vec![("--repeat", repeat.to_string())];
    if let Some(name) = save_baseline {
        set.push(("--save-baseline", name.to_string()));
    }
    if let Some(out) = out {
        set.push(("--out", out.display().to_string()));
    }
    let mut args: Vec<String> = Vec::new();
    let mut rest: Vec<String> = Vec::new();
    let mut given = command.iter().skip(1);
    let mut done: Vec<&str> = Vec::new();
    while let Some(arg) = given.next() {
        if arg == "--" {
            rest.push(arg.clone());
            rest.extend(given.by_ref().cloned());
            break;
        }
        // `--dir DIR` must name a new directory: the runs again go under
        // <OUT>/<NAME>/<timestamp>.
        if arg == "--dir" {
            given.next();
            continue;
        }
        if arg.starts_with("--dir=") {
            continue;
        }
        let flag = set.iter().find(|(flag, _)| {
            arg == flag || arg.strip_prefix(flag).is_some_and(|r| r.starts_with('='))
        });
        match flag {
            Some((flag, value)) => {
                if arg == flag {
                    given.next();
                    args.extend([flag.to_string(), value.clone()]);
                } else {
                    args.push(format!("{flag}={value}"));
                }
                done.push(flag);
            }
            None => args.push(arg.clone()),
        }
    }
    // `--repeat` goes where people put it, before `--save-baseline`.
    for (flag, value) in &set {
        if done.contains(flag) {
            continue;
        }
        let at = if *flag == "--repeat" {
            args.iter()
                .position(|a| a == "--save-baseline" || a.starts_with("--save-baseline="))
                .unwrap_or(args.len())
        } else {
            args.len()
        };
        args.splice(at..at, [flag.to_string(), value.clone()]);
    }
    args.extend(rest);
    args
}

/// `word` as one shell word: as it is when it needs no quoting, else in
/// single quotes; a placeholder (`<scenario>`) stays as it is.
pub fn shell_word(word: &str) -> String {
    let placeholder = word.starts_with('<') && word.ends_with('>') && !word.contains('\'');
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c));
    if plain || placeholder {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn strings(argv: &[&str]) -> Vec<String> {
        argv.iter().map(|a| a.to_string()).collect()
    }

    /// `hint`'s words with its placeholders filled in, as a person would.
    fn filled(hint: &Hint) -> Vec<String> {
        std::iter::once(MEMREL.to_string())
            .chain(hint.words().into_iter().map(|w| match w.as_str() {
                "<scenario>" => "ci-smoke".to_string(),
                "<the program>" => "true".to_string(),
                "<its flags>" => "--server=ollama".to_string(),
                _ => w,
            }))
            .collect()
    }

    /// One of every kind of hint (the match makes a new kind fail to
    /// compile until it is listed here).
    fn every_kind() -> Vec<Hint<'static>> {
        let run: &'static [String] = Box::leak(
            strings(&[
                "/x/memrel",
                "run",
                "--scenario",
                "ci-smoke",
                "--repeat",
                "1",
            ])
            .into_boxed_slice(),
        );
        let dir = Path::new("results/ci-smoke/20261122-040426");
        let all = vec![
            Hint::SaveScenario {
                scenario: "<scenario>",
                repeat: Some(3),
                baseline: "main",
                replace: true,
                out: Some(Path::new("ci results")),
            },
            Hint::Again {
                command: run,
                repeat: 3,
                save_baseline: Some("main"),
                out: Some(Path::new("results")),
            },
            Hint::DriveAgain {
                name: "drive",
                repeat: 3,
                baseline: "srv",
            },
            Hint::ExecProgram {
                repeat: 3,
                baseline: "p",
            },
            Hint::Check {
                baseline: "main",
                dir: "results/ci-smoke/20261122-040426",
            },
            Hint::BaselineShow { baseline: "main" },
            Hint::ListLong,
            Hint::List,
            Hint::Attach { dir, pid: "1234" },
            Hint::Mark { dir, phase: "load" },
            Hint::ReportInto { dir, out: "NEWDIR" },
            Hint::CalibrateCuda,
        ];
        for h in &all {
            match h {
                Hint::SaveScenario { .. }
                | Hint::Again { .. }
                | Hint::DriveAgain { .. }
                | Hint::ExecProgram { .. }
                | Hint::Check { .. }
                | Hint::BaselineShow { .. }
                | Hint::ListLong
                | Hint::List
                | Hint::Attach { .. }
                | Hint::Mark { .. }
                | Hint::ReportInto { .. }
                | Hint::CalibrateCuda => {}
            }
        }
        all
    }

    #[test]
    fn every_kind_of_hint_parses_as_the_real_command_line() {
        for hint in every_kind() {
            let argv = filled(&hint);
            if let Err(e) = crate::cli::Cli::try_parse_from(&argv) {
                panic!("{} does not parse: {e}", hint.line());
            }
        }
    }

    #[test]
    fn again_sets_the_commands_own_flags() {
        let again = |argv: &[&str], save: Option<&str>, out: Option<&str>| {
            let command = strings(argv);
            let hint = Hint::again(&command, 3, save, out.map(Path::new)).map(|h| h.line());
            if let Some(line) = &hint {
                let words: Vec<String> = shell_words(line);
                crate::cli::Cli::try_parse_from(&words)
                    .unwrap_or_else(|e| panic!("{line} does not parse: {e}"));
            }
            hint
        };
        assert_eq!(
            again(
                &[
                    "/x/memrel",
                    "run",
                    "--scenario",
                    "ci-smoke",
                    "--save-baseline",
                    "main"
                ],
                None,
                None
            )
            .as_deref(),
            Some("memrel run --scenario ci-smoke --repeat 3 --save-baseline main")
        );
        assert_eq!(
            again(
                &[
                    "memrel",
                    "compare",
                    "--scenario",
                    "a b.toml",
                    "--repeat",
                    "2",
                    "--save-baseline=m"
                ],
                None,
                None
            )
            .as_deref(),
            Some("memrel compare --scenario 'a b.toml' --repeat 3 --save-baseline=m")
        );
        assert_eq!(
            again(
                &["memrel", "exec", "--repeat=1", "--out", "o", "--", "python3", "-c", "print('x')"],
                Some("p"),
                Some("results")
            )
            .as_deref(),
            Some("memrel exec --repeat=3 --out results --save-baseline p -- python3 -c 'print('\\''x'\\'')'")
        );
        assert_eq!(
            again(
                &["memrel", "drive", "--server", "vllm", "--", "vllm", "serve", "m"],
                Some("srv"),
                None
            )
            .as_deref(),
            Some("memrel drive --server vllm --repeat 3 --save-baseline srv -- vllm serve m")
        );
        // What cannot be made again with its own flags.
        assert_eq!(again(&["memrel", "attach", "12"], Some("a"), None), None);
        assert_eq!(
            again(&["memrel", "check", "--baseline", "a"], None, None),
            None
        );
        assert_eq!(again(&["memrel", "compare", "a", "b"], None, None), None);
    }

    /// A hint's line split as a POSIX shell would (single quotes only: the
    /// only quoting `shell_word` writes).
    fn shell_words(line: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut word = String::new();
        let (mut quoted, mut any, mut escaped) = (false, false, false);
        for c in line.chars() {
            match c {
                c if escaped => {
                    word.push(c);
                    escaped = false;
                }
                '\'' => {
                    quoted = !quoted;
                    any = true;
                }
                ' ' if !quoted => {
                    if any || !word.is_empty() {
                        out.push(std::mem::take(&mut word));
                    }
                    any = false;
                }
                '\\' if !quoted => escaped = true,
                c => word.push(c),
            }
        }
        if any || !word.is_empty() {
            out.push(word);
        }
        out
    }
}
