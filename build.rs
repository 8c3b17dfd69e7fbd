//! Captures the git commit memrel is built from, for every record's header
//! (`build_info::COMMIT`). `MEMREL_COMMIT` in the build's environment wins
//! (a packager that builds outside git can pass it); without it and without
//! git (a wheel or `cargo install` from a crate, a source tarball) the
//! commit is `unknown`. Uncommitted changes are not marked: cargo reruns
//! this script only when HEAD moves, so a `-dirty` would go stale.
//!
//! Runs git only; fails no build: any error gives `unknown`.
//!
//! It also lists `memrel drive`'s presets (`src/drive/presets/*.toml`, one
//! file a server) into `$OUT_DIR/presets.rs`, each embedded with
//! `include_str!`, so adding a preset is adding its file
//! (`drive::cycle::PRESETS`).

use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=MEMREL_COMMIT");
    let dir = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = match std::env::var("MEMREL_COMMIT") {
        Ok(given) if !given.trim().is_empty() => given.trim().to_string(),
        _ => from_git(&dir).unwrap_or_else(|| "unknown".to_string()),
    };
    println!("cargo:rustc-env=MEMREL_COMMIT={commit}");
    presets(&dir);
}

/// `$OUT_DIR/presets.rs`: `&[(name, text)]` of every `src/drive/presets/*.toml`,
/// sorted by name. A folder that cannot be read gives an empty list (a test
/// in `drive::cycle` says so).
fn presets(dir: &Path) {
    let folder = dir.join("src").join("drive").join("presets");
    println!("cargo:rerun-if-changed={}", folder.display());
    let mut files: Vec<(String, std::path::PathBuf)> = std::fs::read_dir(&folder)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "toml"))
                .filter_map(|p| Some((p.file_stem()?.to_str()?.to_string(), p)))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let mut code = String::from("&[\n");
    for (name, path) in &files {
        code.push_str(&format!(
            "    ({name:?}, include_str!({:?})),\n",
            path.display().to_string()
        ));
    }
    code.push_str("]\n");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default());
    if let Err(e) = std::fs::write(out.join("presets.rs"), code) {
        println!("cargo:warning=cannot write the drive presets' list: {e}");
    }
}

/// The short commit of HEAD; reruns when HEAD or the branch it names moves.
fn from_git(dir: &Path) -> Option<String> {
    // Only a tree that is itself memrel's repository: a crate unpacked
    // inside some other repository must not take that one's commit.
    let top = git(dir, &["rev-parse", "--show-toplevel"])?;
    if std::fs::canonicalize(&top).ok()? != std::fs::canonicalize(dir).ok()? {
        return None;
    }
    // Only files that exist: cargo reruns a script on every build while a
    // path it watches is missing (a repository without packed-refs, or a
    // branch whose ref is packed). Packing a ref deletes the loose file that
    // is watched, so the next build watches packed-refs instead.
    let branch = git(dir, &["symbolic-ref", "-q", "HEAD"]);
    for path in ["HEAD", "packed-refs"].into_iter().chain(branch.as_deref()) {
        if let Some(p) = git(dir, &["rev-parse", "--git-path", path]) {
            let watched = dir.join(p);
            if watched.exists() {
                println!("cargo:rerun-if-changed={}", watched.display());
            }
        }
    }
    git(dir, &["rev-parse", "--short=12", "HEAD"])
}
