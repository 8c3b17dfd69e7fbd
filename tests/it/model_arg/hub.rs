//! `memrel run --model org/name` against a hub the test starts (`fake_hub`):
//! a fresh download, a cached one (no request at all), a resumed one, a
//! repository that is not there, a gated one and no hub at all. The model
//! served is one `memrel model gen` writes.

use std::path::{Path, PathBuf};
use std::process::Output;

use super::fake_hub::{etag, FakeHub, HubRepo, COMMIT};
use crate::common::*;

/// config.json and model.safetensors of the bert-tiny preset.
fn tiny_files() -> Vec<(String, Vec<u8>)> {
    let dir = tempfile::tempdir().unwrap();
    run_ok(memrel().args(["model", "gen", "bert-tiny"]).arg(dir.path()));
    ["config.json", "model.safetensors"]
        .iter()
        .map(|f| (f.to_string(), std::fs::read(dir.path().join(f)).unwrap()))
        .collect()
}

fn hub_with(id: &str, token: Option<&str>) -> (FakeHub, Vec<(String, Vec<u8>)>) {
    let files = tiny_files();
    let hub = FakeHub::start(vec![HubRepo {
        id: id.into(),
        files: files.clone(),
        token: token.map(str::to_string),
    }]);
    (hub, files)
}

/// A fresh HF_HOME and results folder, and the hub endpoint memrel asks.
struct Home {
    endpoint: String,
    hf_home: tempfile::TempDir,
    out: tempfile::TempDir,
}

impl Home {
    fn new(endpoint: &str) -> Home {
        Home {
            endpoint: endpoint.to_string(),
            hf_home: tempfile::tempdir().unwrap(),
            out: tempfile::tempdir().unwrap(),
        }
    }

    /// [`run_model`] on `model` through this hub.
    fn run(&self, model: &str, token: Option<&str>) -> Output {
        run_model(
            &self.endpoint,
            self.hf_home.path(),
            self.out.path(),
            model,
            token,
        )
    }
}

/// `memrel run --model MODEL --strategy drop --cycles 1 --out OUT` with the
/// hub at `endpoint`, its cache in `hf_home`, online, and no token but `token`.
fn run_model(
    endpoint: &str,
    hf_home: &Path,
    out: &Path,
    model: &str,
    token: Option<&str>,
) -> Output {
    let mut command = memrel();
    command
        .env_remove("HF_HUB_OFFLINE")
        .env_remove("HF_TOKEN")
        .env("HF_ENDPOINT", endpoint)
        .env("HF_HOME", hf_home);
    for proxy in [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ] {
        command.env_remove(proxy);
    }
    if let Some(token) = token {
        command.env("HF_TOKEN", token);
    }
    command
        .args([
            "run",
            "--model",
            model,
            "--strategy",
            "drop",
            "--cycles",
            "1",
            "--out",
        ])
        .arg(out)
        .output()
        .expect("memrel starts")
}

fn snapshot(hf_home: &Path, folder: &str) -> PathBuf {
    hf_home
        .join("hub")
        .join(folder)
        .join("snapshots")
        .join(COMMIT)
}

/// (path, range) of each request, for comparing with what hf-hub must ask.
fn asked(hub: &FakeHub) -> Vec<(String, Option<String>)> {
    hub.requests()
        .into_iter()
        .map(|r| (r.path, r.range))
        .collect()
}

fn resolve(repo: &str, file: &str, range: &str) -> (String, Option<String>) {
    (
        format!("/{repo}/resolve/main/{file}"),
        Some(range.to_string()),
    )
}

#[test]
fn a_fresh_download_fetches_each_file_once_shows_progress_and_is_recorded() {
    let (hub, files) = hub_with("memrel-test/tiny", None);
    let home = Home::new(&hub.endpoint);
    let output = home.run("memrel-test/tiny", None);
    assert!(output.status.success(), "{}", streams(&output));
    let repo = "memrel-test/tiny";
    assert_eq!(
        asked(&hub),
        vec![
            (format!("/api/models/{repo}/revision/main"), None),
            resolve(repo, "config.json", "bytes=0-0"),
            resolve(repo, "config.json", "bytes=0-"),
            resolve(repo, "model.safetensors", "bytes=0-0"),
            resolve(repo, "model.safetensors", "bytes=0-"),
        ]
    );
    let err = stderr(&output);
    assert!(
        err.contains("memrel: downloading memrel-test/tiny: model.safetensors ("),
        "{err}"
    );
    assert!(
        err.contains("memrel: downloaded memrel-test/tiny: model.safetensors ("),
        "{err}"
    );
    let snapshot = snapshot(home.hf_home.path(), "models--memrel-test--tiny");
    for (name, bytes) in &files {
        assert_eq!(
            &std::fs::read(snapshot.join(name)).unwrap(),
            bytes,
            "{name}"
        );
    }
    let runs = runs_json(&only_results_dir(home.out.path(), "memrel-test--tiny"));
    let model = &runs["header"]["models"][0];
    assert_eq!(model["source"], "hub:memrel-test/tiny@main");
    assert_eq!(model["dir"], snapshot.display().to_string());
    assert_eq!(model["architecture"], "bert");
    assert_eq!(runs["runs"][0]["status"], "completed", "{runs}");
    let toml = runs["header"]["scenario_toml"].as_str().unwrap();
    assert!(toml.contains("hub = \"memrel-test/tiny\""), "{toml}");
}

#[test]
fn a_cached_model_asks_the_hub_nothing() {
    let (hub, _) = hub_with("memrel-test/tiny", None);
    let home = Home::new(&hub.endpoint);
    let first = home.run("memrel-test/tiny", None);
    assert!(first.status.success(), "{}", streams(&first));
    let after_first = hub.requests().len();
    assert_eq!(after_first, 5, "{:?}", hub.requests());
    let second = home.run("memrel-test/tiny", None);
    assert!(second.status.success(), "{}", streams(&second));
    assert_eq!(hub.requests().len(), after_first, "{:?}", hub.requests());
    assert!(
        !stderr(&second).contains("downloading"),
        "{}",
        stderr(&second)
    );
    assert_eq!(results_dirs(home.out.path(), "memrel-test--tiny").len(), 2);
}

#[test]
fn a_partial_download_in_the_cache_resumes_where_it_stopped() {
    let (hub, files) = hub_with("memrel-test/tiny", None);
    let home = Home::new(&hub.endpoint);
    let weights = &files
        .iter()
        .find(|(n, _)| n == "model.safetensors")
        .unwrap()
        .1;
    let half = weights.len() / 2;
    // hf-hub keeps a download in progress as blobs/<etag>.part.
    let blobs = home
        .hf_home
        .path()
        .join("hub/models--memrel-test--tiny/blobs");
    std::fs::create_dir_all(&blobs).unwrap();
    std::fs::write(
        blobs.join(format!("{}.part", etag(weights))),
        &weights[..half],
    )
    .unwrap();
    let output = home.run("memrel-test/tiny", None);
    assert!(output.status.success(), "{}", streams(&output));
    let rest = hub
        .requests()
        .into_iter()
        .find(|r| r.path.ends_with("/model.safetensors") && r.range.as_deref() != Some("bytes=0-0"))
        .expect("a request for the weights");
    assert_eq!(rest.range, Some(format!("bytes={half}-")));
    assert_eq!((rest.status, rest.body_bytes), (206, weights.len() - half));
    let snapshot = snapshot(home.hf_home.path(), "models--memrel-test--tiny");
    assert_eq!(
        &std::fs::read(snapshot.join("model.safetensors")).unwrap(),
        weights
    );
    let err = stderr(&output);
    assert!(
        err.contains("memrel: resuming memrel-test/tiny: model.safetensors at"),
        "{err}"
    );
}

#[test]
fn a_repository_the_hub_does_not_have_is_a_clear_error() {
    let (hub, _) = hub_with("memrel-test/tiny", None);
    let home = Home::new(&hub.endpoint);
    let output = home.run("memrel-test/missing", None);
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    let err = stderr(&output);
    let want = format!(
        "hub repository memrel-test/missing was not found at {} (404): check the id (org/name",
        hub.endpoint
    );
    assert!(err.contains(&want), "{err}");
    assert!(err.contains("memrel: error: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(hub.requests().len(), 1, "{:?}", hub.requests());
    assert!(results_dirs(home.out.path(), "memrel-test--missing").is_empty());
}

#[test]
fn a_gated_repository_says_so_and_opens_to_its_token() {
    let (hub, _) = hub_with("memrel-test/gated", Some("hf_granted"));
    let home = Home::new(&hub.endpoint);
    for (token, status) in [(None, 401), (Some("hf_other"), 403)] {
        let output = home.run("memrel-test/gated", token);
        assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
        let err = stderr(&output);
        let want = format!("hub repository memrel-test/gated is gated ({status} for config.json");
        assert!(err.contains(&want), "{err}");
        assert!(err.contains("accept its terms at"), "{err}");
        assert!(err.contains("set HF_TOKEN"), "{err}");
    }
    assert!(results_dirs(home.out.path(), "memrel-test--gated").is_empty());
    let output = home.run("memrel-test/gated", Some("hf_granted"));
    assert!(output.status.success(), "{}", streams(&output));
    let last = hub.requests().pop().unwrap();
    assert_eq!(last.authorization.as_deref(), Some("Bearer hf_granted"));
    assert_eq!(results_dirs(home.out.path(), "memrel-test--gated").len(), 1);
}

#[test]
fn no_hub_answering_says_how_to_work_offline() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let home = Home::new(&endpoint);
    let output = home.run("memrel-test/tiny", None);
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    let err = stderr(&output);
    let want =
        format!("cannot reach the hub at {endpoint} for hub repository memrel-test/tiny@main");
    assert!(err.contains(&want), "{err}");
    assert!(
        err.contains("set HF_HUB_OFFLINE=1 to use the cache"),
        "{err}"
    );
}
