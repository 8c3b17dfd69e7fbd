//! The exact setting a strategy asks of the program it is used in, derived
//! from the strategy's own row (its environment, preloaded allocator, start
//! and release actions, sleep mode, weight-file mode): `memrel advise` prints
//! it next to the strategy it recommends. Derived, never a table of its own,
//! so a strategy added or changed in its family's file cannot drift from it
//! (a program step's call is its row in `steps::PROGRAM_STEPS`).

use super::steps::program_step_call;
use super::{Allocator, ReleaseAction, SleepMode, StartAction, Strategy, WeightFiles};

impl Strategy {
    /// The setting as it goes on a server's command line where memrel
    /// started the server (`memrel drive --strategy`): the variables and
    /// preload before `argv` (`MALLOC_TRIM_THRESHOLD_=0 mlserver start .`),
    /// never a call inside it; `None` for a strategy that needs one.
    pub fn command_line(&self, argv: &[String]) -> Option<String> {
        if self.name == "drop" {
            return Some(format!("start it as it is: {}", argv.join(" ")));
        }
        if !self.works_from_outside() {
            return None;
        }
        let mut words: Vec<String> = Vec::new();
        if let Some(library) = self.allocator.library() {
            words.push(format!("LD_PRELOAD={library}"));
        }
        words.extend(self.env.iter().map(|(k, v)| format!("{k}={v}")));
        words.extend(argv.iter().cloned());
        Some(words.join(" "))
    }

    /// What to set where the program lives for this strategy, one line:
    /// an environment line, an `LD_PRELOAD=` line, or the calls to make.
    pub fn setting(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        let mut environment: Vec<String> = Vec::new();
        if let Some(library) = self.allocator.library() {
            environment.push(format!("LD_PRELOAD={library}"));
        }
        environment.extend(self.env.iter().map(|(k, v)| format!("{k}={v}")));
        if !environment.is_empty() {
            parts.push(format!(
                "{} (in the environment at start)",
                environment.join(" ")
            ));
        }
        match self.start {
            StartAction::None => {}
            StartAction::MalloptMmapThreshold(bytes) => parts.push(format!(
                "ctypes.CDLL(\"libc.so.6\").mallopt(-3, {bytes}) (M_MMAP_THRESHOLD) before the first load"
            )),
            StartAction::ProgramOnly(steps) => parts.push(format!("at start: {}", calls(steps))),
        }
        match self.weights {
            WeightFiles::AsScenario => {}
            WeightFiles::DropCached => parts.push(
                "os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED) on each weight file after \
                 the load and after the unload"
                    .to_string(),
            ),
            WeightFiles::Read => parts.push(
                "read the weight files (safetensors.torch.load(f.read())) instead of mapping them"
                    .to_string(),
            ),
        }
        match self.sleep {
            SleepMode::None => {}
            SleepMode::Offload => {
                parts.push("sleep: model.to(\"cpu\"); wake: model.to(\"cuda\")".to_string())
            }
            SleepMode::OffloadPinned => parts.push(
                "sleep: copy the weights into pinned host buffers (tensor.pin_memory()); wake: \
                 copy them back"
                    .to_string(),
            ),
            SleepMode::Reload => parts
                .push("sleep: del model; wake: load the model again from its files".to_string()),
        }
        if let Some(release) = self.release_call() {
            parts.push(release);
        }
        if parts.is_empty() {
            // Nothing but the drop itself (`drop`).
            parts.push("del model; gc.collect()".to_string());
        }
        parts.join("; ")
    }

    /// The call after the drop, if the strategy makes one.
    fn release_call(&self) -> Option<String> {
        let text = match self.release {
            ReleaseAction::None => return None,
            ReleaseAction::MallocTrim => {
                "after the drop: ctypes.CDLL(\"libc.so.6\").malloc_trim(0) (or memrel.release())"
                    .to_string()
            }
            ReleaseAction::AllocatorRelease => format!(
                "after the drop: {} (or memrel.release())",
                match self.allocator {
                    Allocator::Jemalloc => "mallctl(\"arena.4096.purge\", NULL, NULL, NULL, 0)",
                    Allocator::Tcmalloc => "MallocExtension_ReleaseFreeMemory()",
                    Allocator::Mimalloc => "mi_collect(true)",
                    Allocator::Glibc => "ctypes.CDLL(\"libc.so.6\").malloc_trim(0)",
                }
            ),
            ReleaseAction::Respawn => {
                "end the process after the unload and start a fresh one for the next model"
                    .to_string()
            }
            ReleaseAction::CudaSync => "after the drop: torch.cuda.synchronize()".to_string(),
            ReleaseAction::CudaPoolTrim => {
                "after the drop: torch.cuda.synchronize(); torch.cuda.empty_cache()".to_string()
            }
            ReleaseAction::CudaToCpu => {
                "before the drop: model.to(\"cpu\"); then torch.cuda.synchronize()".to_string()
            }
            ReleaseAction::CudaDeviceDrop => {
                "after the drop: drop every handle to the CUDA device, then synchronize".to_string()
            }
            ReleaseAction::CudaContextRelease => {
                "after the drop: cuDevicePrimaryCtxRelease(device) until the context is inactive"
                    .to_string()
            }
            ReleaseAction::ProgramOnly(steps) => format!("after the drop: {}", calls(steps)),
        };
        Some(text)
    }
}

/// The Python calls of step names, in order (an unknown name as it is).
fn calls(steps: &[&str]) -> String {
    steps
        .iter()
        .map(|s| {
            // A step with a value (`xla_env=VARIABLE:VALUE`) has its name's call.
            let name = s.split('=').next().unwrap_or(s);
            program_step_call(name).map_or_else(|| s.to_string(), str::to_string)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::super::{all, lookup};

    #[test]
    fn every_strategy_has_a_setting() {
        for s in all() {
            let text = s.setting();
            assert!(!text.trim().is_empty(), "{}: no setting", s.name);
            for (key, value) in s.env {
                assert!(
                    text.contains(&format!("{key}={value}")),
                    "{}: {text}",
                    s.name
                );
            }
            if let Some(library) = s.allocator.library() {
                assert!(
                    text.contains(&format!("LD_PRELOAD={library}")),
                    "{}: {text}",
                    s.name
                );
            }
        }
    }

    #[test]
    fn settings_are_what_a_program_writes() {
        let of = |name: &str| lookup(name).map(|s| s.setting()).unwrap_or_default();
        assert!(of("trim-threshold-env").starts_with("MALLOC_TRIM_THRESHOLD_=-1"));
        assert!(of("malloc-trim").contains("ctypes.CDLL(\"libc.so.6\").malloc_trim(0)"));
        assert!(of("malloc-trim").contains("memrel.release()"));
        assert!(of("empty-cache").contains("torch.cuda.empty_cache()"));
        assert!(of("destroy-pg").contains("torch.distributed.destroy_process_group()"));
        assert!(of("jemalloc-decay0").starts_with("LD_PRELOAD=libjemalloc.so.2 MALLOC_CONF="));
        assert!(
            of("fadvise-dontneed").contains("os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)")
        );
        assert_eq!(of("drop"), "del model; gc.collect()");
        // A strategy with a value (what `memrel advise` prints for it).
        assert!(of("xla-mem-fraction").starts_with("XLA_PYTHON_CLIENT_MEM_FRACTION=0.25 "));
        assert!(of("xla-mem-fraction=0.40").starts_with("XLA_PYTHON_CLIENT_MEM_FRACTION=0.40 "));
    }
}
