//! The truth matrix (issue 35): one test per cell of resource × way of
//! measuring. One real python3 program acts right after every edge (takes
//! the resource as a load begins, gives it back as an unload begins) and
//! writes down its own reading just before each edge; every edge memrel
//! records must equal it: within 1 MiB for host memory, exactly for the
//! rest. The ways: `exec`, `exec --tree`, `attach` + `memrel mark` (which
//! returns once the edge is read: the handshake) and `attach` + log marks
//! (the program acts once memrel has recorded the line's edge: a log line
//! has no handshake of its own). The resources: host memory, VRAM on one
//! and on two GPUs (a fake NVML, `fake_nvml`; held by a child under a tree),
//! the container (a fake cgroupfs, `MEMREL_CGROUP_DIR`), the page cache of
//! the program's model file (`--model-files`; the program reads it whole as
//! a load begins and evicts it as an unload begins, its own reading
//! `mincore`'s) and shared memory (a directory of its own, `MEMREL_SHM_DIR`). The `run` column is the fake
//! worker's (`fake.rs`); docs/validation.md has the table.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::common::*;
use super::fake_nvml::fake_nvml_dir;

/// The program. argv: resource (host, vram, vram2, container, page_cache, shm), way
/// (exec, tree, mark, log), its directory. Two cycles of load and unload;
/// its readings before each edge go to `own.json` in its directory.
const ACTS_RIGHT_AFTER_EACH_EDGE: &str = r#"
import csv, ctypes, json, os, subprocess, sys, time

resource, way, d = sys.argv[1], sys.argv[2], sys.argv[3]
if way in ("exec", "tree"):
    import memrel
PAGE = os.sysconf("SC_PAGE_SIZE")
state = os.environ.get("FAKE_NVML_STATE")
cgroup = os.environ.get("MEMREL_CGROUP_DIR")
shm = os.environ.get("MEMREL_SHM_DIR")
# Under a tree (and attached: attach samples the tree) a child holds the VRAM.
child = None
if resource.startswith("vram") and way != "exec":
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
holder = child.pid if child else os.getpid()
blob, now = None, {}

def write(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)

def hold(loaded):
    global blob
    if resource == "host":
        blob = None
        if loaded:
            blob = bytearray(64 << 20)
            for i in range(0, len(blob), 4096):
                blob[i] = 1
    elif resource.startswith("vram"):
        mib = 300 if loaded else 100
        lines = ["0 %d %d" % (holder, mib << 20)]
        now["gpu0"] = mib << 20
        if resource == "vram2":
            lines.append("1 %d %d" % (os.getpid(), (mib // 2) << 20))
            now["gpu1"] = (mib // 2) << 20
        write(state, "\n".join(lines) + "\n")
    elif resource == "container":
        usage = (300 if loaded else 100) << 20
        stat = "anon %020d\nfile %020d\nactive_file 0\ninactive_file 0\n" % (usage, 0)
        # In place, every number the same width: memrel keeps the files open.
        for name, text in (("memory.stat", stat), ("memory.current", "%020d\n" % usage)):
            with open(os.path.join(cgroup, name), "r+") as f:
                f.write(text)
        now["container"] = usage
    elif resource == "page_cache":
        fd = os.open(os.path.join(d, "model.safetensors"), os.O_RDONLY)
        if loaded:
            while os.read(fd, 1 << 20):
                pass
        else:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    elif resource == "shm":
        path = os.path.join(shm, "segment")
        if loaded:
            with open(path, "wb") as f:
                f.write(b"\x01" * (8 << 20))
        elif os.path.exists(path):
            os.unlink(path)

def own():
    if resource == "host":
        rss = int(open("/proc/self/statm").read().split()[1]) * PAGE
        anon = 0
        for line in open("/proc/self/smaps_rollup"):
            if line.startswith("Pss_Anon:"):
                anon = int(line.split()[1]) * 1024
        return {"rss": rss, "anon": anon}
    if resource == "page_cache":
        # The file's pages in the page cache: mincore over a mapping of it.
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        path = os.path.join(d, "model.safetensors")
        size = os.path.getsize(path)
        fd = os.open(path, os.O_RDONLY)
        addr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
        os.close(fd)
        pages = (size + PAGE - 1) // PAGE
        vec = ctypes.create_string_buffer(pages)
        assert libc.mincore(addr, size, vec) == 0, ctypes.get_errno()
        libc.munmap(addr, size)
        return {"page_cache": sum(b & 1 for b in vec.raw) * PAGE}
    if resource == "shm":
        total = 0
        for name in os.listdir(shm):
            total += os.stat(os.path.join(shm, name)).st_blocks * 512
        return {"shm": total}
    return dict(now)

expected, open_phase, n = [], None, 0

def say(name):
    open(os.path.join(d, name), "w").close()

def wait(name):
    while not os.path.exists(os.path.join(d, name)):
        time.sleep(0.002)

def recorded():
    # The edges memrel has recorded so far (attached: its live events.csv).
    try:
        with open(os.path.join(d, "results", "events.csv")) as f:
            return sum(1 for r in csv.DictReader(f) if r["phase"] != "baseline")
    except (FileNotFoundError, KeyError):
        return 0

def edge(kind, phase):
    # exec and tree: the program marks its own edges (memrel.begin/end).
    expected.append([phase, kind, own()])
    (memrel.begin if kind == "begin" else memrel.end)(phase, model="m")

def mark(phase):
    # attached: a mark ends the open phase and begins its own.
    global open_phase, n
    reading = own()
    if open_phase:
        expected.append([open_phase, "end", reading])
    if phase != "end":
        expected.append([phase, "begin", reading])
    open_phase = None if phase == "end" else phase
    n += 1
    if way == "mark":
        say("mark-%d-%s" % (n, phase))
        wait("marked-%d" % n)
    else:
        with open(os.path.join(d, "app.log"), "a") as f:
            f.write("EDGE %s\n" % phase)
        while recorded() < len(expected):
            time.sleep(0.005)

hold(False)
if way in ("mark", "log"):
    say("ready")
    wait("go")
for cycle in range(2):
    if way in ("exec", "tree"):
        edge("begin", "load")
        hold(True)
        edge("end", "load")
        edge("begin", "unload")
        hold(False)
        edge("end", "unload")
    else:
        mark("load")
        hold(True)
        mark("unload")
        hold(False)
if way in ("mark", "log"):
    mark("end")
with open(os.path.join(d, "own.json"), "w") as f:
    json.dump(expected, f)
if way in ("mark", "log"):
    say("done")
    wait("exit")
if child:
    child.kill()
    child.wait()
"#;

/// The program's model file, for the page-cache cells.
const MODEL_FILE: &str = "model.safetensors";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Resource {
    Host,
    Vram,
    Vram2,
    Container,
    PageCache,
    Shm,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Way {
    Exec,
    Tree,
    Mark,
    Log,
}

impl Resource {
    fn arg(self) -> &'static str {
        match self {
            Resource::Host => "host",
            Resource::Vram => "vram",
            Resource::Vram2 => "vram2",
            Resource::Container => "container",
            Resource::PageCache => "page_cache",
            Resource::Shm => "shm",
        }
    }

    /// The environment memrel and the program share: the fake NVML, the fake
    /// cgroupfs, the shared-memory directory.
    /// memrel's arguments for the resource: the model file's page cache.
    fn args(self, d: &Path) -> Vec<std::ffi::OsString> {
        match self {
            Resource::PageCache => vec!["--model-files".into(), d.join(MODEL_FILE).into()],
            _ => Vec::new(),
        }
    }

    fn environment(self, d: &Path) -> Vec<(&'static str, std::ffi::OsString)> {
        match self {
            Resource::Host => Vec::new(),
            Resource::Vram | Resource::Vram2 => {
                let state = d.join("nvml-state");
                std::fs::write(&state, "").expect("nvml state");
                let gpus = if self == Resource::Vram2 { "2" } else { "1" };
                vec![
                    ("LD_LIBRARY_PATH", fake_nvml_dir().as_os_str().to_owned()),
                    ("FAKE_NVML_STATE", state.into_os_string()),
                    ("FAKE_NVML_GPUS", gpus.into()),
                ]
            }
            Resource::Container => {
                let fake = d.join("cgroup");
                std::fs::create_dir(&fake).expect("fake cgroup dir");
                for name in ["memory.current", "memory.stat"] {
                    std::fs::write(fake.join(name), "").expect(name);
                }
                vec![("MEMREL_CGROUP_DIR", fake.into_os_string())]
            }
            Resource::PageCache => {
                // Not in the page cache to begin with: the program evicts it
                // before its first edge.
                std::fs::write(d.join(MODEL_FILE), vec![7u8; 32 << 20]).expect("model file");
                Vec::new()
            }
            Resource::Shm => {
                let shm = d.join("shm");
                std::fs::create_dir(&shm).expect("shm dir");
                vec![("MEMREL_SHM_DIR", shm.into_os_string())]
            }
        }
    }
}

/// memrel's edge and the program's own reading before it.
type Edge = (Row, serde_json::Value);
type Row = std::collections::HashMap<String, String>;

/// Measures the program `way`; memrel's edges (baseline left out) paired
/// with the program's own readings, phases and edges checked to match.
fn measure(resource: Resource, way: Way) -> Vec<Edge> {
    let work = tempfile::tempdir().expect("tempdir");
    let d = work.path();
    let env = resource.environment(d);
    std::fs::write(d.join("prog.py"), ACTS_RIGHT_AFTER_EACH_EDGE).expect("prog.py");
    let program_args = |command: &mut Command| {
        command
            .arg("python3")
            .arg(d.join("prog.py"))
            .arg(resource.arg())
            .arg(match way {
                Way::Exec => "exec",
                Way::Tree => "tree",
                Way::Mark => "mark",
                Way::Log => "log",
            })
            .arg(d);
    };
    let gpu = matches!(resource, Resource::Vram | Resource::Vram2);
    let results = match way {
        Way::Exec | Way::Tree => {
            let mut command = memrel();
            command.envs(env.iter().map(|(k, v)| (k, v)));
            command.arg("exec").arg("--out").arg(d.join("out"));
            if way == Way::Tree {
                command.arg("--tree");
            }
            if gpu {
                command.args(["--device", "cuda"]);
            }
            command.args(resource.args(d));
            command.arg("--");
            program_args(&mut command);
            let output = command.output().expect("memrel starts");
            assert!(output.status.success(), "{}", streams(&output));
            only_results_dir(&d.join("out"), "exec")
        }
        Way::Mark | Way::Log => attach(d, &env, &resource.args(d), way, gpu, program_args),
    };
    let edges: Vec<Row> = csv_rows(&results.join("events.csv"))
        .into_iter()
        .filter(|r| r["phase"] != "baseline")
        .collect();
    let own = read_json(&d.join("own.json"));
    let own = own.as_array().expect("a list").clone();
    assert_eq!(edges.len(), own.len(), "{edges:?}\n{own:?}");
    for (e, o) in edges.iter().zip(&own) {
        assert_eq!(
            (e["phase"].as_str(), e["edge"].as_str()),
            (o[0].as_str().expect("phase"), o[1].as_str().expect("edge")),
            "{edges:?}\n{own:?}"
        );
    }
    edges
        .into_iter()
        .zip(own.into_iter().map(|o| o[2].clone()))
        .collect()
}

/// Starts the program, attaches `memrel attach` to it (with its log for
/// [`Way::Log`]) and marks its edges as it asks; the results directory.
fn attach(
    d: &Path,
    env: &[(&'static str, std::ffi::OsString)],
    args: &[std::ffi::OsString],
    way: Way,
    gpu: bool,
    program_args: impl Fn(&mut Command),
) -> std::path::PathBuf {
    let results = d.join("results");
    std::fs::write(d.join("app.log"), "").expect("app.log");
    let mut program = Command::new("env");
    program.envs(env.iter().map(|(k, v)| (k, v)));
    program_args(&mut program);
    let mut program = program
        .stdin(Stdio::null())
        .spawn()
        .expect("python3 starts");
    wait_for("the program to start", || d.join("ready").exists());
    let mut command = memrel();
    command.envs(env.iter().map(|(k, v)| (k, v)));
    command
        .arg("attach")
        .arg("--dir")
        .arg(&results)
        .args(["--interval-ms", "20"]);
    if gpu {
        command.args(["--device", "cuda"]);
    }
    command.args(args);
    if way == Way::Log {
        command.arg("--log").arg(d.join("app.log"));
        for phase in ["load", "unload", "end"] {
            command
                .arg("--mark-on")
                .arg(format!("^EDGE {phase}$={phase}"));
        }
    }
    let mut attached = command
        .arg(program.id().to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("memrel starts");
    wait_for("memrel attach to go live", || results.join("live").exists());
    std::fs::write(d.join("go"), "").expect("go");
    let mut n = 0;
    while !d.join("done").exists() {
        let next = ["load", "unload", "end"]
            .into_iter()
            .find(|p| d.join(format!("mark-{}-{p}", n + 1)).exists());
        match next {
            Some(phase) => {
                let output = memrel()
                    .arg("mark")
                    .arg(&results)
                    .arg(phase)
                    .output()
                    .expect("memrel mark starts");
                assert!(output.status.success(), "{}", streams(&output));
                n += 1;
                std::fs::write(d.join(format!("marked-{n}")), "").expect("marked");
            }
            None => std::thread::sleep(Duration::from_millis(2)),
        }
    }
    std::fs::write(d.join("exit"), "").expect("exit");
    wait_with_limit(&mut attached, Duration::from_secs(60));
    let output = attached.wait_with_output().expect("memrel's output");
    program.wait().expect("the program ends");
    assert!(output.status.success(), "{}", streams(&output));
    results
}

fn bytes(row: &Row, column: &str) -> u64 {
    row[column]
        .parse()
        .unwrap_or_else(|_| panic!("{column} at every edge: {row:?}"))
}

/// Runs the cell and holds every edge against the program's own reading.
fn cell(resource: Resource, way: Way) {
    for (edge, own) in measure(resource, way) {
        let want = |key: &str| own[key].as_u64().expect("the program's bytes");
        match resource {
            Resource::Host => {
                // exec reads the process (statm RSS); a tree and an attach
                // the tree's PSS, compared on its anonymous part (the rest
                // holds shares of libraries other tests map meanwhile).
                let (column, key) = if way == Way::Exec {
                    ("rss_bytes", "rss")
                } else {
                    ("anon_bytes", "anon")
                };
                let (memrel_mib, own_mib) =
                    (bytes(&edge, column) as f64 / MIB, want(key) as f64 / MIB);
                assert!(
                    (memrel_mib - own_mib).abs() <= 1.0,
                    "{way:?}: memrel read {memrel_mib:.2} MiB, the program {own_mib:.2}: {edge:?}"
                );
            }
            Resource::Vram => assert_eq!(bytes(&edge, "vram_bytes"), want("gpu0"), "{edge:?}"),
            Resource::Vram2 => {
                let per_gpu: Vec<(u32, u64)> = edge["gpu_vram"]
                    .split_whitespace()
                    .map(|e| {
                        let (gpu, bytes) = e.split_once(':').expect("GPU:BYTES");
                        let bytes = bytes.split('/').next().expect("sum");
                        (gpu.parse().expect("gpu"), bytes.parse().expect("bytes"))
                    })
                    .collect();
                assert_eq!(per_gpu, [(0, want("gpu0")), (1, want("gpu1"))], "{edge:?}");
            }
            Resource::Container => {
                assert_eq!(
                    bytes(&edge, "container_bytes"),
                    want("container"),
                    "{edge:?}"
                )
            }
            Resource::PageCache => {
                assert_eq!(
                    bytes(&edge, "page_cache_bytes"),
                    want("page_cache"),
                    "{edge:?}"
                )
            }
            Resource::Shm => {
                let cell = &edge["readings"];
                let shm: u64 = cell
                    .split_whitespace()
                    .find_map(|e| e.strip_prefix("shm="))
                    .unwrap_or_else(|| panic!("no shm in the readings cell {cell:?}"))
                    .parse()
                    .expect("bytes");
                assert_eq!(shm, want("shm"), "{edge:?}");
            }
        }
    }
}

macro_rules! cells {
    ($($name:ident: $resource:ident, $way:ident;)*) => {
        $(
            #[test]
            fn $name() {
                cell(Resource::$resource, Way::$way);
            }
        )*
    };
}

cells! {
    host_exec: Host, Exec;
    host_exec_tree: Host, Tree;
    host_attach_mark: Host, Mark;
    host_attach_log: Host, Log;
    vram_exec: Vram, Exec;
    vram_exec_tree: Vram, Tree;
    vram_attach_mark: Vram, Mark;
    vram_attach_log: Vram, Log;
    vram_two_gpus_exec: Vram2, Exec;
    vram_two_gpus_exec_tree: Vram2, Tree;
    vram_two_gpus_attach_mark: Vram2, Mark;
    vram_two_gpus_attach_log: Vram2, Log;
    container_exec: Container, Exec;
    container_exec_tree: Container, Tree;
    container_attach_mark: Container, Mark;
    container_attach_log: Container, Log;
    page_cache_exec: PageCache, Exec;
    page_cache_exec_tree: PageCache, Tree;
    page_cache_attach_mark: PageCache, Mark;
    page_cache_attach_log: PageCache, Log;
    shm_exec: Shm, Exec;
    shm_exec_tree: Shm, Tree;
    shm_attach_mark: Shm, Mark;
    shm_attach_log: Shm, Log;
}
