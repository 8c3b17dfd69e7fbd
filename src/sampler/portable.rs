//! The portable fallback probe through sysinfo, for systems without Linux
//! procfs. It reports RSS only (no anon/file split), at ~40 µs per reading.
//! As a [`ResourceProbe`] it is the host probe of one process, as `procfs`'s.

use std::io;

use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};

use super::probe::{Got, Measured, ResourceProbe};
use super::Reading;
use crate::record::{Readings, Resource};

pub struct SysinfoProbe {
    system: System,
    pid: Pid,
}

impl SysinfoProbe {
    pub fn open(pid: u32) -> io::Result<SysinfoProbe> {
        let system = System::new().map_err(|e| io::Error::other(format!("sysinfo: {e}")))?;
        Ok(SysinfoProbe {
            system,
            pid: Pid::from_u32(pid),
        })
    }

    pub fn read(&mut self) -> io::Result<Reading> {
        self.system.refresh_processes_specifics(
            ProcessesToUpdate::Some(&[self.pid]),
            true,
            ProcessRefreshKind::nothing().with_memory(),
        );
        let process = self
            .system
            .process(self.pid)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "process gone"))?;
        let rss = process.memory();
        Ok(Reading {
            rss_bytes: rss,
            anon_bytes: rss,
            file_bytes: 0,
        })
    }
}

impl ResourceProbe for SysinfoProbe {
    fn read(&mut self, _at: &Measured, into: &mut Readings) -> Got {
        if into.get(Resource::Host).is_some() {
            return Got::Kept;
        }
        match SysinfoProbe::read(self) {
            Ok(reading) => reading.put(into),
            Err(_) => Got::Gone,
        }
    }

    fn how(&self) -> String {
        "one process's RSS (sysinfo)".into()
    }
}
