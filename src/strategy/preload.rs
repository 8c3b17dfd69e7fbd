//! What reaches a worker's environment: the allocator library a strategy
//! preloads (found on disk before any run starts, or a clear error naming the
//! Debian package), and the allocator variables of memrel's own environment,
//! which never leak into a worker.
//!
//! A shell's `LD_PRELOAD=libjemalloc.so.2` or `MALLOC_CONF=…` would otherwise
//! reach every worker and silently turn a "glibc" run into a jemalloc one.
//! [`clean_environment`] removes them all (and says which) before the
//! strategy's own environment is added.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::Strategy;

/// Folders (`:`-separated) to search for allocator libraries instead of the
/// system's library folders: for libraries unpacked from a `.deb` with
/// `dpkg -x` into a folder of their own.
pub const ALLOCATOR_PATH_ENV: &str = "MEMREL_ALLOCATOR_PATH";

/// Variables that change an allocator, removed from every worker unless the
/// strategy sets them: glibc's, jemalloc's (also as prefixed by
/// tikv-jemallocator), and the preload itself.
const EXACT: &[&str] = &[
    "LD_PRELOAD",
    "MALLOC_TRIM_THRESHOLD_",
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TOP_PAD_",
    "MALLOC_MMAP_MAX_",
    "MALLOC_ARENA_MAX",
    "MALLOC_ARENA_TEST",
    "MALLOC_PERTURB_",
    "MALLOC_CHECK_",
    "GLIBC_TUNABLES",
    "MALLOC_CONF",
    "_RJEM_MALLOC_CONF",
    "JE_MALLOC_CONF",
];

/// Prefixes of allocator variables (tcmalloc's and mimalloc's many knobs).
const PREFIXES: &[&str] = &["TCMALLOC_", "MIMALLOC_"];

/// True for a variable that changes an allocator.
pub fn is_allocator_variable(name: &str) -> bool {
    EXACT.contains(&name) || PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The allocator variables of memrel's own environment, as (name, value).
fn allocator_variables() -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(name, value)| {
            let name = name.into_string().ok()?;
            is_allocator_variable(&name).then(|| (name, value.to_string_lossy().into_owned()))
        })
        .collect();
    found.sort();
    found
}

/// Removes every allocator variable from `command`'s environment, then sets
/// the strategy's own (`LD_PRELOAD` = `preload` where there is one). Returns
/// the variables of memrel's environment that were dropped (`NAME=value`),
/// for the note that says so.
pub fn clean_environment(
    command: &mut Command,
    strategy: &Strategy,
    preload: Option<&Path>,
) -> Vec<String> {
    let mut ignored = Vec::new();
    for (name, value) in allocator_variables() {
        command.env_remove(&name);
        let set_by_strategy = strategy.env.iter().any(|(k, _)| *k == name)
            || (name == "LD_PRELOAD" && preload.is_some());
        if !set_by_strategy {
            ignored.push(format!("{name}={value}"));
        }
    }
    command.envs(strategy.env.iter().copied());
    if let Some(library) = preload {
        command.env("LD_PRELOAD", library);
    }
    ignored
}

/// The allocator variables of memrel's own environment (`NAME=value`): none
/// of them reaches a worker unless its strategy sets it.
pub fn inherited_allocator_variables() -> Vec<String> {
    allocator_variables()
        .into_iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect()
}

/// The preloaded library could not be found.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error(
    "strategy {strategy:?} preloads {library}, which is not installed (looked in {searched}); \
     install it with `apt-get install {package}` (Debian/Ubuntu package {package}), or set \
     {ALLOCATOR_PATH_ENV} to the folder that holds it"
)]
pub struct PreloadError {
    pub strategy: String,
    pub library: String,
    pub package: String,
    pub searched: String,
}

/// The library a strategy preloads, as an absolute path (`None`: glibc).
pub fn find_library(strategy: &Strategy) -> Result<Option<PathBuf>, PreloadError> {
    let (Some(library), Some(package)) = (
        strategy.allocator.library(),
        strategy.allocator.debian_package(),
    ) else {
        return Ok(None);
    };
    let dirs = search_dirs();
    if let Some(found) = dirs.iter().map(|d| d.join(library)).find(|p| p.is_file()) {
        return Ok(Some(found));
    }
    Err(PreloadError {
        strategy: strategy.name.to_string(),
        library: library.to_string(),
        package: package.to_string(),
        searched: dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// `MEMREL_ALLOCATOR_PATH` where set, else the system's library folders (the
/// multiarch ones of this machine first, as the dynamic loader searches).
fn search_dirs() -> Vec<PathBuf> {
    if let Some(path) = std::env::var_os(ALLOCATOR_PATH_ENV) {
        return std::env::split_paths(&path)
            .filter(|p| !p.as_os_str().is_empty())
            .collect();
    }
    system_library_dirs()
}

/// The system's library folders, the multiarch ones of this machine first,
/// as the dynamic loader searches them (the tests look for the allocator
/// libraries there too).
pub fn system_library_dirs() -> Vec<PathBuf> {
    let triplet = format!("{}-linux-gnu", std::env::consts::ARCH);
    [
        format!("/usr/lib/{triplet}"),
        format!("/lib/{triplet}"),
        "/usr/local/lib".into(),
        "/usr/lib64".into(),
        "/usr/lib".into(),
    ]
    .into_iter()
    .map(PathBuf::from)
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocator_variables_are_recognised() {
        for name in [
            "LD_PRELOAD",
            "MALLOC_CONF",
            "_RJEM_MALLOC_CONF",
            "TCMALLOC_RELEASE_RATE",
            "MIMALLOC_PURGE_DELAY",
            "GLIBC_TUNABLES",
            "MALLOC_ARENA_MAX",
        ] {
            assert!(is_allocator_variable(name), "{name}");
        }
        for name in ["PATH", "HOME", "MEMREL_EVENT_FD", "RAYON_NUM_THREADS"] {
            assert!(!is_allocator_variable(name), "{name}");
        }
    }
}
