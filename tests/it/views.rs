//! Issue 49, item 2: the allocators' and frameworks' own view from inside a
//! program, sent by the memrel Python module at every edge.
//!
//! - Under a preloaded jemalloc or tcmalloc the module reads that
//!   allocator's own statistics (bytes in use vs held) into the record's
//!   `heap_*` columns, as memrel's worker does (`src/worker/allocator.rs`).
//! - A program's `views` (`cuda:0.torch_reserved=…`) reach events.csv's
//!   `readings` cell and stay there through a read-back and `memrel report`;
//!   a key that names no view is dropped with one warning.
//! - With CPU torch (or JAX on the CPU) nothing of theirs is sent, and the
//!   module initialises neither CUDA nor JAX's backends (`#[ignore]`d: they
//!   need `MEMREL_TEST_PYTHON`, as the other torch and JAX tests).

use std::collections::HashMap;
use std::path::Path;

use memrel::record::{Part, Record, Resource, ViewKind};

use crate::common::*;
use crate::mappings::assert_near;

const MIB: f64 = (1u64 << 20) as f64;

/// Holds 128 MiB in 1 MiB buffers (`bytearray`'s go to the `malloc` the
/// process calls: a preloaded allocator's; 1 MiB less its one byte of
/// terminator, so each is one size class) from the load on, and frees every
/// other one during the unload: 128 MiB in use, then 64 MiB.
const HOLDS_128_FREES_64: &str = r#"
import memrel
with memrel.phase("load", model="m"):
    chunks = [bytearray(b"\x01") * ((1 << 20) - 1) for _ in range(128)]
with memrel.phase("unload", model="m"):
    del chunks[0::2]
"#;

/// `memrel exec --out OUT ARGS… -- PYTHON -c PROGRAM DIR`: the output and
/// the results directory.
fn exec(
    out: &Path,
    args: &[&str],
    python: &str,
    program: &str,
    arg: &Path,
) -> (std::process::Output, std::path::PathBuf) {
    let output = memrel()
        .arg("exec")
        .arg("--out")
        .arg(out)
        .args(args)
        .args(["--", python, "-c", program])
        .arg(arg)
        .output()
        .expect("memrel starts");
    assert!(output.status.success(), "{}", streams(&output));
    (output, only_results_dir(out, "exec"))
}

/// events.csv's rows by "phase edge".
fn edges(dir: &Path) -> HashMap<String, HashMap<String, String>> {
    csv_rows(&dir.join("events.csv"))
        .into_iter()
        .map(|row| (format!("{} {}", row["phase"], row["edge"]), row))
        .collect()
}

/// MiB of `column` at `edge`; `None` where the cell is empty.
fn mib(edges: &HashMap<String, HashMap<String, String>>, edge: &str, column: &str) -> Option<f64> {
    let row = edges
        .get(edge)
        .unwrap_or_else(|| panic!("no {edge}: {edges:?}"));
    let cell = &row[column];
    (!cell.is_empty()).then(|| {
        cell.parse::<f64>()
            .unwrap_or_else(|_| panic!("{edge} {column}: {cell:?}"))
            / MIB
    })
}

#[test]
fn the_module_reads_a_preloaded_jemallocs_or_tcmallocs_own_view_at_each_edge() {
    crate::run::allocators::needs_allocators();
    for strategy in ["jemalloc", "tcmalloc"] {
        let out = tempfile::tempdir().expect("tempdir");
        let (_, dir) = exec(
            out.path(),
            &["--strategy", strategy],
            "python3",
            HOLDS_128_FREES_64,
            out.path(),
        );
        let edges = edges(&dir);
        let at = |edge: &str, column: &str| {
            mib(&edges, edge, column)
                .unwrap_or_else(|| panic!("{strategy}: {edge} has no {column}: {edges:?}"))
        };
        let grew = |edge: &str, column: &str| at(edge, column) - at("load begin", column);
        let what = |s: &str| format!("{strategy}: {s}");
        assert_near(
            &what("in use after the load"),
            grew("load end", "heap_in_use_bytes"),
            128.0,
        );
        assert_near(
            &what("in use after the unload"),
            grew("unload end", "heap_in_use_bytes"),
            64.0,
        );
        // Both keep the freed chunks (jemalloc's 10 s decay, tcmalloc's page
        // heap): held stays at the 128 MiB.
        assert_near(
            &what("held after the load"),
            grew("load end", "heap_held_bytes"),
            128.0,
        );
        assert_near(
            &what("held after the unload"),
            grew("unload end", "heap_held_bytes"),
            128.0,
        );
        // glibc's mallinfo2 is not the allocator's view here.
        assert!(
            edges.values().all(|r| r["glibc_in_use_bytes"].is_empty()),
            "{strategy}: glibc's view where it does not serve malloc: {edges:?}"
        );
    }
}

#[test]
fn under_mimalloc_the_module_sends_what_it_counts_held_bytes_only() {
    crate::run::allocators::needs_allocators();
    let out = tempfile::tempdir().expect("tempdir");
    let (_, dir) = exec(
        out.path(),
        &["--strategy", "mimalloc"],
        "python3",
        HOLDS_128_FREES_64,
        out.path(),
    );
    let edges = edges(&dir);
    // mimalloc counts no bytes in use without its statistics: the cell is
    // empty, never 0; its committed bytes grew by the 128 MiB.
    assert!(
        edges.values().all(|r| r["heap_in_use_bytes"].is_empty()),
        "{edges:?}"
    );
    let held = |edge: &str| mib(&edges, edge, "heap_held_bytes").expect("held");
    assert_near(
        "mimalloc: committed after the load",
        held("load end") - held("load begin"),
        128.0,
    );
}

/// Sends `views` at every edge through the module's own sender (its
/// `_views` replaced): two views, a view of the wrong resource, an unknown
/// word and a part memrel reads itself.
const SENDS_VIEWS: &str = r#"
import memrel
memrel._views = lambda: {
    "cuda:0.torch_reserved": 3 << 30,
    "cuda:0.torch_allocated": 1 << 30,
    "host.torch_pinned_held": 512 << 20,
    "host.torch_reserved": 7,
    "cuda:0.bogus": 8,
    "host.anon": 9,
}
with memrel.phase("load", model="m"):
    pass
with memrel.phase("unload", model="m"):
    pass
"#;

#[test]
fn a_programs_views_reach_the_readings_cell_and_stay_there_and_a_bad_key_is_dropped() {
    let out = tempfile::tempdir().expect("tempdir");
    let (output, dir) = exec(out.path(), &[], "python3", SENDS_VIEWS, out.path());
    let rows = csv_rows(&dir.join("events.csv"));
    assert_eq!(rows.len(), 4, "{rows:?}");
    for row in &rows {
        let cell = &row["readings"];
        for want in [
            "cuda:0.torch_reserved=3221225472",
            "cuda:0.torch_allocated=1073741824",
            "host.torch_pinned_held=536870912",
        ] {
            assert!(cell.split(' ').any(|e| e == want), "{want} not in {cell:?}");
        }
        assert!(
            !cell.contains("bogus") && !cell.contains("host.torch_reserved"),
            "{cell:?}"
        );
        // memrel's own reading of the host's anonymous bytes stands.
        assert_ne!(row["anon_bytes"], "9", "{row:?}");
    }
    // One warning per bad key, naming it and the words taken, though every
    // edge sent it.
    let err = stderr(&output);
    for bad in ["cuda:0.bogus", "host.torch_reserved", "host.anon"] {
        let quoted = format!("{bad:?}");
        assert_eq!(err.matches(&quoted).count(), 1, "{bad}: {err}");
    }
    assert!(err.contains("memrel: warning: the program's view"), "{err}");
    assert!(
        err.contains("torch_pinned_held") && err.contains("jax_pool"),
        "{err}"
    );
    // Read back, the record keeps them as parts of the GPU and the host.
    let record = Record::load(&dir).expect("the record reads back");
    let events = &record.runs[0].events;
    assert_eq!(events.len(), 4);
    for e in events {
        let view = |r, k| e.readings.part(r, Part::View(k));
        assert_eq!(
            view(Resource::Device(0), ViewKind::TorchReserved),
            Some(3 << 30)
        );
        assert_eq!(
            view(Resource::Host, ViewKind::TorchPinnedHeld),
            Some(512 << 20)
        );
    }
    // `memrel report` re-renders it and leaves the cell as it was; its
    // copy (`--out`) writes the same cells from the record read back.
    let before = std::fs::read(dir.join("events.csv")).expect("events.csv");
    assert_rerenders(&dir);
    assert_eq!(
        std::fs::read(dir.join("events.csv")).expect("events.csv"),
        before
    );
    let copy = out.path().join("copy");
    run_ok(memrel().arg("report").arg(&dir).arg("--out").arg(&copy));
    let cells = |path: &Path| -> Vec<String> {
        csv_rows(path)
            .into_iter()
            .map(|r| r["readings"].clone())
            .collect()
    };
    assert_eq!(
        cells(&copy.join("events.csv")),
        cells(&dir.join("events.csv"))
    );
}

/// Fakes PyTorch with CUDA initialised on three visible GPUs and JAX with a
/// GPU backend started (the module reads only `sys.modules`), then prints
/// the module's views twice, GPU 2 given back to CUDA in between.
const FAKE_FRAMEWORKS: &str = r#"
import json, sys, types
sys.modules["pynvml"] = None  # not importable, whatever the machine has
stats = {0: (100, 300), 1: (0, 0), 2: (5, 7)}
cuda = types.SimpleNamespace(
    is_initialized=lambda: True,
    device_count=lambda: 3,
    memory_stats_as_nested_dict=lambda i: {
        "allocated_bytes": {"all": {"current": stats[i][0]}},
        "reserved_bytes": {"all": {"current": stats[i][1]}},
    },
    memory=types.SimpleNamespace(host_memory_stats_as_nested_dict=lambda: {
        "allocated_bytes": {"current": 512}, "active_bytes": {"current": 256}}),
)
torch = types.ModuleType("torch")
torch.__version__ = sys.argv[1]
torch.cuda = cuda
sys.modules["torch"] = torch

class Device(object):
    def __init__(self, platform, hw, stats):
        self.platform, self.local_hardware_id, self.id, self.stats = platform, hw, hw + 10, stats
    def memory_stats(self):
        return self.stats

class Backend(object):
    def __init__(self, devices):
        self.devices = devices
    def local_devices(self):
        return self.devices

xb = types.ModuleType("jax._src.xla_bridge")
xb._backends = {
    "cuda": Backend([Device("gpu", 1, {"bytes_in_use": 11, "pool_bytes": 22}),
                     Device("gpu", 2, {"bytes_in_use": 1, "bytes_reserved": 3})]),
    "cpu": Backend([Device("cpu", 0, None)]),
}
sys.modules["jax"] = types.ModuleType("jax")
sys.modules["jax._src.xla_bridge"] = xb
import memrel
first = memrel._views()
stats[2] = (0, 0)
print(json.dumps([first, memrel._views()]))
"#;

/// The module run bare (no memrel) on [`FAKE_FRAMEWORKS`] (torch 2.15)
/// under `CUDA_VISIBLE_DEVICES=visible`: its two views and its stderr.
fn fake_views(visible: &str, env: &[(&str, &str)]) -> (serde_json::Value, String) {
    fake_torch_views("2.15.0+cu132", visible, env)
}

fn fake_torch_views(
    torch_version: &str,
    visible: &str,
    env: &[(&str, &str)],
) -> (serde_json::Value, String) {
    let output = std::process::Command::new("python3")
        .env("PYTHONPATH", concat!(env!("CARGO_MANIFEST_DIR"), "/python"))
        .env("CUDA_VISIBLE_DEVICES", visible)
        .envs(env.iter().copied())
        .env_remove("MEMREL_EVENT_FD")
        .args(["-c", FAKE_FRAMEWORKS, torch_version])
        .output()
        .expect("python3 starts");
    assert!(output.status.success(), "{}", streams(&output));
    let views = serde_json::from_slice(&output.stdout).expect("json");
    (views, stderr(&output))
}

#[test]
fn the_module_numbers_each_frameworks_gpus_as_nvml_does_and_never_guesses() {
    let (views, err) = fake_views("3,1,0", &[]);
    let want = serde_json::json!({
        // torch's visible 0 is NVML's 3, its 2 is NVML's 0; its 1 never
        // held anything: not sent.
        "cuda:3.torch_allocated": 100, "cuda:3.torch_reserved": 300,
        "cuda:0.torch_allocated": 5, "cuda:0.torch_reserved": 7,
        "host.torch_pinned_held": 512, "host.torch_pinned_in_use": 256,
        // JAX's GPUs by their local hardware id (visible 1 and 2); its
        // pool is pool_bytes, else bytes_reserved; its CPU gives nothing.
        "cuda:1.jax_in_use": 11, "cuda:1.jax_pool": 22,
        "cuda:0.jax_in_use": 1, "cuda:0.jax_pool": 3,
    });
    assert_eq!(views[0], want, "{err}");
    // A GPU torch gave back still reads, as 0.
    assert_eq!(views[1]["cuda:0.torch_reserved"], 0);
    assert_eq!(views[1]["cuda:0.torch_allocated"], 0);
    assert!(err.is_empty(), "{err}");
    // A GPU named by UUID without nvidia-ml-py: not sent, said once.
    let (views, err) = fake_views("GPU-8932f937-d72c,2,0", &[]);
    assert!(views[0].get("cuda:3.torch_reserved").is_none(), "{views}");
    assert_eq!(views[0]["cuda:0.torch_reserved"], 7, "{views}");
    assert_eq!(views[0]["cuda:2.jax_pool"], 22, "{views}");
    assert_eq!(err.matches("GPU-8932f937-d72c").count(), 1, "{err}");
    assert!(err.contains("nvidia-ml-py"), "{err}");
    // Before torch 2.15 a pinned block freed without stream events stays in
    // `active_bytes` (torch 2.11 on an H200): held only.
    let (views, _) = fake_torch_views("2.11.0+cu130", "0", &[]);
    assert_eq!(views[0]["host.torch_pinned_held"], 512, "{views}");
    assert!(
        views[0].get("host.torch_pinned_in_use").is_none(),
        "{views}"
    );
    // MEMREL_VIEWS=0: none.
    let (views, _) = fake_views("0", &[("MEMREL_VIEWS", "0")]);
    assert_eq!(views, serde_json::json!([null, null]));
}

/// Imports torch (and jax where it is there) and uses them on the CPU;
/// writes at the end whether CUDA was initialised and whether JAX started
/// a backend it was never asked to.
const CPU_FRAMEWORKS: &str = r#"
import os, sys, memrel, torch
try:
    import jax
except ImportError:
    jax = None
with memrel.phase("load", model="m"):
    t = torch.ones(1 << 20)
with memrel.phase("unload", model="m"):
    del t
xb = sys.modules.get("jax._src.xla_bridge")
with open(os.path.join(sys.argv[1], "state"), "w") as f:
    f.write("cuda=%s jax_backends=%s" % (torch.cuda.is_initialized(), bool(getattr(xb, "_backends", None))))
"#;

#[test]
#[ignore = "needs torch: MEMREL_TEST_PYTHON=<python> cargo test --release --test it torch -- --ignored (CI runs it)"]
fn torch_on_the_cpu_sends_no_views_and_cuda_is_never_initialised() {
    let python = torch_python();
    let out = tempfile::tempdir().expect("tempdir");
    let (_, dir) = exec(out.path(), &[], &python, CPU_FRAMEWORKS, out.path());
    let rows = csv_rows(&dir.join("events.csv"));
    assert_eq!(rows.len(), 4, "{rows:?}");
    for row in &rows {
        let cell = &row["readings"];
        assert!(
            !cell.contains("torch_") && !cell.contains("jax_"),
            "{cell:?}"
        );
    }
    let state = std::fs::read_to_string(out.path().join("state")).expect("the program wrote");
    assert_eq!(state, "cuda=False jax_backends=False");
}
