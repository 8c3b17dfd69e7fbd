//! The operator examples (examples/kubernetes, examples/grafana,
//! examples/prometheus; docs/production.md) name only metrics memrel really
//! serves: every `memrel_*` word in them, in queries and in prose, is a
//! series `memrel report DIR --metrics-once` renders for a real record (the
//! one `openmetrics::` checks, made by `memrel exec`), so renaming a metric
//! fails here, without Python. scripts/validate-examples checks the rest
//! (schemas, PromQL, the dashboard's structure, labels) with tools from PyPI.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::common::*;

/// The folders of the operator examples.
const FOLDERS: [&str; 3] = ["kubernetes", "grafana", "prometheus"];

/// Every file under `dir`, recursively, in name order.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    entries
        .into_iter()
        .flat_map(|p| if p.is_dir() { files_under(&p) } else { vec![p] })
        .collect()
}

/// The series names of an exposition's sample lines (`_total` included).
fn rendered_names(exposition: &str) -> BTreeSet<String> {
    exposition
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap_or_default().to_string())
        .collect()
}

/// The `memrel_*` words of `text`: not inside a longer name (a recording
/// rule's `memrel:…` is not one), not ending in `_`.
fn memrel_names(text: &str) -> Vec<String> {
    let word =
        regex::Regex::new(r"(?:^|[^A-Za-z0-9_:])(memrel_[a-z0-9_]*[a-z0-9])").expect("regex");
    word.captures_iter(text).map(|c| c[1].to_string()).collect()
}

#[test]
fn examples_name_only_metrics_memrel_renders() {
    let (_tmp, dir) = super::openmetrics::exec_record();
    let output = memrel()
        .arg("report")
        .arg(&dir)
        .arg("--metrics-once")
        .output()
        .expect("memrel starts");
    assert!(output.status.success(), "{}", streams(&output));
    let rendered = rendered_names(&text(&output.stdout));
    assert!(rendered.contains("memrel_cycles_total"), "{rendered:?}");
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut used = BTreeSet::new();
    let mut unknown = Vec::new();
    for folder in FOLDERS {
        for path in files_under(&examples.join(folder)) {
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            for name in memrel_names(&text) {
                if !rendered.contains(&name) {
                    unknown.push(format!("{}: {name}", path.display()));
                }
                used.insert(name);
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "names memrel does not render (it renders {rendered:?}):\n{}",
        unknown.join("\n")
    );
    // The dashboard and the alerts name all 13 families between them; a scan
    // that found nothing would pass above.
    assert!(used.len() >= 12, "only {used:?} found in examples/");
}

#[test]
fn the_name_scan_finds_names_and_skips_longer_words() {
    let text = "rate(memrel_samples_total[5m]) memrel:cycle_retained_bytes_per_cycle:slope6h \
                \"memrel_asleep{model=~\\\"$model\\\"}\" xmemrel_no memrel_ memrel-data";
    assert_eq!(
        memrel_names(text),
        ["memrel_samples_total", "memrel_asleep"]
    );
    let exposition = "# TYPE memrel_cycles counter\nmemrel_cycles_total 2\nmemrel_asleep{model=\"m\"} 0\n# EOF\n";
    assert_eq!(
        rendered_names(exposition).into_iter().collect::<Vec<_>>(),
        ["memrel_asleep", "memrel_cycles_total"]
    );
}

/// The sidecar's `memrel` arguments in the Kubernetes example are a command
/// line this memrel takes (a flag renamed or removed fails here).
#[test]
fn the_sidecars_memrel_command_line_parses() {
    let manifest =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/kubernetes/vllm-memrel.yaml");
    let text = std::fs::read_to_string(&manifest).expect("the manifest");
    let from = text.find("- name: memrel").expect("the memrel container");
    let args_at = from + text[from..].find("args:").expect("its args");
    let mut argv = vec!["memrel".to_string()];
    for line in text[args_at..].lines().skip(1) {
        let Some(arg) = line.trim().strip_prefix("- ") else {
            break;
        };
        argv.push(arg.trim_matches('"').to_string());
    }
    assert_eq!(argv.get(1).map(String::as_str), Some("watch"), "{argv:?}");
    use clap::Parser;
    if let Err(e) = memrel::cli::Cli::try_parse_from(&argv) {
        panic!("{argv:?}: {e}");
    }
}
