//! Small file-system helpers shared by everything that writes results.
//!
//! Results must never be half-written: every file goes to a temporary name in
//! the same directory and is renamed into place. And a name that comes from
//! outside (a scenario file's name, a baseline name, a scenario name read back
//! from a saved `runs.json`) becomes a path only through [`join_name`], so no
//! name can write outside the directory it is joined to.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Writes `bytes` to `path` atomically: a uniquely named temporary file in
/// the same directory (tempfile), renamed into place. On any failure the
/// temporary file is removed (tempfile deletes it on drop), so a full disk
/// leaves neither a half-written file nor a hidden one behind.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".memrel-")
        .suffix(".tmp")
        // As std::fs::write would (the umask applies), not tempfile's 0600:
        // results are read by other users and by CI's upload steps.
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666))
        .tempfile_in(dir)
        .with_context(|| format!("cannot write a temporary file in {}", dir.display()))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.flush())
        .with_context(|| format!("cannot write {}", tmp.path().display()))?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("cannot move {} into place", path.display()))?;
    Ok(())
}

/// Writes files shipped inside the binary (relative path, text) under
/// `root/<hash of them all>/`, once per version (a file already there with
/// the same text is left alone; others are written atomically), and returns
/// that directory. For the Python module and the built-in scenarios'
/// scripts: whatever memrel version runs gets its own copy.
pub fn write_embedded(root: &Path, files: &[(&str, &str)]) -> Result<PathBuf> {
    let hash = fnv1a64(
        files
            .iter()
            .flat_map(|(path, text)| path.bytes().chain(text.bytes())),
    );
    let dir = root.join(format!("{hash:016x}"));
    for (path, text) in files {
        let file = dir.join(path);
        if std::fs::read_to_string(&file).ok().as_deref() == Some(*text) {
            continue;
        }
        let parent = file.parent().unwrap_or(&dir);
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
        write_atomic(&file, text.as_bytes())?;
    }
    Ok(dir)
}

/// FNV-1a, 64 bits, of `bytes`: a content hash that is the same in every
/// memrel on every platform (std's hasher is not, and a crate would be a
/// dependency for six lines). What depends on its values: a synthetic
/// checkpoint's weights (`model::synth`), a machine's key (`machine`), a
/// strategy's fallback colour (`export::chart::palette`), the directory of
/// embedded files ([`write_embedded`]); a test pins them.
pub fn fnv1a64(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The longest name [`check_name`] accepts, in bytes (file systems allow 255).
pub const MAX_NAME_BYTES: usize = 200;

/// A name that cannot be used as one directory name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} name {name:?} cannot be a directory name: {reason}; use letters, digits, '-', '_' and '.'")]
pub struct UnsafeName {
    /// What the name names: `scenario`, `baseline`, …
    pub what: &'static str,
    pub name: String,
    pub reason: &'static str,
}

/// Accepts `name` only if it is exactly one ordinary path component: not
/// empty, not `.` or `..`, no `/` or `\`, no NUL or other control
/// character, not hidden (a leading `.` is how memrel names its temporary
/// files), at most [`MAX_NAME_BYTES`].
pub fn check_name(what: &'static str, name: &str) -> Result<(), UnsafeName> {
    let reason = if name.is_empty() {
        "it is empty"
    } else if name == "." || name == ".." {
        "it names the current or the parent directory"
    } else if name.contains('/') || name.contains('\\') {
        "it contains a path separator"
    } else if name.contains('\0') {
        "it contains a NUL byte"
    } else if name.chars().any(char::is_control) {
        "it contains a control character"
    } else if name.starts_with('.') {
        "it starts with '.'"
    } else if name.len() > MAX_NAME_BYTES {
        "it is longer than 200 bytes"
    } else {
        return Ok(());
    };
    Err(UnsafeName {
        what,
        name: name.to_string(),
        reason,
    })
}

/// `root/name` after [`check_name`]: the one way a name from outside becomes a path.
pub fn join_name(root: &Path, what: &'static str, name: &str) -> Result<PathBuf, UnsafeName> {
    check_name(what, name)?;
    Ok(root.join(name))
}

/// Seconds since the Unix epoch as `YYYYMMDD-HHMMSS` (UTC), for directory names.
pub fn utc_stamp(unix_s: u64) -> String {
    let days = (unix_s / 86_400) as i64;
    let secs = unix_s % 86_400;
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}-{:02}{:02}{:02}",
        secs / 3600,
        (secs / 60) % 60,
        secs % 60
    )
}

/// `2026-11-22 04:27` from Unix seconds.
pub fn utc_readable(unix_s: u64) -> String {
    let stamp = utc_stamp(unix_s);
    let c: Vec<char> = stamp.chars().collect();
    if c.len() != 15 {
        return stamp;
    }
    let part = |from: usize, to: usize| c[from..to].iter().collect::<String>();
    format!(
        "{}-{}-{} {}:{}",
        part(0, 4),
        part(4, 6),
        part(6, 8),
        part(9, 11),
        part(11, 13)
    )
}

pub fn now_unix_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checkpoints, machine keys, colours and embedded directories depend on
    /// these values: FNV-1a's published vectors, and the directory name of
    /// embedded files (every file's path and text, in order, hashed as one).
    #[test]
    fn fnv1a64_keeps_its_values() {
        assert_eq!(fnv1a64("".bytes()), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64("a".bytes()), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64("foobar".bytes()), 0x8594_4171_f739_67e8);
        let root = tempfile::tempdir().unwrap();
        let dir = write_embedded(root.path(), &[("a.txt", "A"), ("b/c.txt", "B")]).unwrap();
        assert_eq!(dir, root.path().join("5afc562e71cec9b5"));
        assert_eq!(std::fs::read_to_string(dir.join("b/c.txt")).unwrap(), "B");
    }

    #[test]
    fn utc_stamp_matches_known_dates() {
        assert_eq!(utc_stamp(0), "19700101-000000");
        assert_eq!(utc_stamp(1_795_000_000), "20261118-110640");
    }

    #[test]
    fn names_that_would_leave_the_root_are_refused() {
        let root = Path::new("/results");
        for bad in [
            "", ".", "..", "../x", "a/b", "/etc", "a\\b", "a\0b", "\0", "a\nb", ".hidden", "..x",
        ] {
            let err = join_name(root, "scenario", bad).unwrap_err();
            assert_eq!(err.name, bad);
            assert!(err.to_string().starts_with("scenario name "), "{err}");
        }
        assert!(join_name(root, "scenario", &"x".repeat(MAX_NAME_BYTES + 1)).is_err());
    }

    #[test]
    fn ordinary_names_stay_one_component_under_the_root() {
        let root = Path::new("/results");
        for good in [
            "cpu-trim",
            "ci_gate.v2",
            "my scenario",
            "日本語",
            "a..b",
            "x.",
        ] {
            let path = join_name(root, "scenario", good).unwrap();
            assert_eq!(path.parent(), Some(root), "{good}");
            assert_eq!(path.file_name().and_then(|n| n.to_str()), Some(good));
        }
        assert!(join_name(root, "scenario", &"x".repeat(MAX_NAME_BYTES)).is_ok());
    }
}
