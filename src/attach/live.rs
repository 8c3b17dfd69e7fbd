//! How `memrel mark DIR PHASE` reaches a live `memrel attach` writing DIR:
//! two files in the results directory and two advisory locks (flock).
//!
//! - `live`: created by attach, which holds an exclusive lock on it for as
//!   long as it measures (the kernel drops the lock if attach dies). A
//!   `mark` that can take a shared lock on it knows nobody measures: it
//!   refuses, and so does one that finds no `live` file.
//! - `marks.jsonl`: one JSON line per mark, appended by `mark` under an
//!   exclusive lock of the file, stamped with `CLOCK_MONOTONIC` (the
//!   samples' clock) when `mark` ran. Attach reads new lines every tick.
//!
//! No mark is lost at the end: attach ends under the marks lock (reads the
//! last lines, then removes `live` and drops its lock), and `mark` checks
//! that `live` is still held while it holds that lock, so a mark either
//! lands before the last read or is refused with an error. The marks file
//! stays in the directory as the record of what was asked.
//!
//! Another program (a pytest plugin) uses the same two calls: start
//! `memrel attach --dir DIR PID`, wait for `live`, run `memrel mark`.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::protocol::{monotonic_s, Phase};

/// The file a live attach holds locked.
pub const LIVE_FILE: &str = "live";
/// The marks `memrel mark` appends, one JSON line each.
pub const MARKS_FILE: &str = "marks.jsonl";

/// How many bytes of [`MARKS_FILE`] the attach has read and taken the edges
/// of (a decimal number, rewritten after each): `memrel mark` waits until
/// its line is in it (the handshake), at most [`MARK_ACK_TIMEOUT`].
pub const MARKS_ACKED_FILE: &str = "marks.acked";

/// How long `memrel mark` waits for the attach to take its mark's reading.
pub const MARK_ACK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// What a mark asks: a phase begins (ending the one a mark opened before),
/// or the open phase ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkPhase {
    Begin(Phase),
    End,
}

/// The words that end the open phase without beginning another.
const END_WORDS: [&str; 2] = ["end", "idle"];

impl MarkPhase {
    /// A phase name of the protocol (load, forward, unload, release, …), or
    /// `end` / `idle`; else an error listing them.
    pub fn parse(name: &str) -> Result<MarkPhase> {
        if END_WORDS.contains(&name) {
            return Ok(MarkPhase::End);
        }
        match Phase::parse(name) {
            Some(phase) => Ok(MarkPhase::Begin(phase)),
            None => bail!(
                "unknown phase {name:?}: use one of {}, or end (ends the phase marked last)",
                Phase::ALL
                    .iter()
                    .filter(|p| **p != Phase::Idle)
                    .map(|p| p.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            MarkPhase::Begin(p) => p.as_str(),
            MarkPhase::End => "end",
        }
    }
}

/// One line of marks.jsonl.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Mark {
    /// A phase name or `end` (see [`MarkPhase::parse`]).
    pub phase: String,
    /// `CLOCK_MONOTONIC` when `memrel mark` ran, in seconds.
    pub mono_s: f64,
    /// The pid of the `memrel mark` that wrote it.
    pub by_pid: u32,
    /// The model the phase is about (`memrel mark --model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// What the edge's note says (`memrel watch --proxy`: the request);
    /// `None`: that `memrel mark` wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The writer holds what it does next until the edge is read (the
    /// proxy sends its request then): the wait is the edge's `held_s`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub holds: bool,
}

/// A mark as attach reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    pub phase: MarkPhase,
    pub mono_s: f64,
    pub model: Option<String>,
    pub note: Option<String>,
    pub holds: bool,
}

/// A mark as attach reads it: valid, or what was wrong with its line.
pub type MarkLine = Result<Received, String>;

/// Attach's side: the locked `live` file and the marks read so far.
pub struct LiveDir {
    dir: PathBuf,
    live: File,
    marks: File,
    /// Bytes of an unfinished last line.
    pending: Vec<u8>,
    /// Bytes of the marks file read in complete lines (what `acknowledge` says).
    taken_bytes: u64,
    /// What the last acknowledgement said (written again only when it grows).
    acked_bytes: Option<u64>,
}

impl LiveDir {
    /// Makes `dir` live: an empty marks file, then `live` locked and naming
    /// memrel's pid and the target's.
    pub fn open(dir: &Path, target_pid: u32) -> Result<LiveDir> {
        let marks_path = dir.join(MARKS_FILE);
        let mut marks = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .truncate(false)
            .open(&marks_path)
            .with_context(|| format!("cannot create {}", marks_path.display()))?;
        // Marks left by an earlier attach of this directory are not this
        // one's; every mark from the moment `live` is locked is (a mark may
        // come in before this function returns).
        marks
            .seek(SeekFrom::End(0))
            .with_context(|| format!("cannot read {}", marks_path.display()))?;
        let live_path = dir.join(LIVE_FILE);
        if let Ok(existing) = File::open(&live_path) {
            if matches!(existing.try_lock_shared(), Err(TryLockError::WouldBlock)) {
                bail!(
                    "{} already has a live measurement (another memrel attach writes it): \
                     pass another --dir",
                    dir.display()
                );
            }
        }
        // Made locked under another name, then moved into place: `live`
        // never exists unlocked while this attach runs.
        let tmp = dir.join(format!(".{LIVE_FILE}.{}", std::process::id()));
        let mut live =
            File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
        let info = serde_json::json!({"memrel_pid": std::process::id(), "pid": target_pid});
        live.lock()
            .and_then(|()| live.write_all(format!("{info}\n").as_bytes()))
            .and_then(|()| std::fs::rename(&tmp, &live_path))
            .with_context(|| format!("cannot write {}", live_path.display()))?;
        let taken_bytes = marks.stream_position().unwrap_or(0);
        let mut live_dir = LiveDir {
            dir: dir.to_path_buf(),
            live,
            marks,
            pending: Vec::new(),
            taken_bytes,
            acked_bytes: None,
        };
        live_dir.acknowledge();
        Ok(live_dir)
    }

    /// Tells `memrel mark` that every mark taken so far has its edge read
    /// (a write only when more were taken since the last one).
    pub fn acknowledge(&mut self) {
        if self.acked_bytes == Some(self.taken_bytes) {
            return;
        }
        self.acked_bytes = Some(self.taken_bytes);
        let path = self.dir.join(MARKS_ACKED_FILE);
        let tmp = self.dir.join(format!(".{MARKS_ACKED_FILE}.tmp"));
        // A mark that sees no acknowledgement only waits its timeout.
        let _ = std::fs::write(&tmp, self.taken_bytes.to_string())
            .and_then(|()| std::fs::rename(&tmp, &path));
    }

    /// The marks appended since the last call.
    pub fn take(&mut self) -> Vec<MarkLine> {
        let mut bytes = Vec::new();
        if let Err(e) = self.marks.read_to_end(&mut bytes) {
            return vec![Err(format!(
                "cannot read {}: {e}",
                self.dir.join(MARKS_FILE).display()
            ))];
        }
        self.pending.extend_from_slice(&bytes);
        let Some(last_newline) = self.pending.iter().rposition(|b| *b == b'\n') else {
            return Vec::new();
        };
        let complete: Vec<u8> = self.pending.drain(..=last_newline).collect();
        self.taken_bytes += complete.len() as u64;
        String::from_utf8_lossy(&complete)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(parse_line)
            .collect()
    }

    /// Ends the live measurement: the last marks, read under the marks lock,
    /// then `live` removed and unlocked (a later `mark` is refused).
    pub fn close(mut self) -> Vec<MarkLine> {
        let locked = self.marks.lock();
        let mut last = self.take();
        self.acknowledge();
        if let Err(e) = std::fs::remove_file(self.dir.join(LIVE_FILE)) {
            last.push(Err(format!(
                "cannot remove {}: {e} (memrel mark will see no lock on it and refuse)",
                self.dir.join(LIVE_FILE).display()
            )));
        }
        let _ = self.live.unlock();
        if locked.is_ok() {
            let _ = self.marks.unlock();
        }
        last
    }
}

fn parse_line(line: &str) -> MarkLine {
    let mark: Mark = serde_json::from_str(line)
        .map_err(|e| format!("a line of {MARKS_FILE} is not a mark ({e}): {line:?}"))?;
    let phase = MarkPhase::parse(&mark.phase).map_err(|e| format!("{MARKS_FILE}: {e}"))?;
    Ok(Received {
        phase,
        mono_s: mark.mono_s,
        model: mark.model,
        note: mark.note,
        holds: mark.holds,
    })
}

/// `memrel mark`'s side: appends a mark of `phase` to the live attach of
/// `dir`, or fails saying why nothing was recorded.
pub fn append_mark(dir: &Path, phase: MarkPhase, model: Option<&str>) -> Result<()> {
    append_mark_as(dir, phase, model, None, false)
}

/// [`append_mark`] with the edge's `note` (else "memrel mark") and whether
/// the caller `holds` its next step until the edge is read.
pub fn append_mark_as(
    dir: &Path,
    phase: MarkPhase,
    model: Option<&str>,
    note: Option<&str>,
    holds: bool,
) -> Result<()> {
    let no_live = || {
        format!(
            "no live measurement in {}: start `{}` first",
            dir.display(),
            crate::hint::Hint::Attach { dir, pid: "PID" }
        )
    };
    if !dir.is_dir() {
        bail!(
            "{} is not a directory: {}",
            dir.display(),
            no_live().split_once(": ").map_or("", |(_, fix)| fix)
        );
    }
    let marks_path = dir.join(MARKS_FILE);
    let mut marks = match OpenOptions::new().append(true).open(&marks_path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!("{}", no_live()),
        Err(e) => return Err(e).with_context(|| format!("cannot open {}", marks_path.display())),
    };
    marks
        .lock()
        .with_context(|| format!("cannot lock {}", marks_path.display()))?;
    let mono_s = monotonic_s();
    check_live(dir).with_context(no_live)?;
    let mark = Mark {
        phase: phase.as_str().to_string(),
        mono_s,
        by_pid: std::process::id(),
        model: model.map(str::to_string),
        note: note.map(str::to_string),
        holds,
    };
    let mut line = serde_json::to_vec(&mark)?;
    line.push(b'\n');
    marks
        .write_all(&line)
        .and_then(|()| marks.sync_data())
        .with_context(|| format!("cannot append to {}", marks_path.display()))?;
    let end = marks.stream_position().ok();
    let _ = marks.unlock();
    // The handshake: back only once the attach has read the edge, so what
    // the caller does next cannot leak into it.
    if let Some(end) = end {
        if !wait_for_ack(dir, end) {
            eprintln!(
                "memrel: warning: the attach did not confirm the {} mark within {} s \
                 (it is busy); it is recorded, its reading may come late",
                phase.as_str(),
                MARK_ACK_TIMEOUT.as_secs()
            );
        }
    }
    Ok(())
}

/// Waits until the attach of `dir` has taken the marks file up to `end`.
fn wait_for_ack(dir: &Path, end: u64) -> bool {
    let path = dir.join(MARKS_ACKED_FILE);
    let until = std::time::Instant::now() + MARK_ACK_TIMEOUT;
    loop {
        let acked = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok());
        if acked.is_some_and(|a| a >= end) {
            return true;
        }
        if std::time::Instant::now() >= until {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

/// Ok while an attach holds `dir`'s `live` lock.
fn check_live(dir: &Path) -> Result<()> {
    let path = dir.join(LIVE_FILE);
    let live = match File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!(
                "{} does not exist (no attach, or it has ended)",
                path.display()
            )
        }
        Err(e) => return Err(e).with_context(|| format!("cannot open {}", path.display())),
    };
    match live.try_lock_shared() {
        Err(TryLockError::WouldBlock) => Ok(()),
        Ok(()) => bail!(
            "{} is left from an attach that is no longer running",
            path.display()
        ),
        Err(TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("cannot test the lock of {}", path.display()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_reaches_the_live_attach_and_none_after_it_ended() {
        let dir = tempfile::tempdir().unwrap();
        let e = append_mark(dir.path(), MarkPhase::Begin(Phase::Load), None).unwrap_err();
        assert!(format!("{e:#}").contains("no live measurement in"), "{e:#}");
        let mut live = LiveDir::open(dir.path(), 1).unwrap();
        append_mark(dir.path(), MarkPhase::Begin(Phase::Load), Some("bert")).unwrap();
        append_mark(dir.path(), MarkPhase::End, None).unwrap();
        let got = live.take();
        assert_eq!(got.len(), 2, "{got:?}");
        let first = got[0].as_ref().unwrap();
        assert_eq!(first.phase, MarkPhase::Begin(Phase::Load));
        assert_eq!(first.model.as_deref(), Some("bert"));
        assert_eq!(got[1].as_ref().unwrap().phase, MarkPhase::End);
        append_mark(dir.path(), MarkPhase::Begin(Phase::Unload), None).unwrap();
        let last = live.close();
        assert_eq!(last.len(), 1, "{last:?}");
        let e = append_mark(dir.path(), MarkPhase::Begin(Phase::Load), None).unwrap_err();
        assert!(format!("{e:#}").contains("does not exist"), "{e:#}");
    }

    #[test]
    fn a_directory_with_a_live_attach_is_not_taken_by_another() {
        let dir = tempfile::tempdir().unwrap();
        let first = LiveDir::open(dir.path(), 1).unwrap();
        let e = LiveDir::open(dir.path(), 2).err().expect("refused");
        assert!(
            e.to_string().contains("already has a live measurement"),
            "{e}"
        );
        first.close();
        // Once it ended, the directory's earlier marks are not the new one's.
        append_mark(dir.path(), MarkPhase::End, None).unwrap_err();
        let old = r#"{"phase":"load","mono_s":1.0,"by_pid":9}"#;
        std::fs::write(dir.path().join(MARKS_FILE), format!("{old}\n")).unwrap();
        let mut again = LiveDir::open(dir.path(), 3).unwrap();
        assert!(again.take().is_empty());
    }

    #[test]
    fn a_live_file_nobody_holds_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(MARKS_FILE), "").unwrap();
        std::fs::write(dir.path().join(LIVE_FILE), "{}").unwrap();
        let e = append_mark(dir.path(), MarkPhase::End, None).unwrap_err();
        assert!(format!("{e:#}").contains("no longer running"), "{e:#}");
    }

    #[test]
    fn unknown_phases_get_the_list_and_bad_lines_are_named() {
        let e = MarkPhase::parse("loaded").unwrap_err().to_string();
        assert!(
            e.contains("unknown phase \"loaded\"") && e.contains("load, forward, unload"),
            "{e}"
        );
        assert_eq!(MarkPhase::parse("idle").unwrap(), MarkPhase::End);
        assert!(parse_line("junk").unwrap_err().contains("not a mark"));
    }
}
