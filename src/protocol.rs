//! The worker → parent messages: one JSON object per line, in a versioned
//! `{"v": 1, "type": …, "data": …}` envelope, on a private channel: an
//! inherited pipe on file descriptor [`EVENT_FD`], named to the worker in
//! [`EVENT_FD_ENV`]. Never on stdout: the libraries a worker loads print
//! there, and a stray `print!` must neither swallow nor fake a phase edge.
//!
//! This is the only channel from the child to the parent. The worker never sees
//! samples and the parent never infers phases from memory: phases come from here.
//! Because nothing else writes on it, every line that is not a valid message
//! is a protocol error that the parent records in the run, never skipped.
//! Every memory reading in a message is the worker's own `/proc/self/statm` at
//! the instant of the phase edge, so phase-point metrics carry no sampling lag.
//!
//! Any program speaks the same protocol (docs/guide.md's "Phase markers" has
//! the short version for C, C++ and Rust): a `phase` line needs only `phase`
//! and `edge`. Without `cycle` the parent numbers cycles (a load or a sleep that
//! begins after an unload, release, settle or wake starts the next one; baseline and
//! warm-up are cycle 0); without `memory` the parent reads the program's
//! memory when the line arrives. `hello` and `done` are optional for a
//! program, required of memrel's own workers.
//!
//! The handshake: once the parent has read every resource at a phase edge it
//! writes one byte on a second pipe, the descriptor [`ACK_FD`] named in
//! [`ACK_FD_ENV`]. A sender that reads that byte after each phase line before
//! going on (memrel's workers and the Python module do) cannot act before its
//! edge is read; one that does not is measured as before.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Bumped whenever a message changes shape; the parent refuses other versions.
pub const PROTOCOL_VERSION: u32 = 1;

/// The worker's file descriptor of the channel's write end.
pub const EVENT_FD: i32 = 3;

/// The environment variable that tells the worker which descriptor is the channel.
pub const EVENT_FD_ENV: &str = "MEMREL_EVENT_FD";

/// The channel's identity, `pipe:[INODE]` as /proc/PID/fd shows it: a process
/// started by a launcher that closed the descriptor (torchrun, accelerate
/// launch) finds the pipe again in an ancestor's /proc/PID/fd (the Python
/// module does, in the process of rank 0 only).
pub const EVENT_PIPE_ENV: &str = "MEMREL_EVENT_PIPE";

/// The worker's file descriptor of the acknowledgements' read end: one byte
/// per phase line, written once the parent has read the edge.
pub const ACK_FD: i32 = 4;

/// The environment variable that names [`ACK_FD`].
pub const ACK_FD_ENV: &str = "MEMREL_ACK_FD";

/// The acknowledgements' identity, as [`EVENT_PIPE_ENV`] for the channel.
pub const ACK_PIPE_ENV: &str = "MEMREL_ACK_PIPE";

/// How long a sender waits for an edge's acknowledgement before going on
/// without it (the parent is stuck or gone; the edge is still sent).
pub const ACK_TIMEOUT_S: f64 = 10.0;

/// The longest line the parent accepts; a longer one is a protocol error (a
/// real message is a few hundred bytes: this bounds the parent's memory).
pub const MAX_LINE_BYTES: usize = 1024 * 1024;

/// One line of the protocol.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Envelope {
    pub v: u32,
    #[serde(flatten)]
    pub message: Message,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
pub enum Message {
    /// First message: who the worker is and whether the strategy took effect.
    Hello(Hello),
    /// A phase started or ended.
    Phase(PhaseEdge),
    /// The worker finished every cycle and is about to exit normally.
    Done(Done),
    /// The worker hit an error it could describe before exiting.
    Error(WorkerError),
    /// The worker ends at a release step (`respawn`): a new process resumes.
    Handover(Handover),
}

/// Where a new worker process takes over from one that ended at a release.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Resume {
    pub cycle: u32,
    /// Index (in the workload's steps) of the release step the old process began.
    pub release_step: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Handover {
    pub resume: Resume,
    /// The ending process's `VmHWM`.
    pub vm_hwm_bytes: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Hello {
    pub pid: u32,
    pub strategy: String,
    pub device: String,
    /// Results of the strategy's start-up checks (variable visible, mallopt accepted, …).
    pub checks: Vec<Check>,
    /// VRAM of a bare device (context, cuBLAS, cuRAND; no tensors), calibrated
    /// before anything was loaded (CUDA only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vram_floor_bytes: Option<u64>,
    /// The allocator that serves the worker's `malloc`, identified at start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator: Option<AllocatorReport>,
}

/// Which allocator serves a process's `malloc`, and the settings it really
/// runs with, as the process itself found out (not as it was asked).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AllocatorReport {
    /// `glibc`, `jemalloc`, `tcmalloc`, `mimalloc`, or `unknown`.
    pub name: String,
    /// The allocator's own version string, where it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The file of the library whose `malloc` the process calls.
    pub library: String,
    /// Whether that library is mapped in `/proc/self/maps`.
    pub mapped: bool,
    /// Settings read back from the allocator (name → value as text).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub settings: std::collections::BTreeMap<String, String>,
}

/// Any allocator's own view of its memory, the same three numbers for each:
/// what the program holds, what the allocator keeps from the kernel, and the
/// difference (free memory the allocator has not returned).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct HeapStats {
    /// Bytes allocated by the program and not freed (`None` where the
    /// allocator does not count them: mimalloc without its statistics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_use_bytes: Option<u64>,
    /// Bytes the allocator holds from the kernel, resident or committed
    /// (glibc arena + mmapped, jemalloc `stats.resident`, tcmalloc heap size
    /// less unmapped, mimalloc committed).
    pub held_bytes: u64,
}

/// A yes/no verification that a strategy is really in force.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Check {
    pub name: String,
    pub ok: bool,
    pub detail: String,
}

/// The phases of a cycle. `Baseline` is the quiet time before the first load.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Warmup,
    Baseline,
    Load,
    Forward,
    Unload,
    Release,
    Settle,
    Idle,
    /// Allocating a little (small blocks, freed each round): what a serving
    /// process does between requests, and what wakes timer-based allocators.
    Busy,
    /// Putting a loaded model to sleep: its weights copied off the device (or
    /// dropped, to be read from disk again) and its device memory freed.
    Sleep,
    /// The model asleep: the time between a sleep and its wake.
    Asleep,
    /// Waking a sleeping model: its weights back on the device, ready to run.
    Wake,
}

impl Phase {
    pub const ALL: [Phase; 12] = [
        Phase::Warmup,
        Phase::Baseline,
        Phase::Load,
        Phase::Forward,
        Phase::Unload,
        Phase::Release,
        Phase::Settle,
        Phase::Idle,
        Phase::Busy,
        Phase::Sleep,
        Phase::Asleep,
        Phase::Wake,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Warmup => "warmup",
            Phase::Baseline => "baseline",
            Phase::Load => "load",
            Phase::Forward => "forward",
            Phase::Unload => "unload",
            Phase::Release => "release",
            Phase::Settle => "settle",
            Phase::Idle => "idle",
            Phase::Busy => "busy",
            Phase::Sleep => "sleep",
            Phase::Asleep => "asleep",
            Phase::Wake => "wake",
        }
    }

    pub fn parse(text: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.as_str() == text)
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Edge {
    Begin,
    End,
}

impl Edge {
    pub fn as_str(self) -> &'static str {
        match self {
            Edge::Begin => "begin",
            Edge::End => "end",
        }
    }
}

/// Memory as the worker sees itself at a phase edge.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct MemoryAtEdge {
    pub rss_bytes: u64,
    pub anon_bytes: u64,
    pub file_bytes: u64,
    /// Device memory of this process above nothing (CUDA only; `None` on CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vram_bytes: Option<u64>,
    /// The model files' bytes in the page cache, as memrel's worker reads
    /// them at the edge (`None`: not read; the parent reads them where the
    /// line has none). The cgroup's reading is never the sender's: the
    /// parent reads it (`session::edges`) into the edge's `Readings`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_cache_bytes: Option<u64>,
}

/// glibc's `mallinfo2()`: tells "glibc holds free memory" apart from a leak.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct AllocatorState {
    /// Bytes in the main and other arenas obtained with sbrk/mmap'd heaps (`arena`).
    pub arena_bytes: u64,
    /// Bytes in chunks allocated directly with mmap (`hblkhd`).
    pub mmapped_bytes: u64,
    /// Bytes allocated and in use (`uordblks`).
    pub in_use_bytes: u64,
    /// Bytes free inside the arenas, held by glibc (`fordblks`).
    pub free_bytes: u64,
    /// Bytes at the top of the main heap that trimming could give back (`keepcost`).
    pub top_releasable_bytes: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PhaseEdge {
    pub phase: Phase,
    pub edge: Edge,
    /// 0 for warm-up and baseline, 1.. for measured cycles; [`CYCLE_UNSET`]
    /// on the wire when a program leaves the numbering to the parent.
    #[serde(default = "cycle_unset")]
    pub cycle: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Worker-measured duration of the phase (on `End` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_s: Option<f64>,
    /// All zeros on the wire when a program leaves the reading to the parent.
    #[serde(default)]
    pub memory: MemoryAtEdge,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator: Option<AllocatorState>,
    /// The allocator's own view of its memory, whichever allocator serves `malloc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heap: Option<HeapStats>,
    /// What the program's frameworks say they hold at the edge, keyed as
    /// the events.csv `readings` cell writes them (`cuda:0.torch_reserved`,
    /// `host.torch_pinned_held`: `record::ViewKind`'s words, a GPU by its
    /// NVML index). The parent takes only these parts of host memory and of
    /// a GPU (`session::intake`): never a reading memrel takes itself.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub views: BTreeMap<String, u64>,
    /// Free text: the release action's result, the model's byte count, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The sender's `CLOCK_MONOTONIC` at the edge, in seconds ([`monotonic_s`]).
    /// The parent stamps the edge with it (the samples' clock) instead of the
    /// moment the line was read, which a busy machine can delay by tens of ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mono_s: Option<f64>,
}

/// `CLOCK_MONOTONIC` in seconds: one clock for every process on the machine
/// (Rust's `Instant` reads it too), so a worker's edge and the parent's
/// samples are stamped on the same clock.
pub fn monotonic_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the pointer it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// A phase line without `cycle`: the parent assigns one on arrival.
pub const CYCLE_UNSET: u32 = u32::MAX;

fn cycle_unset() -> u32 {
    CYCLE_UNSET
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Done {
    /// The kernel's high-water mark of the worker's RSS (`VmHWM`).
    pub vm_hwm_bytes: u64,
    /// Checks that can only be judged after the work (e.g. mmapped bytes stayed high).
    pub checks: Vec<Check>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WorkerError {
    pub message: String,
}

impl Envelope {
    pub fn new(message: Message) -> Envelope {
        Envelope {
            v: PROTOCOL_VERSION,
            message,
        }
    }

    /// Parses one line of the channel (without its newline). Every line must be
    /// a message: anything else is an error that names what was wrong.
    pub fn parse_line(line: &str) -> Result<Envelope, String> {
        let value: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| format!("not a protocol message ({e}): {}", excerpt(line)))?;
        let version = value
            .get("v")
            .and_then(|v| v.as_u64())
            .ok_or_else(|| format!("message without a version \"v\": {}", excerpt(line)))?;
        if version != u64::from(PROTOCOL_VERSION) {
            return Err(format!(
                "worker speaks protocol v{version}, this memrel speaks v{PROTOCOL_VERSION}: rebuild memrel"
            ));
        }
        serde_json::from_value(value)
            .map_err(|e| format!("bad worker message ({e}): {}", excerpt(line)))
    }

    pub fn to_line(&self) -> String {
        // Serializing plain data structs cannot fail.
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"v\":0,\"error\":\"{e}\"}}"))
    }
}

/// The start of a bad line, quoted, for an error message.
fn excerpt(line: &str) -> String {
    const MAX_CHARS: usize = 80;
    if line.chars().count() <= MAX_CHARS {
        return format!("{line:?}");
    }
    let head: String = line.chars().take(MAX_CHARS).collect();
    format!("{head:?}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_edge_round_trips_through_one_line() {
        let env = Envelope::new(Message::Phase(PhaseEdge {
            phase: Phase::Load,
            edge: Edge::End,
            cycle: 2,
            model: Some("bert".into()),
            elapsed_s: Some(0.25),
            memory: MemoryAtEdge {
                rss_bytes: 10,
                anon_bytes: 7,
                file_bytes: 3,
                vram_bytes: None,
                page_cache_bytes: None,
            },
            allocator: None,
            heap: None,
            views: BTreeMap::new(),
            note: None,
            mono_s: None,
        }));
        let line = env.to_line();
        assert!(line.starts_with("{\"v\":1,\"type\":\"phase\",\"data\":{"));
        assert_eq!(Envelope::parse_line(&line), Ok(env));
    }

    #[test]
    fn a_programs_minimal_phase_line_leaves_cycle_and_memory_to_the_parent() {
        let line = r#"{"v":1,"type":"phase","data":{"phase":"load","edge":"begin"}}"#;
        let Message::Phase(edge) = Envelope::parse_line(line).expect("valid").message else {
            panic!("not a phase")
        };
        assert_eq!((edge.phase, edge.edge), (Phase::Load, Edge::Begin));
        assert_eq!(edge.cycle, CYCLE_UNSET);
        assert_eq!(edge.memory, MemoryAtEdge::default());
        let bad = r#"{"v":1,"type":"phase","data":{"phase":"train","edge":"begin"}}"#;
        assert!(Envelope::parse_line(bad).is_err());
    }

    /// Issue 48, item 3: the wire carries only what a worker sends; a
    /// cgroup reading on a line (the parent's to take) is not a reading.
    #[test]
    fn a_line_cannot_carry_the_cgroups_reading() {
        let line = r#"{"v":1,"type":"phase","data":{"phase":"load","edge":"begin","memory":{"rss_bytes":8,"anon_bytes":6,"file_bytes":2,"container_bytes":5,"container_anon_bytes":4}}}"#;
        let Message::Phase(edge) = Envelope::parse_line(line).expect("valid").message else {
            panic!("not a phase")
        };
        let event = crate::record::Event::of_line(0.0, edge);
        assert_eq!(event.readings.get(crate::record::Resource::Host), Some(8));
        assert_eq!(event.readings.get(crate::record::Resource::Container), None);
        let memory = serde_json::to_string(&event.edge.memory).expect("serialises");
        assert!(!memory.contains("container"), "{memory}");
    }

    #[test]
    fn every_line_that_is_not_a_message_is_an_error() {
        for bad in [
            "hello from a library",
            "",
            "{\"v\":1,\"type\":\"pha",
            "{\"type\":\"done\",\"data\":{\"vm_hwm_bytes\":1,\"checks\":[]}}",
            "{\"v\":1,\"type\":\"nonsense\",\"data\":{}}",
        ] {
            let err = Envelope::parse_line(bad).expect_err(bad);
            assert!(!err.is_empty());
        }
        let other = r#"{"v":99,"type":"done","data":{}}"#;
        let err = Envelope::parse_line(other).expect_err("other version");
        assert!(err.contains("v99"), "{err}");
        let long = "x".repeat(500);
        let err = Envelope::parse_line(&long).expect_err("junk");
        assert!(err.len() < 300, "the excerpt is bounded: {err}");
    }
}
