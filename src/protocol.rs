//! The worker → parent messages: one JSON object per line on the worker's
//! stdout, in a versioned `{"v": 1, "type": …, "data": …}` envelope.
//!
//! This is the only channel from the child to the parent. The worker never sees
//! samples and the parent never infers phases from memory: phases come from here.
//! Every memory reading in a message is the worker's own `/proc/self/statm` at
//! the instant of the phase edge, so phase-point metrics carry no sampling lag.

use serde::{Deserialize, Serialize};

/// Bumped whenever a message changes shape; the parent refuses other versions.
pub const PROTOCOL_VERSION: u32 = 1;

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
}

impl Phase {
    pub const ALL: [Phase; 8] = [
        Phase::Warmup,
        Phase::Baseline,
        Phase::Load,
        Phase::Forward,
        Phase::Unload,
        Phase::Release,
        Phase::Settle,
        Phase::Idle,
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
    /// 0 for warm-up and baseline, 1.. for measured cycles.
    pub cycle: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Worker-measured duration of the phase (on `End` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_s: Option<f64>,
    pub memory: MemoryAtEdge,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator: Option<AllocatorState>,
    /// Free text: the release action's result, the model's byte count, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
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

    /// Parses one line; `None` for lines that are not protocol messages
    /// (a library printing to stdout must not break a run).
    pub fn parse_line(line: &str) -> Option<Result<Envelope, String>> {
        let trimmed = line.trim();
        if !trimmed.starts_with('{') {
            return None;
        }
        let value: serde_json::Value = serde_json::from_str(trimmed).ok()?;
        let version = value.get("v").and_then(|v| v.as_u64())?;
        if version != u64::from(PROTOCOL_VERSION) {
            return Some(Err(format!(
                "worker speaks protocol v{version}, this memrel speaks v{PROTOCOL_VERSION}: rebuild memrel"
            )));
        }
        Some(serde_json::from_value(value).map_err(|e| format!("bad worker message: {e}")))
    }

    pub fn to_line(&self) -> String {
        // Serializing plain data structs cannot fail.
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"v\":0,\"error\":\"{e}\"}}"))
    }
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
            },
            allocator: None,
            note: None,
        }));
        let line = env.to_line();
        assert!(line.starts_with("{\"v\":1,\"type\":\"phase\",\"data\":{"));
        assert_eq!(Envelope::parse_line(&line), Some(Ok(env)));
    }

    #[test]
    fn stray_stdout_lines_are_ignored_and_other_versions_refused() {
        assert_eq!(Envelope::parse_line("hello from a library"), None);
        let other = r#"{"v":99,"type":"done","data":{}}"#;
        assert!(matches!(Envelope::parse_line(other), Some(Err(_))));
    }
}
