//! Reading the memory of a program's whole process tree: the program plus
//! every descendant (e.g. PyTorch data-loader workers, `subprocess` helpers).
//!
//! [`super::procfs::StatmProbe`] reads one process. Summing RSS over a tree is
//! wrong as soon as its processes share pages: a parent that allocates 1 GiB
//! and forks four workers that only read it has 5 GiB of summed RSS and 1 GiB
//! of memory in use. After a `fork` every page is shared copy-on-write, so this
//! is the normal case for worker pools, not an edge case.
//!
//! # How shared pages are counted once
//!
//! The probe sums PSS (proportional set size) over the tree. The kernel counts
//! a page mapped by `n` processes as `1/n` page in each one's PSS, so the sum
//! over all `n` processes is exactly one page. When every process mapping the
//! page is in the tree, the tree's sum counts it exactly once. A page also
//! mapped by processes outside the tree (shared libraries, another program's
//! shared memory) counts only for the tree's share of it; that is the
//! tree's fair share, and it never counts a page twice.
//!
//! Fields, from `/proc/PID/smaps_rollup` (kB, summed over the tree):
//! - `rss_bytes` = `Pss`;
//! - `anon_bytes` = `Pss_Anon`;
//! - `file_bytes` = `Pss_File` + `Pss_Shmem`. Shmem (tmpfs, `memfd`, SysV and
//!   shared anonymous mappings) goes with file because that is how the
//!   single-process probe splits it: statm's `shared` is RssFile + RssShmem,
//!   so `anon_bytes` means anonymous memory other than shmem in both probes.
//!
//! Older kernels (`smaps_rollup` itself dates from 4.14; the `Pss_Anon`,
//! `Pss_File` and `Pss_Shmem` components came later, in the 5.x series) lack
//! the split. The probe detects that per process from the file itself (no
//! version check) and then splits `Pss` in the proportion of the Rss fields
//! of the same file: anon = `Pss` × `Anonymous` / `Rss`, file = `Pss` − anon.
//! The total (`rss_bytes`) stays exact; the split is an estimate, off where a
//! process's anon and file pages are shared to different degrees.
//!
//! # Finding the tree
//!
//! Descendants are found at every reading (workers come and go) by reading
//! `/proc/PID/task/TID/children` for every thread of every process found so
//! far, starting at the root. That file needs `CONFIG_PROC_CHILDREN`; where
//! the root has none, the probe instead scans `/proc/*/stat` for parent pids
//! and walks down from the root. A process whose parent exits is re-parented
//! to init (or a subreaper) and leaves the tree, unless memrel adopts it:
//! for a tree memrel started (`exec --tree`) memrel is a child subreaper and
//! counts the orphans it adopted as the tree's (`super::orphans`). Processes that exit between
//! being listed and being read are skipped without an error; zombies have no
//! memory and are skipped the same way.
//!
//! # Cost per reading
//!
//! Far more than statm's ~1 µs, and it grows with the tree's memory:
//! `smaps_rollup` walks every mapping and page table entry of the process
//! (with its mmap lock held for reading). Measured on a loaded 2-core VM,
//! Linux 6.18, 4 KiB pages: ~60 µs for a `sleep`, ~0.4 ms for a bare python3,
//! then ~17 µs per MiB resident (~1.1 ms at 79 MiB, ~18 ms at 1 GiB), once
//! per process in the tree. Finding the tree adds one directory listing per
//! process and one small read per thread (~30 µs each here) with the
//! children file, or one `/proc/N/stat` read per process on the whole system
//! with the scan (~1.1 ms for ~90 processes here). So at a 1–10 ms interval
//! a tree holding GiBs cannot be read at the interval; the sampler then
//! reads back to back. Path and read buffers are reused; the only
//! per-reading allocations are the directory iterators' entries.
//!
//! # As the host probe
//!
//! As a [`ResourceProbe`] it is the host probe of a tree: its sum replaces
//! whatever host reading the map holds (at an edge, one process's reading
//! sent on the line is not the tree's), and its processes at the latest
//! reading are what every other probe measures (`Probe::measured`).

use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::{self, Read};

use std::collections::BTreeSet;

use super::orphans;
use super::probe::{Got, Measured, ResourceProbe};
use super::Reading;
use crate::record::Readings;

/// How the probe finds the root's descendants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Discovery {
    /// `/proc/PID/task/TID/children` (`CONFIG_PROC_CHILDREN`).
    ChildrenFiles,
    /// Parent pids from every `/proc/N/stat`.
    StatScan,
}

/// One process's memory, in kB as `smaps_rollup` prints it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct RollupKib {
    rss_kib: u64,
    pss_kib: u64,
    anonymous_kib: u64,
    pss_anon_kib: Option<u64>,
    pss_file_kib: Option<u64>,
    pss_shmem_kib: Option<u64>,
}

impl RollupKib {
    /// Bytes of this process's share, split as the module doc says.
    fn reading(&self) -> Reading {
        let pss_bytes = self.pss_kib * 1024;
        let anon_bytes = match self.pss_anon_kib {
            Some(anon_kib) => anon_kib * 1024,
            // Older kernels: divide Pss in the proportion of the Rss split.
            None if self.rss_kib > 0 => {
                let anon = u128::from(pss_bytes) * u128::from(self.anonymous_kib.min(self.rss_kib))
                    / u128::from(self.rss_kib);
                u64::try_from(anon).unwrap_or(pss_bytes)
            }
            None => 0,
        };
        let file_bytes = match (self.pss_anon_kib, self.pss_file_kib) {
            (Some(_), Some(file_kib)) => (file_kib + self.pss_shmem_kib.unwrap_or(0)) * 1024,
            _ => pss_bytes.saturating_sub(anon_bytes),
        };
        Reading {
            rss_bytes: pss_bytes,
            anon_bytes,
            file_bytes,
        }
    }
}

/// Parses the fields of `smaps_rollup` this probe uses; `None` without `Pss`.
fn parse_smaps_rollup(text: &str) -> Option<RollupKib> {
    let mut out = RollupKib::default();
    let mut has_pss = false;
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let field = match key {
            "Rss" => &mut out.rss_kib,
            "Pss" => {
                has_pss = true;
                &mut out.pss_kib
            }
            "Anonymous" => &mut out.anonymous_kib,
            "Pss_Anon" => out.pss_anon_kib.insert(0),
            "Pss_File" => out.pss_file_kib.insert(0),
            "Pss_Shmem" => out.pss_shmem_kib.insert(0),
            _ => continue,
        };
        *field = rest.trim().trim_end_matches("kB").trim_end().parse().ok()?;
    }
    has_pss.then_some(out)
}

/// The parent pid in the text of `/proc/N/stat` (`pid (comm) state ppid ...`;
/// comm may hold spaces and parentheses, so fields count from the last `)`).
fn parse_stat_ppid(text: &str) -> Option<u32> {
    let after_comm = &text[text.rfind(')')? + 1..];
    after_comm.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// Whether `pid` is a process that has not exited: its /proc stat reads
/// and its state is neither zombie (`Z`) nor dead (`X`).
fn alive(pid: u32) -> bool {
    let Ok(text) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = text
        .rfind(')')
        .and_then(|i| text[i + 1..].split_ascii_whitespace().next());
    !matches!(state, None | Some("Z") | Some("X") | Some("x"))
}

/// The memory of a process and all its descendants, shared pages counted once.
pub struct TreeProbe {
    root: u32,
    /// The root's parent when the probe opened (memrel, for a tree it
    /// started: then the orphans memrel adopts are the tree's, `orphans`).
    root_ppid: Option<u32>,
    /// Every process the tree has held (which orphans are its, `orphans`).
    seen: BTreeSet<u32>,
    discovery: Discovery,
    /// The tree at the last reading, root first, parents before children.
    pids: Vec<u32>,
    /// Each of `pids`' own reading at the last reading (their sum is it).
    own: Vec<Reading>,
    /// (pid, ppid) of every process on the system, for [`Discovery::StatScan`].
    parents: Vec<(u32, u32)>,
    path: String,
    text: String,
}

impl TreeProbe {
    /// A probe for `root` and its descendants; fails if the root's
    /// `smaps_rollup` cannot be read (no such process, no permission, a
    /// zombie, or a kernel older than 4.14).
    pub fn open(root: u32) -> io::Result<TreeProbe> {
        let mut probe = TreeProbe {
            root,
            root_ppid: None,
            seen: BTreeSet::from([root]),
            discovery: Discovery::StatScan,
            pids: Vec::with_capacity(16),
            own: Vec::with_capacity(16),
            parents: Vec::new(),
            path: String::with_capacity(64),
            text: String::with_capacity(2048),
        };
        probe.read_rollup(root)?;
        set_path(&mut probe.path, root, root, "children");
        if fs::metadata(&probe.path).is_ok() {
            probe.discovery = Discovery::ChildrenFiles;
        }
        probe.root_ppid = fs::read_to_string(format!("/proc/{root}/stat"))
            .ok()
            .and_then(|stat| parse_stat_ppid(&stat));
        orphans::register(root);
        Ok(probe)
    }

    /// One reading: the sum over the tree as it is now. An error once the
    /// root is gone (or a zombie); descendants that are gone are skipped.
    pub fn read(&mut self) -> io::Result<Reading> {
        let root = self.read_rollup(self.root)?.reading();
        self.find_tree();
        let mut total = root;
        self.own.clear();
        self.own.push(root);
        let mut kept = 1;
        for i in 1..self.pids.len() {
            let pid = self.pids[i];
            // Any error here means the process exited (or became a zombie)
            // after it was listed: it has no memory left to count.
            let Ok(rollup) = self.read_rollup(pid) else {
                continue;
            };
            let r = rollup.reading();
            total.rss_bytes += r.rss_bytes;
            total.anon_bytes += r.anon_bytes;
            total.file_bytes += r.file_bytes;
            self.pids[kept] = pid;
            self.own.push(r);
            kept += 1;
        }
        self.pids.truncate(kept);
        Ok(total)
    }

    /// The processes counted at the last reading, root first.
    pub fn pids(&self) -> &[u32] {
        &self.pids
    }

    /// Each process counted at the last reading with its own share (PSS),
    /// root first: what the tree's sum is made of.
    pub fn processes(&self) -> impl Iterator<Item = (u32, Reading)> + '_ {
        self.pids.iter().copied().zip(self.own.iter().copied())
    }

    fn read_rollup(&mut self, pid: u32) -> io::Result<RollupKib> {
        self.path.clear();
        let _ = write!(self.path, "/proc/{pid}/smaps_rollup");
        self.text.clear();
        File::open(&self.path)?.read_to_string(&mut self.text)?;
        parse_smaps_rollup(&self.text)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unreadable smaps_rollup"))
    }

    /// Fills `pids` with the root and its descendants, breadth first; then,
    /// where memrel adopts the tree's orphans (`orphans`), those of its
    /// children that are the tree's, and their descendants.
    fn find_tree(&mut self) {
        self.pids.clear();
        self.pids.push(self.root);
        if self.discovery == Discovery::StatScan {
            self.scan_parents();
        }
        self.descend(0);
        if let Some(me) = orphans::adopter(self.root_ppid) {
            let children = self.children_of(me);
            let from = self.pids.len();
            for orphan in orphans::adopted(self.root, &self.seen, &children) {
                if !self.pids.contains(&orphan) {
                    self.pids.push(orphan);
                }
            }
            self.descend(from);
        }
        self.seen.extend(self.pids.iter().copied());
    }

    /// Adds the descendants of `pids[from..]`.
    fn descend(&mut self, from: usize) {
        match self.discovery {
            Discovery::ChildrenFiles => self.find_by_children_files(from),
            Discovery::StatScan => self.find_by_stat_scan(from),
        }
    }

    /// The children of `pid` now (every thread's).
    fn children_of(&mut self, pid: u32) -> Vec<u32> {
        match self.discovery {
            Discovery::StatScan => self
                .parents
                .iter()
                .filter(|&&(_, ppid)| ppid == pid)
                .map(|&(child, _)| child)
                .collect(),
            Discovery::ChildrenFiles => {
                let mut direct = Vec::new();
                self.path.clear();
                let _ = write!(self.path, "/proc/{pid}/task");
                let Ok(tasks) = fs::read_dir(&self.path) else {
                    return direct;
                };
                for task in tasks.flatten() {
                    let Some(tid) = task.file_name().to_str().and_then(|s| s.parse().ok()) else {
                        continue;
                    };
                    set_path(&mut self.path, pid, tid, "children");
                    if let Ok(text) = fs::read_to_string(&self.path) {
                        direct.extend(
                            text.split_ascii_whitespace()
                                .filter_map(|c| c.parse::<u32>().ok()),
                        );
                    }
                }
                direct
            }
        }
    }

    fn find_by_children_files(&mut self, from: usize) {
        let mut i = from;
        while i < self.pids.len() {
            let pid = self.pids[i];
            i += 1;
            self.path.clear();
            let _ = write!(self.path, "/proc/{pid}/task");
            let Ok(tasks) = fs::read_dir(&self.path) else {
                continue; // exited
            };
            for task in tasks.flatten() {
                let Some(tid) = entry_id(&task) else {
                    continue;
                };
                set_path(&mut self.path, pid, tid, "children");
                self.text.clear();
                let read =
                    File::open(&self.path).and_then(|mut f| f.read_to_string(&mut self.text));
                if read.is_err() {
                    continue; // the thread exited
                }
                for child in self.text.split_ascii_whitespace() {
                    // Guards against a pid reused inside the tree while it
                    // was being walked (would otherwise loop).
                    if let Ok(child) = child.parse::<u32>() {
                        if !self.pids.contains(&child) {
                            self.pids.push(child);
                        }
                    }
                }
            }
        }
    }

    /// (pid, ppid) of every process on the system into `parents`.
    fn scan_parents(&mut self) {
        self.parents.clear();
        let Ok(entries) = fs::read_dir("/proc") else {
            return;
        };
        for entry in entries.flatten() {
            let Some(pid) = entry_id(&entry) else {
                continue;
            };
            self.path.clear();
            let _ = write!(self.path, "/proc/{pid}/stat");
            self.text.clear();
            let read = File::open(&self.path).and_then(|mut f| f.read_to_string(&mut self.text));
            if read.is_err() {
                continue; // exited
            }
            if let Some(ppid) = parse_stat_ppid(&self.text) {
                self.parents.push((pid, ppid));
            }
        }
    }

    fn find_by_stat_scan(&mut self, from: usize) {
        let mut i = from;
        while i < self.pids.len() {
            let parent = self.pids[i];
            i += 1;
            for &(pid, ppid) in &self.parents {
                if ppid == parent && pid != self.root && !self.pids.contains(&pid) {
                    self.pids.push(pid);
                }
            }
        }
    }
}

/// The number a /proc (or /proc/PID/task) entry is named by: a pid (a
/// tid); `None` for any other entry.
pub fn entry_id(entry: &fs::DirEntry) -> Option<u32> {
    entry.file_name().to_str().and_then(|s| s.parse().ok())
}

impl Drop for TreeProbe {
    fn drop(&mut self) {
        orphans::unregister(self.root);
    }
}

/// `/proc/PID/task/TID/NAME` into `path`.
fn set_path(path: &mut String, pid: u32, tid: u32, name: &str) {
    path.clear();
    let _ = write!(path, "/proc/{pid}/task/{tid}/{name}");
}

impl ResourceProbe for TreeProbe {
    /// [`Got::Gone`] only once the root has exited: a root that is alive
    /// but unreadable for an instant (its smaps_rollup read in the middle
    /// of an execve) is [`Got::Nothing`], a tick without a row, so a busy
    /// machine's unlucky tick never ends the samples.
    fn read(&mut self, _at: &Measured, into: &mut Readings) -> Got {
        match TreeProbe::read(self) {
            Ok(reading) => reading.put(into),
            Err(_) if alive(self.root) => Got::Nothing,
            Err(_) => Got::Gone,
        }
    }

    fn how(&self) -> String {
        "a process tree's PSS, summed (/proc/PID/smaps_rollup)".into()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_running_process_is_alive_and_a_zombie_or_a_reaped_one_is_not() {
        assert!(super::alive(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Exited, not yet reaped: a zombie.
        let zombie = (0..500).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            !super::alive(pid)
        });
        assert!(zombie, "{pid} still alive");
        child.wait().unwrap();
        assert!(!super::alive(pid));
    }

    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    const MIB: u64 = 1 << 20;

    /// Kills and reaps on drop, so a failed assertion leaves no process
    /// behind: first `descendants` (by pid; the test scripts' parents wait
    /// for them, so they are reaped there, not left to init), then `child`.
    struct Reaped {
        child: Child,
        descendants: Vec<u32>,
    }

    impl Reaped {
        fn new(child: Child) -> Reaped {
            Reaped {
                child,
                descendants: Vec::new(),
            }
        }
    }

    impl Drop for Reaped {
        fn drop(&mut self) {
            for &pid in &self.descendants {
                kill_pid(pid);
            }
            let deadline = Instant::now() + Duration::from_secs(2);
            while Instant::now() < deadline
                && self
                    .descendants
                    .iter()
                    .any(|pid| fs::metadata(format!("/proc/{pid}")).is_ok())
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    fn kill_pid(pid: u32) {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGKILL);
        }
    }

    /// A status-file field in bytes (e.g. "RssAnon").
    fn status_bytes(pid: u32, key: &str) -> u64 {
        let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .unwrap()
            .trim()
            .trim_end_matches(" kB")
            .parse()
            .unwrap();
        kib * 1024
    }

    #[test]
    fn parses_current_smaps_rollup() {
        let text = "5598ce8cd000-7ffc6f94d000 ---p 00000000 00:00 0    [rollup]\n\
                    Rss:                1608 kB\nPss:                 264 kB\n\
                    Pss_Dirty:           112 kB\nPss_Anon:            112 kB\n\
                    Pss_File:            150 kB\nPss_Shmem:             2 kB\n\
                    Anonymous:           112 kB\nSwapPss:               0 kB\n";
        let r = parse_smaps_rollup(text).unwrap().reading();
        assert_eq!(r.rss_bytes, 264 * 1024);
        assert_eq!(r.anon_bytes, 112 * 1024);
        assert_eq!(r.file_bytes, 152 * 1024);
    }

    #[test]
    fn parses_old_smaps_rollup_splitting_pss_by_rss() {
        // 4.14–5.7: no Pss_Anon/Pss_File/Pss_Shmem.
        let text = "00400000-7ffc6f94d000 ---p 00000000 00:00 0    [rollup]\n\
                    Rss:                1000 kB\nPss:                 500 kB\n\
                    Shared_Clean:        600 kB\nAnonymous:           400 kB\n";
        let r = parse_smaps_rollup(text).unwrap().reading();
        assert_eq!(r.rss_bytes, 500 * 1024);
        assert_eq!(r.anon_bytes, 200 * 1024);
        assert_eq!(r.file_bytes, 300 * 1024);
        assert!(parse_smaps_rollup("Rss: 4 kB\n").is_none());
        assert!(parse_smaps_rollup("Pss: x kB\n").is_none());
    }

    #[test]
    fn parses_ppid_after_odd_comm() {
        assert_eq!(parse_stat_ppid("42 (a) b (c) S 7 42 42 0"), Some(7));
        assert_eq!(parse_stat_ppid("1 (init) S 0 1 1"), Some(0));
        assert_eq!(parse_stat_ppid("garbage"), None);
    }

    #[test]
    fn finds_shell_and_its_two_children() {
        let shell = Command::new("sh")
            .args(["-c", "sleep 60 & sleep 60 & echo started; wait"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut procs = Reaped::new(shell);
        let root = procs.child.id();
        let mut line = String::new();
        BufReader::new(procs.child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let mut probe = TreeProbe::open(root).unwrap();
        // The sleeps may still be exec'ing: wait until both are found.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut reading = probe.read().unwrap();
        while probe.pids().len() < 3 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
            reading = probe.read().unwrap();
        }
        let pids = probe.pids().to_vec();
        procs.descendants = pids[1..].to_vec();
        for &pid in &pids[1..] {
            let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            assert!(
                comm.trim() == "sleep" || comm.trim() == "sh",
                "{pid} {comm}"
            );
        }
        assert_eq!(pids.len(), 3, "{pids:?}");
        assert_eq!(pids[0], root);
        assert!(reading.rss_bytes > 0);
        // The kernel rounds Pss and each of its parts to kB on its own, so
        // the parts may miss the total by a kB or two per process.
        let parts = reading.anon_bytes + reading.file_bytes;
        assert!(
            reading.rss_bytes.abs_diff(parts) <= 2048 * pids.len() as u64,
            "{reading:?}"
        );

        // Both ways of finding the tree find the same one.
        let discovery = probe.discovery;
        probe.discovery = Discovery::StatScan;
        probe.read().unwrap();
        let mut scanned = probe.pids().to_vec();
        scanned.sort_unstable();
        let mut expected = pids.clone();
        expected.sort_unstable();
        assert_eq!(scanned, expected);
        eprintln!("discovery here: {discovery:?}");

        // A child that exits is skipped, not an error.
        kill_pid(pids[2]);
        std::thread::sleep(Duration::from_millis(50));
        probe.discovery = discovery;
        probe.read().unwrap();
        assert!(!probe.pids().contains(&pids[2]), "{:?}", probe.pids());
        assert!(probe.pids().contains(&pids[1]));
    }

    #[test]
    fn vanished_root_is_an_error() {
        let mut gone = Command::new("true").spawn().unwrap();
        let gone_pid = gone.id();
        gone.wait().unwrap();
        assert!(TreeProbe::open(gone_pid).is_err());

        let mut procs = Reaped::new(Command::new("sleep").arg("60").spawn().unwrap());
        let mut probe = TreeProbe::open(procs.child.id()).unwrap();
        assert!(probe.read().unwrap().rss_bytes > 0);
        procs.child.kill().unwrap();
        procs.child.wait().unwrap();
        assert!(probe.read().is_err());
    }

    /// A python3 parent holding 64 MiB of touched anonymous memory and a
    /// forked child sharing it copy-on-write. Prints the child's pid; on a
    /// line on stdin the child writes every page of its copy, then prints.
    const COW_SCRIPT: &str = "\
import os, sys, time
b = bytearray(b'\\x01') * (64 << 20)
pid = os.fork()
if pid == 0:
    sys.stdin.readline()
    for i in range(0, len(b), 4096):
        b[i] = 2
    print('dirtied', flush=True)
    time.sleep(600)
else:
    print(pid, flush=True)
    os.waitpid(pid, 0)
";

    #[test]
    fn shared_copy_on_write_pages_count_once() {
        let spawned = Command::new("python3")
            .args(["-c", COW_SCRIPT])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn();
        let parent = match spawned {
            Ok(p) => p,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                eprintln!("python3 not found: skipped");
                return;
            }
            Err(e) => panic!("python3: {e}"),
        };
        let mut procs = Reaped::new(parent);
        let root = procs.child.id();
        let mut stdin = procs.child.stdin.take().unwrap();
        let mut stdout = BufReader::new(procs.child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let child: u32 = line.trim().parse().unwrap();
        // Not a Child of ours: killed by pid at the end, reaped by python.
        procs.descendants.push(child);

        let mut probe = TreeProbe::open(root).unwrap();
        let shared = probe.read().unwrap();
        assert_eq!(probe.pids()[0], root);
        assert!(probe.pids().contains(&child), "{:?}", probe.pids());
        let rss_anon_sum = status_bytes(root, "RssAnon") + status_bytes(child, "RssAnon");
        eprintln!(
            "shared: tree PSS anon {} MiB, file {} MiB, total {} MiB; RssAnon sum {} MiB",
            shared.anon_bytes / MIB,
            shared.file_bytes / MIB,
            shared.rss_bytes / MIB,
            rss_anon_sum / MIB
        );
        // 64 MiB once, plus the interpreter's own anon (a few MiB, also shared).
        assert!(
            shared.anon_bytes >= 62 * MIB && shared.anon_bytes <= 80 * MIB,
            "tree anon {} MiB",
            shared.anon_bytes / MIB
        );
        assert!(
            rss_anon_sum >= 128 * MIB,
            "RssAnon sum {}",
            rss_anon_sum / MIB
        );
        assert!(shared.anon_bytes + 48 * MIB < rss_anon_sum);

        stdin.write_all(b"go\n").unwrap();
        stdin.flush().unwrap();
        line.clear();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "dirtied");
        let private = probe.read().unwrap();
        let rise_bytes = private.anon_bytes - shared.anon_bytes;
        eprintln!(
            "after the child writes: tree PSS anon {} MiB (+{} MiB)",
            private.anon_bytes / MIB,
            rise_bytes / MIB
        );
        assert!(
            (56 * MIB..=72 * MIB).contains(&rise_bytes),
            "rise {} MiB",
            rise_bytes / MIB
        );
        assert!(private.rss_bytes - shared.rss_bytes >= 56 * MIB);
    }

    /// Microseconds per read(), for the module doc; prints, asserts nothing.
    /// `cargo test --release --lib sampler::tree::tests::read_cost -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn read_cost() {
        fn time(label: &str, probe: &mut TreeProbe) {
            for _ in 0..100 {
                probe.read().unwrap();
            }
            let n: u32 = 2000;
            let start = Instant::now();
            for _ in 0..n {
                std::hint::black_box(probe.read().unwrap());
            }
            let per_read_us = start.elapsed().as_secs_f64() * 1e6 / f64::from(n);
            eprintln!(
                "{label}: {} processes, {:?}: {per_read_us:.1} µs per read",
                probe.pids().len(),
                probe.discovery
            );
        }
        let one = Reaped::new(Command::new("sleep").arg("600").spawn().unwrap());
        let mut three = Reaped::new(
            Command::new("sh")
                .args(["-c", "sleep 600 & sleep 600 & wait"])
                .spawn()
                .unwrap(),
        );
        std::thread::sleep(Duration::from_millis(200));
        let roots = [("sleep", one.child.id()), ("sh+2 sleep", three.child.id())];
        for (label, pid) in roots {
            let mut probe = TreeProbe::open(pid).unwrap();
            probe.read().unwrap();
            if pid == three.child.id() {
                three.descendants = probe.pids()[1..].to_vec();
            }
            let discovery = probe.discovery;
            time(label, &mut probe);
            if discovery == Discovery::ChildrenFiles {
                probe.discovery = Discovery::StatScan;
                time(label, &mut probe);
            }
        }
        let mut python = Reaped::new(
            Command::new("python3")
                .args(["-c", COW_SCRIPT])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let mut line = String::new();
        BufReader::new(python.child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        python.descendants.push(line.trim().parse().unwrap());
        let mut probe = TreeProbe::open(python.child.id()).unwrap();
        time("python 64 MiB + fork", &mut probe);
        let mut statm = super::super::procfs::StatmProbe::open(one.child.id()).unwrap();
        let start = Instant::now();
        for _ in 0..2000 {
            std::hint::black_box(statm.read().unwrap());
        }
        eprintln!(
            "statm (for comparison): {:.1} µs per read",
            start.elapsed().as_secs_f64() * 1e6 / 2000.0
        );
    }
}
