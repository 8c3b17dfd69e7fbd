//! TOML text → validated [`Scenario`], with errors that name the file, line,
//! column and key and say how to fix it.

mod fake;
mod workload;

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::builtin::{builtin_names, builtin_text};
use super::types::*;
use crate::metrics::catalogue::{self, Unit};
use crate::metrics::why::Mechanism;
use crate::model::spec::ModelSource;
use crate::strategy;
use crate::textutil::did_you_mean;
use fake::{fake_model, is_fake};
use workload::{parse_workload, WorkloadFile};

/// The largest amount a threshold may name, in MiB (1 PiB): larger is a typo.
const MAX_MIB: f64 = 1024.0 * 1024.0 * 1024.0;

#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error(
        "unknown scenario {name:?}: not a built-in and no such file; built-ins are: {available}"
    )]
    Unknown { name: String, available: String },
    #[error("cannot read scenario file {path}: {reason}")]
    Unreadable { path: String, reason: String },
    #[error("{origin}: {source} (rename the file)")]
    UnusableName {
        origin: String,
        source: crate::fsutil::UnsafeName,
    },
    #[error("{origin}:{line}:{column}: {message}")]
    Invalid {
        origin: String,
        line: usize,
        column: usize,
        message: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    description: String,
    #[serde(default = "default_device")]
    device: Spanned<String>,
    /// GPUs to spread the runs over, in parallel (`device` must be CUDA).
    devices: Option<Spanned<Vec<u32>>>,
    #[serde(default = "default_cycles")]
    cycles: Spanned<u32>,
    #[serde(default = "default_repeat")]
    repeat: u32,
    strategies: Spanned<Vec<Spanned<String>>>,
    /// Strategies the file defines (`[[strategy]]`: name, env, preload),
    /// named in `strategies` like a built-in.
    #[serde(default)]
    strategy: Vec<Spanned<crate::strategy::custom::Definition>>,
    #[serde(default = "default_interval_ms")]
    interval_ms: Spanned<f64>,
    #[serde(default = "default_timeout_s")]
    timeout_s: Spanned<f64>,
    #[serde(default = "no_models")]
    models: Spanned<BTreeMap<String, Spanned<ModelFile>>>,
    workload: Option<Spanned<WorkloadFile>>,
    /// A program to measure instead of the candle worker (`[workload]`).
    command: Option<Spanned<Vec<String>>>,
    /// A program's model files, whose page cache is read.
    model_files: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    thresholds: ThresholdsFile,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelFile {
    preset: Option<String>,
    path: Option<String>,
    hub: Option<String>,
    revision: Option<String>,
    fake_anon_mib: Option<f64>,
    fake_file_mib: Option<f64>,
    fake_leak_mib: Option<f64>,
    fake_vram_mib: Option<f64>,
    fake_late_free_ms: Option<u64>,
    fake_spike_mib: Option<f64>,
    fake_spike_ms: Option<u64>,
}

/// `[thresholds]` as written: every key with its value and position. The
/// keys are checked against [`THRESHOLD_KEYS`] and the metric catalogue's
/// budget keys (`thresholds`), so each budget key is spelled once.
type ThresholdsFile = BTreeMap<Spanned<String>, Spanned<f64>>;

/// The `[thresholds]` keys that are not budgets, with their defaults.
const THRESHOLD_KEYS: [(&str, f64); 3] = [
    ("retention_mib", 16.0),
    ("noise_percent", 5.0),
    ("noise_mib", 16.0),
];

fn no_models() -> Spanned<BTreeMap<String, Spanned<ModelFile>>> {
    Spanned::new(0..0, BTreeMap::new())
}
fn default_device() -> Spanned<String> {
    Spanned::new(0..0, "cpu".to_string())
}
fn default_cycles() -> Spanned<u32> {
    Spanned::new(0..0, 5)
}
fn default_repeat() -> u32 {
    1
}
fn default_interval_ms() -> Spanned<f64> {
    Spanned::new(0..0, 10.0)
}
fn default_timeout_s() -> Spanned<f64> {
    Spanned::new(0..0, 600.0)
}
/// The longest timeout a scenario may ask for: a week, in seconds.
const MAX_TIMEOUT_S: f64 = 7.0 * 86_400.0;

/// Loads a scenario by built-in name or file path.
pub fn load(name_or_path: &str) -> Result<Scenario, ScenarioError> {
    if let Some(text) = builtin_text(name_or_path) {
        return parse_str(name_or_path, "builtin", text);
    }
    let path = Path::new(name_or_path);
    if path.exists() {
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError::Unreadable {
            path: path.display().to_string(),
            reason: e.to_string().to_lowercase(),
        })?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| name_or_path.to_string());
        return parse_str(&name, &path.display().to_string(), &text);
    }
    let mut available = builtin_names().join(", ");
    if let Some(guess) = did_you_mean(name_or_path, &builtin_names()) {
        available = format!("{available} (did you mean {guess:?}?)");
    }
    Err(ScenarioError::Unknown {
        name: name_or_path.to_string(),
        available,
    })
}

/// Where a scenario's text came from, for errors that point into it.
struct Ctx<'a> {
    origin: &'a str,
    text: &'a str,
}

impl Ctx<'_> {
    /// An error at `span` of the text: `origin:line:column: message`.
    fn invalid(&self, span: std::ops::Range<usize>, message: String) -> ScenarioError {
        let (line, column) = line_column(self.text, span.start);
        ScenarioError::Invalid {
            origin: self.origin.to_string(),
            line,
            column,
            message,
        }
    }
}

/// Parses and validates scenario text. `origin` names the file in errors.
pub fn parse_str(name: &str, origin: &str, text: &str) -> Result<Scenario, ScenarioError> {
    // The name becomes `results/<name>/…` and `baselines/<b>/<name>`.
    crate::fsutil::check_name("scenario", name).map_err(|source| ScenarioError::UnusableName {
        origin: origin.to_string(),
        source,
    })?;
    let ctx = Ctx { origin, text };
    let file: ScenarioFile = toml::from_str(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        let message = e.message().trim().replace('\n', " ");
        ctx.invalid(span, lowercase_first(&message))
    })?;
    let device = device(&file, &ctx)?;
    let devices = devices(&file, device, &ctx)?;
    let (interval_ms, timeout_s) = timing(&file, &ctx)?;
    let strategies = strategies(&file, &ctx)?;
    let models = models(&file, &ctx)?;
    let (worker, workload) = worker(&file, &models, &ctx)?;
    let model_files = model_files(&file, &worker, &ctx)?;
    let thresholds = thresholds(&file.thresholds, device, &ctx)?;
    Ok(Scenario {
        name: name.to_string(),
        origin: origin.to_string(),
        toml_text: text.to_string(),
        description: file.description,
        device,
        devices,
        cycles: *file.cycles.get_ref(),
        repeat: file.repeat.max(1),
        strategies,
        interval_ms,
        timeout_s,
        models,
        workload,
        worker,
        thresholds,
        model_files,
    })
}

/// `model_files = [...]`: a program's (memrel's worker reads its own
/// models' files), each a path that is not empty.
fn model_files(
    file: &ScenarioFile,
    worker: &WorkerKind,
    ctx: &Ctx,
) -> Result<Vec<String>, ScenarioError> {
    let Some(files) = &file.model_files else {
        return Ok(Vec::new());
    };
    if !matches!(worker, WorkerKind::Command(_)) {
        return Err(ctx.invalid(
            files.span(),
            "model_files is for a program (command = [...]): memrel's worker reads the page \
             cache of its own models' files; remove it"
                .into(),
        ));
    }
    if files.get_ref().iter().any(|f| f.trim().is_empty()) {
        return Err(ctx.invalid(
            files.span(),
            "model_files has an empty path: name the model's weight files or their directory"
                .into(),
        ));
    }
    Ok(files.get_ref().clone())
}

/// The `[thresholds]` table of any TOML text (its other keys are not read
/// here), checked as a scenario's is: known keys only, amounts in range,
/// VRAM budgets only on a CUDA `device`. Returns its keys and amounts as
/// written, in the order they appear. `origin` names the text in errors
/// (`origin:line:column: …`). What `memrel drive` and `memrel attach` budget
/// (a cycle file's `[thresholds]`, `--budget KEY=VALUE`) goes through here,
/// so a key is spelled and checked once.
pub fn thresholds_table(
    origin: &str,
    text: &str,
    device: DeviceSpec,
) -> Result<Vec<(String, f64)>, ScenarioError> {
    #[derive(Deserialize)]
    struct Only {
        #[serde(default)]
        thresholds: ThresholdsFile,
    }
    let ctx = Ctx { origin, text };
    let file: Only = toml::from_str(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        let message = e.message().trim().replace('\n', " ");
        ctx.invalid(span, lowercase_first(&message))
    })?;
    thresholds(&file.thresholds, device, &ctx)?;
    let mut entries: Vec<(&Spanned<String>, &Spanned<f64>)> = file.thresholds.iter().collect();
    entries.sort_by_key(|(k, _)| k.span().start);
    Ok(entries
        .into_iter()
        .map(|(k, v)| (k.get_ref().clone(), *v.get_ref()))
        .collect())
}

/// `device`: `cpu`, `cuda` or `cuda:N`.
fn device(file: &ScenarioFile, ctx: &Ctx) -> Result<DeviceSpec, ScenarioError> {
    DeviceSpec::parse(file.device.get_ref()).ok_or_else(|| {
        ctx.invalid(
            file.device.span(),
            format!(
                "device {:?} is not valid: use \"cpu\", \"cuda\" or \"cuda:N\"",
                file.device.get_ref()
            ),
        )
    })
}

/// `devices`: distinct GPU indices, on a CUDA scenario.
fn devices(file: &ScenarioFile, device: DeviceSpec, ctx: &Ctx) -> Result<Vec<u32>, ScenarioError> {
    let Some(devices) = &file.devices else {
        return Ok(Vec::new());
    };
    check_devices(devices.get_ref(), device).map_err(|e| ctx.invalid(devices.span(), e))?;
    Ok(devices.get_ref().clone())
}

/// Why `devices` cannot spread runs on `device`'s scenario, if it cannot.
pub fn check_devices(devices: &[u32], device: DeviceSpec) -> Result<(), String> {
    if !device.is_cuda() {
        return Err(format!(
            "devices {devices:?} spreads runs over GPUs, and the device is {device}: make it cuda \
             (device = \"cuda\" in the scenario, or --device cuda)"
        ));
    }
    if devices.is_empty() {
        return Err("devices is empty: list the GPUs to use, e.g. devices = [0, 1]".into());
    }
    if let Some(n) = devices
        .iter()
        .find(|n| **n as usize >= crate::record::gpu::MAX_GPUS)
    {
        return Err(format!(
            "devices lists GPU {n}: memrel keeps GPUs 0 to {}",
            crate::record::gpu::MAX_GPUS - 1
        ));
    }
    for (i, n) in devices.iter().enumerate() {
        if devices[..i].contains(n) {
            return Err(format!("devices lists GPU {n} twice: list each GPU once"));
        }
    }
    Ok(())
}

/// `cycles`, `timeout_s` and `interval_ms` in range; returns (interval_ms, timeout_s).
fn timing(file: &ScenarioFile, ctx: &Ctx) -> Result<(f64, f64), ScenarioError> {
    if *file.cycles.get_ref() == 0 {
        return Err(ctx.invalid(file.cycles.span(), "cycles must be at least 1".into()));
    }
    let timeout_s = *file.timeout_s.get_ref();
    if !(timeout_s > 0.0 && timeout_s <= MAX_TIMEOUT_S) {
        return Err(ctx.invalid(
            file.timeout_s.span(),
            format!("timeout_s {timeout_s} is out of range: use more than 0 and at most {MAX_TIMEOUT_S} (a week)"),
        ));
    }
    let interval_ms = *file.interval_ms.get_ref();
    if !(1.0..=10_000.0).contains(&interval_ms) {
        return Err(ctx.invalid(
            file.interval_ms.span(),
            format!("interval_ms {interval_ms} is out of range: use 1 to 10000"),
        ));
    }
    Ok((interval_ms, timeout_s))
}

/// `strategies`: at least one, each known and fit for the scenario's worker.
fn strategies(file: &ScenarioFile, ctx: &Ctx) -> Result<Vec<String>, ScenarioError> {
    for def in &file.strategy {
        strategy::custom::define(def.get_ref()).map_err(|e| ctx.invalid(def.span(), e))?;
    }
    let mut strategies = Vec::new();
    for s in file.strategies.get_ref() {
        let found =
            strategy::lookup(s.get_ref()).map_err(|e| ctx.invalid(s.span(), e.to_string()))?;
        let fits = match &file.command {
            Some(_) => found.for_programs().map(|_| ()),
            None if found.for_candle() => Ok(()),
            None => Err(format!(
                "strategy {:?} is for programs (a scenario with command = [...], or memrel exec): \
                 the candle worker cannot carry it out",
                found.name
            )),
        };
        fits.map_err(|e| ctx.invalid(s.span(), e))?;
        strategies.push(s.get_ref().clone());
    }
    if strategies.is_empty() {
        return Err(ctx.invalid(
            file.strategies.span(),
            format!(
                "strategies is empty: name at least one, e.g. [\"drop\"] (see `{}`)",
                crate::hint::Hint::ListLong
            ),
        ));
    }
    Ok(strategies)
}

/// `[models.*]`: each with exactly one source; fake and real ones not mixed.
fn models(file: &ScenarioFile, ctx: &Ctx) -> Result<BTreeMap<String, ModelSource>, ScenarioError> {
    let mut models = BTreeMap::new();
    for (id, spec) in file.models.get_ref() {
        models.insert(id.clone(), model(id, spec, ctx)?);
    }
    let fakes = fakes(&models);
    if fakes > 0 && fakes < models.len() {
        return Err(ctx.invalid(
            file.models.span(),
            "fake models (fake_*_mib) and real ones cannot be mixed: the fake worker runs a \
             scenario whose models are all fake"
                .into(),
        ));
    }
    Ok(models)
}

/// One `[models.<id>]` table.
fn model(id: &str, spec: &Spanned<ModelFile>, ctx: &Ctx) -> Result<ModelSource, ScenarioError> {
    let m = spec.get_ref();
    Ok(match (&m.preset, &m.path, &m.hub) {
        (Some(p), None, None) => {
            crate::model::preset::lookup(p).map_err(|e| ctx.invalid(spec.span(), e.to_string()))?;
            ModelSource::Preset(p.clone())
        }
        (None, Some(p), None) => ModelSource::Path(p.clone()),
        (None, None, None) if is_fake(m) => ModelSource::Fake(
            fake_model(m).map_err(|e| ctx.invalid(spec.span(), format!("model {id:?}: {e}")))?,
        ),
        (None, None, Some(h)) => {
            let revision = m.revision.clone().unwrap_or_else(|| "main".to_string());
            check_hub_names(h, &revision)
                .map_err(|e| ctx.invalid(spec.span(), format!("model {id:?}: {e}")))?;
            ModelSource::Hub {
                repo: h.clone(),
                revision,
            }
        }
        _ => {
            return Err(ctx.invalid(
                spec.span(),
                format!(
                "model {id:?} needs exactly one of preset = \"…\", path = \"…\", hub = \"…\" \
                 or fake_anon_mib / fake_file_mib / fake_leak_mib / fake_vram_mib (the fake worker)"
            ),
            ))
        }
    })
}

fn fakes(models: &BTreeMap<String, ModelSource>) -> usize {
    models
        .values()
        .filter(|m| matches!(m, ModelSource::Fake(_)))
        .count()
}

/// The worker kind and its workload: `command = [...]` (a program) or
/// `[workload]` (memrel's worker, fake or candle), exactly one of them.
fn worker(
    file: &ScenarioFile,
    models: &BTreeMap<String, ModelSource>,
    ctx: &Ctx,
) -> Result<(WorkerKind, Workload), ScenarioError> {
    let fakes = fakes(models);
    match (&file.command, &file.workload) {
        (Some(command), None) => {
            if command.get_ref().is_empty() || command.get_ref()[0].trim().is_empty() {
                return Err(ctx.invalid(
                    command.span(),
                    "command is empty: name the program and its arguments, e.g. \
                     [\"python3\", \"serve.py\"]"
                        .into(),
                ));
            }
            if fakes > 0 {
                return Err(ctx.invalid(
                    file.models.span(),
                    "fake models are for memrel's fake worker, not for a command: use preset, \
                     path or hub models (the program gets their directories in MEMREL_MODELS)"
                        .into(),
                ));
            }
            Ok((
                WorkerKind::Command(command.get_ref().clone()),
                Workload::of_program(),
            ))
        }
        (Some(command), Some(_)) => Err(ctx.invalid(
            command.span(),
            "a scenario has either [workload] (memrel's worker) or command = [...] (a \
             program that marks its own phases), not both: remove one"
                .into(),
        )),
        (None, None) => Err(ctx.invalid(
            0..0,
            "missing [workload] (steps for memrel's worker) or command = [...] (a program \
             to measure): add one"
                .into(),
        )),
        (None, Some(workload)) => {
            if models.is_empty() {
                return Err(ctx.invalid(
                    file.models.span(),
                    "no models: add e.g. [models.bert] preset = \"bert-base\"".into(),
                ));
            }
            let worker = if fakes > 0 {
                WorkerKind::Fake
            } else {
                WorkerKind::Candle
            };
            let invalid = |span, message| ctx.invalid(span, message);
            Ok((worker, parse_workload(workload, models, &invalid)?))
        }
    }
}

/// Every `[thresholds]` key is known and its amount in range.
fn check_amounts(t: &ThresholdsFile, ctx: &Ctx) -> Result<(), ScenarioError> {
    let budget_keys: Vec<String> = catalogue::budget_keys()
        .map(|(_, _, k)| k)
        .chain(Mechanism::budget_keys().map(|(_, _, k)| k))
        .collect();
    // In the order they appear in the file, so the first mistake is reported first.
    let mut entries: Vec<(&Spanned<String>, &Spanned<f64>)> = t.iter().collect();
    entries.sort_by_key(|(k, _)| k.span().start);
    for (key, value) in entries {
        let key_name = key.get_ref().as_str();
        let known = THRESHOLD_KEYS.iter().any(|(k, _)| *k == key_name)
            || budget_keys.iter().any(|k| k == key_name);
        if !known {
            let expected: Vec<String> = THRESHOLD_KEYS
                .iter()
                .map(|(k, _)| *k)
                .chain(budget_keys.iter().map(String::as_str))
                .map(|k| format!("`{k}`"))
                .collect();
            return Err(ctx.invalid(
                key.span(),
                format!(
                    "unknown field `{key_name}`, expected one of {}",
                    expected.join(", ")
                ),
            ));
        }
        let v = *value.get_ref();
        if !(0.0..=MAX_MIB).contains(&v) {
            return Err(ctx.invalid(
                value.span(),
                format!("[thresholds] {key_name} = {v} is out of range: use 0 to {MAX_MIB}"),
            ));
        }
    }
    Ok(())
}

/// `[thresholds]`: known keys only, amounts in range, VRAM budgets only on
/// a CUDA scenario. Budget keys come from the metric catalogue.
fn thresholds(
    t: &ThresholdsFile,
    device: DeviceSpec,
    ctx: &Ctx,
) -> Result<Thresholds, ScenarioError> {
    check_amounts(t, ctx)?;
    let get = |key: &str| t.iter().find(|(k, _)| k.get_ref() == key).map(|(_, v)| v);
    let amount = |key: &str| {
        get(key).map(|v| *v.get_ref()).unwrap_or_else(|| {
            THRESHOLD_KEYS
                .iter()
                .find(|(k, _)| *k == key)
                .map_or(0.0, |(_, default)| *default)
        })
    };
    let mut out = Thresholds {
        retention_threshold_bytes: Unit::bytes_of_mib(amount("retention_mib")),
        noise_relative: amount("noise_percent") / 100.0,
        noise_absolute_bytes: Unit::bytes_of_mib(amount("noise_mib")),
        budgets: Default::default(),
    };
    let on_cpu = |key: &str, value: &Spanned<f64>| {
        ctx.invalid(
            value.span(),
            format!(
                "[thresholds] {key} is a VRAM budget, but this scenario runs on the cpu: \
                 remove it, or set device = \"cuda\""
            ),
        )
    };
    for (metric, resource, key) in catalogue::budget_keys() {
        let Some(value) = get(&key) else { continue };
        if resource.is_device() && device == DeviceSpec::Cpu {
            return Err(on_cpu(&key, value));
        }
        out.budgets_mut(resource).set(metric, *value.get_ref());
    }
    for (mechanism, resource, key) in Mechanism::budget_keys() {
        let Some(value) = get(&key) else { continue };
        if resource.is_device() && device == DeviceSpec::Cpu {
            return Err(on_cpu(&key, value));
        }
        out.budgets_mut(resource)
            .max_retained_by_mechanism
            .insert(mechanism, Unit::bytes_of_mib(*value.get_ref()));
    }
    Ok(out)
}

/// A hub repository id (`owner/name` or `name`) and revision become paths in
/// the hub cache (`models--owner--name/refs/<revision>`): each part must be a
/// plain name, so neither can point outside the cache.
pub(super) fn check_hub_names(repo: &str, revision: &str) -> Result<(), String> {
    let parts: Vec<&str> = repo.split('/').collect();
    if parts.len() > 2 {
        return Err(format!(
            "hub = {repo:?} is not a repository id: use \"owner/name\""
        ));
    }
    for part in parts {
        crate::fsutil::check_name("hub repository", part).map_err(|e| e.to_string())?;
    }
    for part in revision.split('/') {
        crate::fsutil::check_name("revision", part).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// 1-based line and column of a byte offset (clamped to the text and to the
/// character boundary at or before it, so no span can make it panic).
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line, column)
}

fn lowercase_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().collect::<String>() + chars.as_str(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thresholds_table_is_read_from_any_text_and_checked_as_a_scenario_s() {
        let text = "ready = \"GET /x\"\n[thresholds]\nmax_retained_mib = 64\nretention_mib = 8\n";
        let pairs = thresholds_table("c.toml", text, DeviceSpec::Cpu).unwrap();
        assert_eq!(
            pairs,
            [
                ("max_retained_mib".to_string(), 64.0),
                ("retention_mib".to_string(), 8.0)
            ]
        );
        assert!(thresholds_table("c.toml", "x = 1\n", DeviceSpec::Cpu)
            .unwrap()
            .is_empty());
        let vram = "[thresholds]\nmax_retained_vram_mib = 1\n";
        let err = thresholds_table("c.toml", vram, DeviceSpec::Cpu)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("c.toml:2:")
                && err.contains("[thresholds] max_retained_vram_mib is a VRAM budget"),
            "{err}"
        );
        assert!(thresholds_table("c.toml", vram, DeviceSpec::Cuda(0)).is_ok());
        let err = thresholds_table("c.toml", "[thresholds]\nmax_x = 1\n", DeviceSpec::Cpu)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("c.toml:2:1: unknown field `max_x`"),
            "{err}"
        );
    }

    const MINIMAL: &str = r#"
description = "t"
strategies = ["drop"]
[models.m]
preset = "bert-tiny"
[workload]
steps = ["load m", "forward m", "unload m", "release", "settle"]
"#;

    #[test]
    fn every_builtin_parses() {
        for name in builtin_names() {
            let s = load(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(s.name, *name);
        }
    }

    #[test]
    fn minimal_scenario_gets_defaults() {
        let s = parse_str("t", "t.toml", MINIMAL).unwrap();
        assert_eq!(s.device, DeviceSpec::Cpu);
        assert_eq!(s.cycles, 5);
        assert_eq!(s.workload.steps.len(), 5);
        assert_eq!(s.thresholds.retention_threshold_bytes, 16 << 20);
    }

    #[test]
    fn model_files_are_a_programs_and_name_a_path() {
        let program =
            "description = \"p\"\nstrategies = [\"drop\"]\ncommand = [\"python3\", \"p.py\"]\n";
        let s = parse_str("p", "p.toml", &format!("{program}model_files = [\"w\"]\n")).unwrap();
        assert_eq!(s.model_files, ["w"]);
        assert!(parse_str("p", "p.toml", program)
            .unwrap()
            .model_files
            .is_empty());
        let err = parse_str("p", "p.toml", &format!("{program}model_files = [\" \"]\n"))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("p.toml:4:") && err.contains("empty path"),
            "{err}"
        );
        let text = MINIMAL.replace("strategies", "model_files = [\"w\"]\nstrategies");
        let err = parse_str("t", "t.toml", &text).unwrap_err().to_string();
        assert!(
            err.starts_with("t.toml:3:") && err.contains("model_files is for a program"),
            "{err}"
        );
    }

    #[test]
    fn unknown_key_names_line_column_and_key() {
        let text = MINIMAL.replace("description = \"t\"", "description = \"t\"\nbogus_knob = 3");
        let err = parse_str("t", "my.toml", &text).unwrap_err().to_string();
        assert!(
            err.starts_with("my.toml:3:1: unknown field `bogus_knob`"),
            "{err}"
        );
    }

    #[test]
    fn an_unknown_threshold_names_its_line_and_the_keys_there_are() {
        let text = format!("{MINIMAL}[thresholds]\nretention_mib = 8\nmax_retaned_mib = 64\n");
        let err = parse_str("t", "my.toml", &text).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "my.toml:10:1: unknown field `max_retaned_mib`, expected one of `retention_mib`, "
            ),
            "{err}"
        );
        assert!(
            err.contains("`max_retained_vram_slope_mib_per_cycle`"),
            "{err}"
        );
    }

    #[test]
    fn a_late_free_and_a_settle_budget_parse_in_their_units() {
        let fake = |late: &str| {
            MINIMAL.replace(
                "preset = \"bert-tiny\"",
                &format!("fake_anon_mib = 8\n{late}"),
            )
        };
        let text = format!(
            "{}[thresholds]\nmax_settle_ms = 250\nmax_late_mib = 4\n",
            fake("fake_late_free_ms = 300")
        );
        let s = parse_str("t", "t.toml", &text).unwrap();
        let Some(ModelSource::Fake(m)) = s.models.get("m") else {
            panic!("{:?}", s.models)
        };
        assert_eq!((m.anon_bytes, m.late_free_ms), (8 << 20, 300));
        assert_eq!(
            s.thresholds
                .budgets(crate::metrics::Resource::Host)
                .max_settle_s,
            Some(0.25)
        );
        assert_eq!(
            s.thresholds
                .budgets(crate::metrics::Resource::Host)
                .max_late_bytes,
            Some(4 << 20)
        );
        let err = parse_str("t", "t.toml", &fake("fake_late_free_ms = 90000"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("fake_late_free_ms = 90000 is out of range: use 0 to 60000"),
            "{err}"
        );
    }

    #[test]
    fn step_naming_an_unknown_model_points_at_the_step() {
        let text = MINIMAL.replace("\"forward m\"", "\"forward x\"");
        let err = parse_str("t", "my.toml", &text).unwrap_err().to_string();
        assert!(err.starts_with("my.toml:7:"), "{err}");
        assert!(err.contains("model \"x\""), "{err}");
    }

    #[test]
    fn misspelt_strategy_in_a_file_suggests_the_right_one() {
        let text = MINIMAL.replace("[\"drop\"]", "[\"malloc-trm\"]");
        let err = parse_str("t", "my.toml", &text).unwrap_err().to_string();
        assert!(err.contains("did you mean \"malloc-trim\""), "{err}");
    }

    #[test]
    fn unloading_twice_is_refused() {
        let text = MINIMAL.replace("\"release\"", "\"unload m\"");
        assert!(parse_str("t", "t.toml", &text).is_err());
    }

    #[test]
    fn a_vram_budget_on_a_cpu_scenario_is_an_error_naming_the_key() {
        for key in [
            "max_retained_vram_mib",
            "max_peak_vram_mib",
            "max_retained_vram_slope_mib_per_cycle",
        ] {
            let text = format!("{MINIMAL}[thresholds]\nmax_retained_mib = 64\n{key} = 300\n");
            let err = parse_str("t", "my.toml", &text).unwrap_err().to_string();
            assert!(err.starts_with("my.toml:10:"), "{key}: {err}");
            assert!(
                err.contains(&format!("[thresholds] {key} is a VRAM budget")),
                "{err}"
            );
            assert!(err.contains("device = \"cuda\""), "{err}");
        }
    }

    #[test]
    fn vram_budgets_on_a_cuda_scenario_are_the_device_budgets() {
        use crate::metrics::Resource;
        let text = format!(
            "device = \"cuda\"\n{MINIMAL}[thresholds]\nmax_retained_mib = 64\n\
             max_retained_vram_mib = 300\nmax_peak_vram_mib = 1200.5\n\
             max_retained_vram_slope_mib_per_cycle = 8\n"
        );
        let s = parse_str("t", "t.toml", &text).unwrap();
        let t = &s.thresholds;
        assert_eq!(
            t.budgets(Resource::Device(0)).max_retained_bytes,
            Some(300 << 20)
        );
        assert_eq!(
            t.budgets(Resource::Device(0)).max_peak_bytes,
            Some((1200.5 * 1024.0 * 1024.0) as u64)
        );
        assert_eq!(
            t.budgets(Resource::Device(0))
                .max_retained_slope_bytes_per_cycle,
            Some(8 << 20)
        );
        assert_eq!(t.budgets(Resource::Host).max_retained_bytes, Some(64 << 20));
        assert_eq!(t.budgets(Resource::Host).max_peak_bytes, None);
        assert_eq!(
            t.budgets(Resource::Device(3)),
            t.budgets(Resource::Device(0))
        );
    }

    #[test]
    fn budgets_per_mechanism_parse_per_resource_and_vram_ones_need_cuda() {
        use crate::metrics::why::Mechanism;
        use crate::metrics::Resource;
        let text = format!(
            "device = \"cuda\"\n{MINIMAL}[thresholds]\nmax_retained_free_chunks_mib = 64\n\
             max_retained_vram_torch_cache_mib = 0\nmax_retained_vram_context_mib = 600\n"
        );
        let t = parse_str("t", "t.toml", &text).unwrap().thresholds;
        let of = |r: Resource| t.budgets(r).max_retained_by_mechanism.clone();
        assert_eq!(
            of(Resource::Host).into_iter().collect::<Vec<_>>(),
            [(Mechanism::FreeChunks, 64 << 20)]
        );
        assert_eq!(
            of(Resource::Device(1)).into_iter().collect::<Vec<_>>(),
            [(Mechanism::Context, 600 << 20), (Mechanism::TorchCache, 0)]
        );
        let text = format!("{MINIMAL}[thresholds]\nmax_retained_vram_torch_cache_mib = 0\n");
        let err = parse_str("t", "my.toml", &text).unwrap_err().to_string();
        assert!(
            err.contains("[thresholds] max_retained_vram_torch_cache_mib is a VRAM budget"),
            "{err}"
        );
        let text = format!("{MINIMAL}[thresholds]\nmax_retained_torch_cache_mib = 0\n");
        let err = parse_str("t", "my.toml", &text).unwrap_err().to_string();
        assert!(
            err.contains("unknown field `max_retained_torch_cache_mib`")
                && err.contains("`max_retained_vram_torch_cache_mib`"),
            "{err}"
        );
    }

    #[test]
    fn a_scenario_name_that_is_not_one_directory_name_is_refused() {
        for name in ["..", ".", "a/b", "../../x", "a\0b", ""] {
            let err = parse_str(name, "dir/x.toml", MINIMAL)
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with("dir/x.toml: scenario name "),
                "{name:?}: {err}"
            );
        }
    }

    #[test]
    fn a_scenario_file_named_dot_dot_cannot_name_the_parent_directory() {
        // `...toml` has the stem `..`: results would go to `<out>/../<stamp>`.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("...toml");
        std::fs::write(&path, MINIMAL).unwrap();
        let err = load(path.to_str().unwrap()).unwrap_err().to_string();
        assert!(err.contains("scenario name \"..\""), "{err}");
    }

    #[test]
    fn hub_ids_and_revisions_that_leave_the_cache_are_refused() {
        for (hub, revision) in [
            ("../../etc", "main"),
            ("a/b/c", "main"),
            ("owner/..", "main"),
            ("owner/name", "../../../x"),
            ("owner/name", "/abs"),
            ("owner/name", "a\0b"),
        ] {
            let text = MINIMAL.replace(
                "preset = \"bert-tiny\"",
                &format!(
                    // JSON string escapes are valid TOML (`\u0000` for NUL).
                    "hub = {}\nrevision = {}",
                    serde_json::Value::from(hub),
                    serde_json::Value::from(revision)
                ),
            );
            let err = parse_str("t", "my.toml", &text).unwrap_err().to_string();
            assert!(
                err.starts_with("my.toml:4:1: model \"m\""),
                "{hub} {revision}: {err}"
            );
        }
        let text = MINIMAL.replace(
            "preset = \"bert-tiny\"",
            "hub = \"owner/name\"\nrevision = \"refs/pr/1\"",
        );
        parse_str("t", "my.toml", &text).unwrap();
    }

    #[test]
    fn absurd_numbers_are_refused_with_their_position() {
        for (from, to, line) in [
            (
                "strategies = [\"drop\"]",
                "strategies = [\"drop\"]\ntimeout_s = inf",
                4,
            ),
            (
                "strategies = [\"drop\"]",
                "strategies = [\"drop\"]\ntimeout_s = -1.0",
                4,
            ),
            (
                "strategies = [\"drop\"]",
                "strategies = [\"drop\"]\ntimeout_s = nan",
                4,
            ),
            (
                "\"settle\"]",
                "\"settle\"]\nbatch_size = 1000000\nseq_len = 1000000",
                9,
            ),
            ("\"settle\"]", "\"settle\"]\nseq_len = 0", 8),
            (
                "\"settle\"]",
                "\"settle\"]\n[thresholds]\nmax_retained_mib = -5",
                9,
            ),
            (
                "\"settle\"]",
                "\"settle\"]\n[thresholds]\nretention_mib = nan",
                9,
            ),
            (
                "\"settle\"]",
                "\"settle\"]\n[thresholds]\nmax_peak_mib = 1e300",
                9,
            ),
        ] {
            let text = MINIMAL.replace(from, to);
            let err = parse_str("t", "my.toml", &text).unwrap_err().to_string();
            assert!(err.starts_with(&format!("my.toml:{line}:")), "{to}: {err}");
            assert!(
                err.contains("out of range")
                    || err.contains("at least 1")
                    || err.contains("tokens"),
                "{err}"
            );
        }
    }

    #[test]
    fn line_column_never_panics_inside_a_character() {
        assert_eq!(line_column("é\nx", 1), (1, 1));
        assert_eq!(line_column("ab", 99), (1, 3));
    }
}
