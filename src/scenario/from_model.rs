//! `memrel run --model DIR|FILE.gguf|org/name`: a scenario made from a model alone.
//!
//! The default scenario ([`DEFAULT`]) is taken as it is (its cycles, steps,
//! strategies, thresholds) and only its one model is replaced, then the text
//! goes through the same parser as any scenario file. The result is real
//! scenario TOML: runs.json keeps it (`scenario_toml`), so `report`, `check`
//! and a baseline re-run read a `--model` run like any other, and the model
//! it used is written out in it.
//!
//! It must not fetch or inspect the model (`model::source` does, in the plan,
//! before any run) and must not keep a second copy of the default workload.

use std::path::Path;

use anyhow::{Context, Result};

use super::builtin::{builtin_text, DEFAULT};
use super::parse::{check_hub_names, parse_str};
use super::types::Scenario;
use crate::model::spec::ModelSource;

/// The model's id when its name gives none.
const MODEL_ID: &str = "model";
/// The scenario's origin in runs.json: no file, the flag.
const ORIGIN: &str = "--model";

/// The default scenario with `arg`'s model in place of its own.
pub fn for_model(arg: &str) -> Result<Scenario> {
    let source = model_source(arg)?;
    let default = builtin_text(DEFAULT).context("the default scenario is not built in")?;
    let name = results_name(&source);
    let text = scenario_text(&source, &name, arg, default)?;
    parse_str(&name, ORIGIN, &text)
        .with_context(|| format!("--model {arg}: the scenario made from it"))
}

/// What `--model` names: a directory or a GGUF file that exists (used as it is), a model
/// preset (`memrel list`), or else a hub repository `org/name[@revision]`.
/// Anything on disk at that path (a file, a symlink however broken, a path
/// memrel may not look into) is local: it is refused here with the reason,
/// never looked up on the hub.
pub fn model_source(arg: &str) -> Result<ModelSource> {
    let path = Path::new(arg);
    if let Some(local) = local_path(arg, path)? {
        return Ok(local);
    }
    if crate::model::preset::lookup(arg).is_ok() {
        return Ok(ModelSource::Preset(arg.to_string()));
    }
    let (repo, revision) = arg.split_once('@').unwrap_or((arg, "main"));
    let looks_like_path = arg.starts_with(['/', '.', '~']) || repo.matches('/').count() > 1;
    if looks_like_path || check_hub_names(repo, revision).is_err() || revision.is_empty() {
        anyhow::bail!(
            "--model {arg}: no such directory, and not a hub repository id: give a local \
             HuggingFace-layout directory (config.json + safetensors), a hub repository \
             org/name (optionally org/name@revision) or a preset from `{}`",
            crate::hint::Hint::List
        );
    }
    Ok(ModelSource::Hub {
        repo: repo.to_string(),
        revision: revision.to_string(),
    })
}

/// `arg` as a local directory when something is on disk at `path`; `None`
/// when nothing is (then it may be a preset or a hub id). Only "no such file
/// or directory" lets it go on: a symlink loop, a dangling link, a component
/// that is a file or a directory memrel may not search is an error naming
/// the path, the reason and the fix.
fn local_path(arg: &str, path: &Path) -> Result<Option<ModelSource>> {
    let give_dir = "give the directory that holds config.json and the safetensors weights";
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => anyhow::bail!(
            "--model {arg}: cannot look at the local path ({}): {}; {give_dir}",
            io_reason(&e),
            io_fix(&e)
        ),
        Ok(_) => {}
    }
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) => anyhow::bail!(
            "--model {arg} is a symbolic link memrel cannot follow ({}): {}; {give_dir}",
            io_reason(&e),
            io_fix(&e)
        ),
    };
    if meta.is_file() && crate::model::gguf::looks_like_gguf(path) {
        let full = std::fs::canonicalize(path)
            .with_context(|| format!("--model {arg}: cannot resolve the file"))?;
        let text = full.to_str().with_context(|| {
            format!(
                "--model {arg}: its full path {} is not UTF-8: move or link the file to a UTF-8 path",
                full.display()
            )
        })?;
        return Ok(Some(ModelSource::Path(text.to_string())));
    }
    if !meta.is_dir() {
        anyhow::bail!("--model {arg} is a file and not GGUF: {give_dir}, or a .gguf file");
    }
    if let Err(e) = std::fs::read_dir(path) {
        anyhow::bail!(
            "--model {arg}: cannot read the directory ({}): {}",
            io_reason(&e),
            io_fix(&e)
        );
    }
    let full = std::fs::canonicalize(path)
        .with_context(|| format!("--model {arg}: cannot resolve the directory"))?;
    let text = full.to_str().with_context(|| {
        format!(
            "--model {arg}: its full path {} is not UTF-8: move or link the model to a UTF-8 path",
            full.display()
        )
    })?;
    Ok(Some(ModelSource::Path(text.to_string())))
}

/// An I/O error in lowercase words, without Rust's "(os error N)".
fn io_reason(e: &std::io::Error) -> String {
    let text = e.to_string();
    let text = text.split(" (os error").next().unwrap_or(&text);
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => text.to_string(),
    }
}

/// What to do about a path the kernel refused.
fn io_fix(e: &std::io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::ELOOP) => "a symbolic link on the path points back at itself: fix or remove the link",
        Some(libc::EACCES) | Some(libc::EPERM) => {
            "memrel may not read it: give it read and search permission (chmod), or copy the model somewhere readable"
        }
        Some(libc::ENOTDIR) => "a part of the path is a file, not a directory: check the path",
        Some(libc::ENOENT) => "what the link points to does not exist: fix the link",
        Some(libc::ENAMETOOLONG) => "the path is too long: shorten it",
        _ => "check the path",
    }
}

/// The scenario's name (results go to `<OUT>/<name>/<timestamp>`) and the
/// model's id in it (`load <name>`, the tables' model column): the
/// directory's name, the preset, or `org--name` for a hub repository, with
/// anything but letters, digits, `-`, `_` and `.` turned into `-`.
fn results_name(source: &ModelSource) -> String {
    let raw = match source {
        ModelSource::Path(dir) => Path::new(dir)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        ModelSource::Preset(name) => name.clone(),
        ModelSource::Hub { repo, .. } => repo.replace('/', "--"),
        ModelSource::Fake(_) => String::new(),
    };
    let clean: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '-'
            }
        })
        .take(100)
        .collect();
    match clean.trim_start_matches('.') {
        "" => MODEL_ID.to_string(),
        name => name.to_string(),
    }
}

/// `default` (scenario TOML with one model) with its model replaced by
/// `source` under the id `id`, in its steps too.
fn scenario_text(source: &ModelSource, id: &str, arg: &str, default: &str) -> Result<String> {
    let broken = |why: &str| anyhow::anyhow!("the default scenario {DEFAULT} {why}");
    let mut table: toml::Table = default
        .parse()
        .map_err(|e| broken(&format!("does not parse: {e}")))?;
    let models = table
        .get("models")
        .and_then(toml::Value::as_table)
        .ok_or_else(|| broken("has no [models]"))?;
    let [old_id] = models.keys().collect::<Vec<_>>()[..] else {
        return Err(broken("does not have exactly one model"));
    };
    let old_id = old_id.clone();
    let mut model = toml::Table::new();
    match source {
        ModelSource::Path(dir) => {
            model.insert("path".into(), dir.clone().into());
        }
        ModelSource::Preset(name) => {
            model.insert("preset".into(), name.clone().into());
        }
        ModelSource::Hub { repo, revision } => {
            model.insert("hub".into(), repo.clone().into());
            model.insert("revision".into(), revision.clone().into());
        }
        ModelSource::Fake(_) => return Err(broken("cannot take a fake model")),
    }
    let mut models = toml::Table::new();
    models.insert(id.into(), model.into());
    table.insert("models".into(), models.into());
    let steps = table
        .get_mut("workload")
        .and_then(|w| w.get_mut("steps"))
        .and_then(toml::Value::as_array_mut)
        .ok_or_else(|| broken("has no workload steps"))?;
    for step in steps.iter_mut() {
        if let Some(text) = step.as_str() {
            let words: Vec<&str> = text.split_whitespace().collect();
            if let [verb, named] = words[..] {
                if named == old_id {
                    *step = format!("{verb} {id}").into();
                }
            }
        }
    }
    let description = table
        .get("description")
        .and_then(toml::Value::as_str)
        .unwrap_or_default()
        .to_string();
    table.insert(
        "description".into(),
        format!("{source}: the workload and strategies of {DEFAULT} ({description})").into(),
    );
    let body = toml::to_string(&table).map_err(|e| broken(&format!("cannot be written: {e}")))?;
    Ok(format!(
        "# Made by `memrel run --model {arg}`: the default scenario ({DEFAULT}) with this model.\n{body}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hub_id_keeps_the_default_workload_and_strategies() {
        let scenario = for_model("org/tiny-llama@v1").unwrap();
        let default = crate::scenario::load(DEFAULT).unwrap();
        assert_eq!(scenario.name, "org--tiny-llama");
        assert_eq!(scenario.origin, "--model");
        assert_eq!(scenario.strategies, default.strategies);
        assert_eq!(scenario.cycles, default.cycles);
        assert_eq!(scenario.device, default.device);
        assert_eq!(
            scenario.models.get("org--tiny-llama"),
            Some(&ModelSource::Hub {
                repo: "org/tiny-llama".into(),
                revision: "v1".into()
            })
        );
        assert_eq!(scenario.models.len(), 1);
        let steps: Vec<String> = scenario
            .workload
            .steps
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(
            steps.contains(&"load org--tiny-llama".to_string()),
            "{steps:?}"
        );
        assert!(
            steps.contains(&"unload org--tiny-llama".to_string()),
            "{steps:?}"
        );
        assert_eq!(steps.len(), default.workload.steps.len());
        let mut expected = default.workload.clone();
        expected.steps = scenario.workload.steps.clone();
        assert_eq!(scenario.workload, expected);
        // The text runs.json keeps parses back to the same scenario (check, report).
        let again = parse_str(&scenario.name, ORIGIN, &scenario.toml_text).unwrap();
        assert_eq!(again, scenario);
        assert!(scenario.toml_text.contains("hub = \"org/tiny-llama\""));
    }

    #[test]
    fn a_directory_is_used_as_it_is_and_names_the_results() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("my model");
        std::fs::create_dir(&model).unwrap();
        let scenario = for_model(model.to_str().unwrap()).unwrap();
        assert_eq!(scenario.name, "my-model");
        let full = std::fs::canonicalize(&model).unwrap();
        assert_eq!(
            scenario.models.get("my-model"),
            Some(&ModelSource::Path(full.to_str().unwrap().to_string()))
        );
    }

    #[test]
    fn a_preset_name_is_a_preset() {
        let scenario = for_model("bert-tiny").unwrap();
        assert_eq!(
            scenario.models.get("bert-tiny"),
            Some(&ModelSource::Preset("bert-tiny".into()))
        );
    }

    #[test]
    fn what_is_neither_a_directory_nor_a_hub_id_is_refused_clearly() {
        for bad in [
            "./no-such-dir",
            "/no/such/dir",
            "a/b/c",
            "org/name@",
            "org/..",
        ] {
            let e = model_source(bad).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("--model {bad}: no such directory")),
                "{bad}: {e}"
            );
            assert!(e.contains("org/name"), "{e}");
        }
        let file = tempfile::NamedTempFile::new().unwrap();
        let e = model_source(file.path().to_str().unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("is a file"), "{e}");
    }

    /// Issue 36: a local path is never looked up on the hub, whatever is
    /// wrong with it; `org/name`-shaped paths included.
    #[test]
    fn a_broken_local_path_is_refused_locally_and_names_the_fix() {
        let tmp = tempfile::tempdir().unwrap();
        let org = tmp.path().join("org");
        std::fs::create_dir(&org).unwrap();
        std::os::unix::fs::symlink("loop-b", org.join("loop-a")).unwrap();
        std::os::unix::fs::symlink("loop-a", org.join("loop-b")).unwrap();
        std::os::unix::fs::symlink("nowhere", org.join("dangling")).unwrap();
        std::fs::write(org.join("file"), b"x").unwrap();
        let cwd = tmp.path().to_str().unwrap();
        for (arg, words) in [
            ("org/loop-a", "points back at itself"),
            ("org/loop-a/model", "points back at itself"),
            ("org/dangling", "does not exist: fix the link"),
            ("org/file/model", "is a file, not a directory"),
        ] {
            let full = format!("{cwd}/{arg}");
            let e = model_source(&full).unwrap_err().to_string();
            assert!(e.starts_with(&format!("--model {full}")), "{arg}: {e}");
            assert!(e.contains(words), "{arg}: {e}");
            assert!(!e.contains("hub repository id"), "{arg}: {e}");
            assert!(!e.contains("os error"), "{arg}: {e}");
        }
    }
}
