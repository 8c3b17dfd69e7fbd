//! README.md as a new user reads it (issue 47): its commands table names
//! every command `memrel --help` lists, and no paragraph of its prose is cut
//! off mid-sentence or says a sentence twice.

use super::common::*;

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README.md")
}

/// The paragraphs of prose, each as one line: text outside code blocks that
/// is not a heading, table, image, quote, HTML, or a list item (with its
/// indented lines).
fn paragraphs(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let (mut code, mut in_list) = (false, false);
    let mut flush = |current: &mut Vec<&str>| {
        if !current.is_empty() {
            out.push(current.join(" "));
            current.clear();
        }
    };
    for line in text.lines() {
        let s = line.trim();
        if s.starts_with("```") {
            code = !code;
            flush(&mut current);
            continue;
        }
        if code {
            continue;
        }
        if s.is_empty() {
            flush(&mut current);
            in_list = false;
            continue;
        }
        let numbered = s
            .split_once(". ")
            .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        let list = s.starts_with("- ") || s.starts_with("* ") || numbered;
        if list || ["#", "|", "![", "<", ">"].iter().any(|p| s.starts_with(p)) {
            flush(&mut current);
            in_list = list;
            continue;
        }
        if in_list && line.starts_with(' ') {
            continue;
        }
        current.push(s);
    }
    flush(&mut current);
    out
}

#[test]
fn no_paragraph_is_cut_off_or_says_a_sentence_twice() {
    let text = readme();
    let paragraphs = paragraphs(&text);
    assert!(paragraphs.len() > 10, "{paragraphs:?}");
    for p in &paragraphs {
        assert!(
            p.ends_with(['.', ':', ')', '!', '?']),
            "a paragraph of README.md ends mid-sentence: …{}",
            &p[p.len().saturating_sub(120)..]
        );
    }
    let mut sentences: Vec<&str> = Vec::new();
    for p in &paragraphs {
        for s in p.split_inclusive(['.', '!', '?']) {
            let s = s.trim().trim_start_matches(')').trim();
            if s.len() <= 30 {
                continue;
            }
            assert!(!sentences.contains(&s), "README.md says twice: {s}");
            sentences.push(s);
        }
    }
}

/// The commands `memrel --help` lists (but `help`).
fn commands() -> Vec<String> {
    let help = text(&run_ok(memrel().arg("--help")).stdout);
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A command's line; a wrapped description is indented further.
        .filter(|l| !l[2..].starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn the_commands_table_has_a_row_for_every_command() {
    let text = readme();
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "## Commands")
        .filter(|l| l.starts_with("| `memrel "))
        .collect();
    let commands = commands();
    assert!(commands.len() >= 10, "{commands:?}");
    for command in &commands {
        let row = format!("| `memrel {command}");
        assert!(
            table.iter().any(|l| l.starts_with(&row)),
            "README.md's commands table has no row for `memrel {command}`"
        );
    }
}
