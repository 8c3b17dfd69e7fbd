//! The one table writer: a header, rows and a per-column alignment, written
//! either as GitHub Markdown (compare.md, calibrate.md, verdict.md) or as
//! aligned plain text for the console (`memrel run`, `memrel compare`).
//! Modelled on hyperfine's `src/export/markup.rs`: callers build cells, this
//! module only lays them out.
//!
//! Markdown: `| a | b |` rows, the alignment row without spaces in one of two
//! spellings ([`Rule::Dashes`] `|---|---:|`, [`Rule::Colons`] `|:--|--:|`), a
//! `|` inside a cell escaped. Plain text: columns padded to their widest cell
//! and two spaces apart, an optional line naming groups of columns above the
//! header, a rule of `-` as wide as the table, trailing spaces trimmed.
//!
//! Lays out strings; never formats a number or decides which columns exist.

use std::fmt::Write;

/// Where a column's cells sit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// How the Markdown alignment row spells left and right.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// `|---|---:|`
    Dashes,
    /// `|:--|--:|`
    Colons,
}

/// A table before it is written: header, alignment and rows.
#[derive(Debug, Clone)]
pub struct Table {
    header: Vec<String>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
    rule: Rule,
    code_columns: Vec<usize>,
    groups: Vec<Option<String>>,
}

impl Table {
    /// A table with `header`, every column left-aligned, rule [`Rule::Dashes`].
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Table {
        let header: Vec<String> = header.into_iter().map(Into::into).collect();
        Table {
            align: vec![Align::Left; header.len()],
            header,
            rows: Vec::new(),
            rule: Rule::Dashes,
            code_columns: Vec::new(),
            groups: Vec::new(),
        }
    }

    /// A table of `(header, alignment)` columns, rule [`Rule::Dashes`].
    pub fn columns<S: Into<String>>(columns: impl IntoIterator<Item = (S, Align)>) -> Table {
        let (header, align): (Vec<String>, Vec<Align>) =
            columns.into_iter().map(|(h, a)| (h.into(), a)).unzip();
        Table::new(header).align(&align)
    }

    /// Each column's alignment, in order; columns past its end stay left.
    pub fn align(mut self, align: &[Align]) -> Table {
        for (slot, &a) in self.align.iter_mut().zip(align) {
            *slot = a;
        }
        self
    }

    /// The first column left, every other right: the usual table of numbers.
    pub fn numeric(self) -> Table {
        let n = self.header.len();
        let align: Vec<Align> = (0..n)
            .map(|i| if i == 0 { Align::Left } else { Align::Right })
            .collect();
        self.align(&align)
    }

    /// How the Markdown alignment row is spelled.
    pub fn rule(mut self, rule: Rule) -> Table {
        self.rule = rule;
        self
    }

    /// Markdown only: the cells of column `index` are written as `code`.
    pub fn code_column(mut self, index: usize) -> Table {
        self.code_columns.push(index);
        self
    }

    /// Plain text only: a line above the header naming each run of columns
    /// that share a group (`None`: no group), each name at its first column.
    pub fn groups(mut self, groups: Vec<Option<String>>) -> Table {
        self.groups = groups;
        self
    }

    /// Appends a row (one cell per column).
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    /// Appends a row, builder style.
    pub fn with_row<S: Into<String>>(mut self, cells: impl IntoIterator<Item = S>) -> Table {
        self.row(cells);
        self
    }

    /// The table as GitHub Markdown, each line ending in `\n`.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let header: Vec<String> = self.header.iter().map(|h| escape(h)).collect();
        let _ = writeln!(out, "| {} |", header.join(" | "));
        let rule: Vec<&str> = self
            .align
            .iter()
            .map(|a| match (self.rule, a) {
                (Rule::Dashes, Align::Left) => "---",
                (Rule::Dashes, Align::Right) => "---:",
                (Rule::Colons, Align::Left) => ":--",
                (Rule::Colons, Align::Right) => "--:",
            })
            .collect();
        let _ = writeln!(out, "|{}|", rule.join("|"));
        for row in &self.rows {
            let cells: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(i, cell)| {
                    if self.code_columns.contains(&i) {
                        format!("`{}`", escape(cell))
                    } else {
                        escape(cell)
                    }
                })
                .collect();
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        }
        out
    }

    /// The table as aligned plain text, one string per line: the group line
    /// (when any column has a group), the header, a rule, the rows.
    pub fn aligned_lines(&self) -> Vec<String> {
        let width = |s: &String| s.chars().count();
        let widths: Vec<usize> = (0..self.header.len())
            .map(|i| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(i).map(width))
                    .chain([width(&self.header[i])])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let total = widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1);
        let mut out = Vec::new();
        let group_line = self.group_line(&widths);
        if !group_line.is_empty() {
            out.push(group_line);
        }
        let line = |row: &[String]| -> String {
            let cells: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(i, cell)| {
                    let room = widths.get(i).copied().unwrap_or(0);
                    let pad = " ".repeat(room.saturating_sub(width(cell)));
                    match self.align.get(i) {
                        Some(Align::Right) => format!("{pad}{cell}"),
                        _ => format!("{cell}{pad}"),
                    }
                })
                .collect();
            cells.join("  ").trim_end().to_string()
        };
        out.push(line(&self.header));
        out.push("-".repeat(total));
        out.extend(self.rows.iter().map(|r| line(r)));
        out
    }

    /// Each group's name above the first column of its run, at least one
    /// space after the name before it; empty when no column has a group.
    fn group_line(&self, widths: &[usize]) -> String {
        let mut out = String::new();
        let mut previous: Option<&String> = None;
        let mut offset = 0;
        for (i, group) in self.groups.iter().enumerate() {
            if let Some(g) = group {
                if previous != Some(g) {
                    let used = out.chars().count();
                    let at = offset.max(used + usize::from(i > 0));
                    out.push_str(&" ".repeat(at.saturating_sub(used)));
                    out.push_str(g);
                }
            }
            previous = group.as_ref();
            offset += widths.get(i).copied().unwrap_or(0) + 2;
        }
        out.trim_end().to_string()
    }
}

/// A cell's text made safe inside a Markdown table row.
pub fn escape(text: &str) -> String {
    text.replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        Table::columns([
            ("name", Align::Left),
            ("MiB", Align::Right),
            ("ok", Align::Left),
        ])
        .with_row(["a|b", "1.00", "yes"])
        .with_row(["long name", "1234", "NO"])
    }

    #[test]
    fn markdown_in_both_rule_spellings() {
        insta::assert_snapshot!(sample().markdown(), @r"
        | name | MiB | ok |
        |---|---:|---|
        | a\|b | 1.00 | yes |
        | long name | 1234 | NO |
        ");
        insta::assert_snapshot!(sample().rule(Rule::Colons).code_column(0).markdown(), @r"
        | name | MiB | ok |
        |:--|--:|:--|
        | `a\|b` | 1.00 | yes |
        | `long name` | 1234 | NO |
        ");
    }

    #[test]
    fn aligned_text_pads_to_the_widest_cell_and_names_groups() {
        let table = Table::new(["strategy", "baseline", "retained", "checks"])
            .numeric()
            .groups(vec![None, Some("VRAM".into()), Some("VRAM".into()), None])
            .with_row(["drop", "678", "416", "ok"]);
        assert_eq!(
            table.aligned_lines(),
            [
                "          VRAM",
                "strategy  baseline  retained  checks",
                "------------------------------------",
                "drop           678       416      ok",
            ]
        );
    }

    #[test]
    fn a_table_without_groups_has_no_group_line() {
        let lines = Table::new(["a", "b"]).numeric().aligned_lines();
        assert_eq!(lines, ["a  b", "----"]);
    }
}
