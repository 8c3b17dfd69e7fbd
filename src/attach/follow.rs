//! `--log FILE` with `--mark-on 'REGEX=PHASE'`: following a log file the
//! way `tail -F` does and turning the lines that match into phase marks.
//!
//! Following starts at the file's end when memrel attaches (what was logged
//! before is history, not a phase of this measurement). At every poll the
//! new complete lines are read; then the path is looked at again: another
//! file there (a new inode: rotated by rename) is read from its start once
//! the old one's last lines are taken; a file shorter than what was read
//! (truncated, `copytruncate`) is read again from its start; no file there
//! (rotated away, not yet recreated) keeps the old one open until a new one
//! appears. Each of these is said once, as a note for the run record.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use regex::Regex;

use super::live::MarkPhase;

/// One `--mark-on 'REGEX=PHASE'`.
#[derive(Debug, Clone)]
pub struct Rule {
    pub regex: Regex,
    pub phase: MarkPhase,
}

impl Rule {
    /// Parses `REGEX=PHASE` (the last `=` splits: a regex may hold one).
    pub fn parse(text: &str) -> Result<Rule> {
        let Some((pattern, phase)) = text.rsplit_once('=') else {
            bail!("--mark-on {text:?} has no '=': write it as 'REGEX=PHASE', e.g. 'model loaded=forward'");
        };
        if pattern.is_empty() {
            bail!("--mark-on {text:?} has an empty regex: write it as 'REGEX=PHASE'");
        }
        let phase = MarkPhase::parse(phase).with_context(|| format!("--mark-on {text:?}"))?;
        let regex = Regex::new(pattern).map_err(|e| {
            anyhow::anyhow!(
                "--mark-on {text:?}: {pattern:?} is not a valid regex: {}",
                e.to_string().replace('\n', " ")
            )
        })?;
        Ok(Rule { regex, phase })
    }

    /// The phase the first rule that matches `line` marks.
    pub fn first_match(rules: &[Rule], line: &str) -> Option<(MarkPhase, usize)> {
        rules
            .iter()
            .position(|r| r.regex.is_match(line))
            .map(|i| (rules[i].phase, i))
    }
}

/// A line longer than this is taken as it is (no newline needed).
const MAX_LINE_BYTES: usize = 1 << 20;

/// What one poll found.
#[derive(Debug, Default, PartialEq)]
pub struct Polled {
    pub lines: Vec<String>,
    /// Rotation, truncation, the file gone: one sentence each.
    pub notes: Vec<String>,
}

/// A log file followed by name.
#[derive(Debug)]
pub struct Follower {
    path: PathBuf,
    file: File,
    /// (device, inode) of the open file.
    id: (u64, u64),
    offset: u64,
    pending: Vec<u8>,
    /// The path had no file at the last poll (said once).
    missing: bool,
}

impl Follower {
    /// Opens `path` at its end; fails naming `--log` when it cannot be read.
    pub fn open(path: &Path) -> Result<Follower> {
        let mut file = File::open(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => anyhow::anyhow!(
                "--log {}: no such file: name the log file the process writes (it must exist when memrel attaches)",
                path.display()
            ),
            _ => anyhow::anyhow!("--log {}: cannot read it: {e}", path.display()),
        })?;
        let meta = file
            .metadata()
            .with_context(|| format!("--log {}: cannot read it", path.display()))?;
        if !meta.is_file() {
            bail!("--log {}: not a regular file", path.display());
        }
        let offset = file
            .seek(SeekFrom::End(0))
            .with_context(|| format!("--log {}: cannot read it", path.display()))?;
        Ok(Follower {
            path: path.to_path_buf(),
            file,
            id: (meta.dev(), meta.ino()),
            offset,
            pending: Vec::new(),
            missing: false,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether a poll may find something new: the open file's size is not
    /// what was read, or the path holds another file (or none, not yet
    /// said). A stat and an fstat, nothing read: what the caller reads
    /// before the lines (a reading of the process) comes before them.
    pub fn has_news(&self) -> bool {
        if self.file.metadata().map(|m| m.len()).ok() != Some(self.offset) {
            return true;
        }
        match std::fs::metadata(&self.path) {
            Err(_) => !self.missing,
            Ok(meta) => (meta.dev(), meta.ino()) != self.id || meta.len() != self.offset,
        }
    }

    /// The complete lines written since the last poll, and what happened to
    /// the file.
    pub fn poll(&mut self) -> Polled {
        let mut polled = Polled::default();
        self.read_new(&mut polled);
        let shown = self.path.display().to_string();
        match std::fs::metadata(&self.path) {
            Err(_) => {
                if !self.missing {
                    self.missing = true;
                    polled.notes.push(format!(
                        "log {shown} disappeared (rotated away?): following the old file until a new one appears"
                    ));
                }
            }
            Ok(meta) if (meta.dev(), meta.ino()) != self.id => match File::open(&self.path) {
                Ok(file) => {
                    self.flush_pending(&mut polled);
                    polled.notes.push(format!(
                        "log {shown} was rotated (a new file at that path): reading the new file from its start"
                    ));
                    self.file = file;
                    self.id = (meta.dev(), meta.ino());
                    self.offset = 0;
                    self.missing = false;
                    self.read_new(&mut polled);
                }
                Err(e) => polled.notes.push(format!(
                    "log {shown} was rotated but the new file cannot be read ({e}): still following the old one"
                )),
            },
            Ok(meta) if meta.len() < self.offset => {
                self.missing = false;
                polled.notes.push(format!(
                    "log {shown} was truncated (from {} to {} bytes): reading it again from its start",
                    self.offset,
                    meta.len()
                ));
                self.pending.clear();
                self.offset = 0;
                if self.file.seek(SeekFrom::Start(0)).is_ok() {
                    self.read_new(&mut polled);
                }
            }
            Ok(_) => self.missing = false,
        }
        polled
    }

    /// Reads what the open file has beyond the offset; splits lines.
    fn read_new(&mut self, polled: &mut Polled) {
        let mut bytes = Vec::new();
        match (&self.file).read_to_end(&mut bytes) {
            Ok(n) => self.offset += n as u64,
            Err(e) => {
                polled
                    .notes
                    .push(format!("cannot read log {}: {e}", self.path.display()));
                return;
            }
        }
        self.pending.extend_from_slice(&bytes);
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            polled.lines.push(text(&line[..end]));
        }
        if self.pending.len() > MAX_LINE_BYTES {
            self.flush_pending(polled);
        }
    }

    /// An unfinished line is finished: the file it was in is left.
    fn flush_pending(&mut self, polled: &mut Polled) {
        if !self.pending.is_empty() {
            polled.lines.push(text(&self.pending));
            self.pending.clear();
        }
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .trim_end_matches('\r')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Phase;
    use std::io::Write;

    fn append(path: &Path, text: &str) {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    #[test]
    fn rules_parse_and_name_the_flag_when_wrong() {
        let rule = Rule::parse("step=\\d+ loaded=load").unwrap();
        assert_eq!(rule.phase, MarkPhase::Begin(Phase::Load));
        assert!(rule.regex.is_match("step=12 loaded"));
        let e = format!("{:#}", Rule::parse("load(=load").unwrap_err());
        assert!(
            e.contains("--mark-on \"load(=load\"") && e.contains("not a valid regex"),
            "{e}"
        );
        let e = format!("{:#}", Rule::parse("loaded").unwrap_err());
        assert!(e.contains("no '='"), "{e}");
        let e = format!("{:#}", Rule::parse("x=lunch").unwrap_err());
        assert!(
            e.contains("--mark-on") && e.contains("unknown phase \"lunch\""),
            "{e}"
        );
        let rules = [
            Rule::parse("a=load").unwrap(),
            Rule::parse("ab=unload").unwrap(),
        ];
        assert_eq!(
            Rule::first_match(&rules, "xab"),
            Some((MarkPhase::Begin(Phase::Load), 0))
        );
        assert_eq!(Rule::first_match(&rules, "zzz"), None);
    }

    #[test]
    fn a_missing_log_is_named() {
        let e = Follower::open(Path::new("/nonexistent/app.log"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--log /nonexistent/app.log: no such file"),
            "{e}"
        );
    }

    #[test]
    fn lines_are_followed_across_rotation_and_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("app.log");
        append(&log, "before attach\n");
        let mut f = Follower::open(&log).unwrap();
        assert!(!f.has_news());
        assert_eq!(f.poll(), Polled::default());
        append(&log, "one\ntw");
        assert!(f.has_news());
        assert_eq!(f.poll().lines, ["one"]);
        append(&log, "o\n");
        assert_eq!(f.poll().lines, ["two"]);
        // Rotated by rename: the old file's last line, then the new one's.
        append(&log, "last of old\n");
        std::fs::rename(&log, dir.path().join("app.log.1")).unwrap();
        let gone = f.poll();
        assert_eq!(gone.lines, ["last of old"]);
        assert!(gone.notes[0].contains("disappeared"), "{:?}", gone.notes);
        append(&log, "first of new\n");
        let rotated = f.poll();
        assert_eq!(rotated.lines, ["first of new"]);
        assert!(
            rotated.notes[0].contains("was rotated"),
            "{:?}",
            rotated.notes
        );
        // Truncated in place (copytruncate).
        append(&log, "more and more and more\n");
        assert_eq!(f.poll().lines.len(), 1);
        std::fs::write(&log, "after truncation\n").unwrap();
        let truncated = f.poll();
        assert_eq!(truncated.lines, ["after truncation"]);
        assert!(
            truncated.notes[0].contains("truncated"),
            "{:?}",
            truncated.notes
        );
    }
}
