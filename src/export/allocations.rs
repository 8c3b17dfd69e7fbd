//! The console's lines of `--trace-allocations`: for each run, the sites
//! tracemalloc saw still holding memory at its last snapshot (the last
//! cycle's release end, else its unload end), largest first, a few of
//! them; allocations.csv has every snapshot's 20. Formats the rows of
//! `record::allocations`; computes nothing.

use std::fmt::Write;

use crate::record::allocations::{last_of_each_run, Site, ALLOCATIONS_FILE};
use crate::textutil::{format_mib, mib};

/// Sites shown per run.
pub const SITES_SHOWN: usize = 3;

/// The lines, each run's last snapshot; empty when there are no sites.
pub fn console(sites: &[Site]) -> String {
    let mut out = String::new();
    let runs = last_of_each_run(sites);
    if runs.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "\nstill held where it was allocated (tracemalloc: Python objects and numpy arrays; {ALLOCATIONS_FILE}):"
    );
    for group in runs {
        let Some(first) = group.first() else {
            continue;
        };
        let _ = writeln!(
            out,
            "  run {} ({}, repetition {}), cycle {} after the {}: {} MiB traced held since the load began (tracemalloc's own {})",
            first.run,
            first.strategy,
            first.repetition,
            first.cycle,
            first.edge,
            mib(first.traced_bytes as f64),
            format_mib(first.tracemalloc_bytes)
        );
        for site in group.iter().take(SITES_SHOWN) {
            let _ = writeln!(
                out,
                "    {:>10}  {}:{} ({} block{})",
                format_mib(site.bytes),
                site.file,
                site.line,
                site.count,
                if site.count == 1 { "" } else { "s" }
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_run_shows_its_last_snapshots_largest_sites() {
        let site = |run, edge: &str, line, bytes| Site {
            run,
            strategy: "drop".into(),
            repetition: run,
            cycle: 2,
            edge: edge.into(),
            file: "prog.py".into(),
            line,
            bytes,
            count: 1,
            traced_bytes: 80 << 20,
            tracemalloc_bytes: 1 << 20,
        };
        assert_eq!(console(&[]), "");
        let text = console(&[
            site(1, "unload", 3, 99 << 20),
            site(1, "release", 4, 48 << 20),
            site(1, "release", 5, 1 << 20),
            site(1, "release", 6, 32 << 20),
            site(1, "release", 7, 2 << 20),
            site(2, "unload", 3, 5 << 20),
        ]);
        let want = "
still held where it was allocated (tracemalloc: Python objects and numpy arrays; allocations.csv):
  run 1 (drop, repetition 1), cycle 2 after the release: 80.0 MiB traced held since the load began (tracemalloc's own 1.0 MiB)
      48.0 MiB  prog.py:4 (1 block)
      32.0 MiB  prog.py:6 (1 block)
       2.0 MiB  prog.py:7 (1 block)
  run 2 (drop, repetition 2), cycle 2 after the unload: 80.0 MiB traced held since the load began (tracemalloc's own 1.0 MiB)
       5.0 MiB  prog.py:3 (1 block)
";
        assert_eq!(text, want);
    }
}
