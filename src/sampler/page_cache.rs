//! The model files' page cache as a resource: how many bytes of the weight
//! files the kernel holds in its page cache, whoever holds the files open.
//!
//! Why it matters: after an unload RSS falls, but the pages the weights were
//! read through stay cached, and a cgroup's `memory.current` (what a
//! container's limit and Kubernetes' working set count) charges them to the
//! process that read them. No RSS number shows them once the mapping is gone.
//!
//! How: `cachestat(2)` (Linux ≥ 6.5) on the file, or where the kernel lacks
//! it, `mincore(2)` over a read-only shared mapping of the whole file (the
//! mapping faults nothing in: mincore only reports). Each reading opens the
//! file by its path and closes it again: memrel never holds a weights file
//! open between readings, so it never keeps a deleted file's pages alive
//! itself, and a file deleted (or replaced) during a run is noticed: the
//! reading says "not available" with the reason instead of counting the
//! pages of a file that is gone. A reading never stops the run.
//!
//! It must stay off the sampler's fast path: a reading walks every page of
//! the files (~2 ms for a cached 415 MiB file on the project's 2-core VM, by
//! cachestat from Python), so it reads on a thread of its own
//! ([`PageCacheProbe::spawn`]) every [`PERIOD`] and the sampler's tick only
//! takes the latest reading; the worker reads it at every phase edge (the
//! orchestrator on arrival, for edges that come without it).
//!
//! Both are probes of `probe::ResourceProbe`, into `Resource::PageCache`:
//! [`PageCacheReader`] (the sampler's tick: the latest reading of the
//! thread, if one came since the last tick) and [`PageCacheProbe`] (an
//! edge: read now, where the line carried none).
//!
//! Also here: [`drop_cached`], `posix_fadvise(POSIX_FADV_DONTNEED)` on a file,
//! which the parent uses to start every run of a scenario from the same cold
//! state and the `fadvise-dontneed` strategy's worker after load and unload;
//! and [`read_into_cache`], which starts every run of memrel's own worker
//! from the same warm state where the scenario does not evict.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::probe::{Got, Measured, ResourceProbe};
use crate::record::{Readings, Resource};

/// How often the sampler reads the page cache (phase edges are read besides).
pub const PERIOD: Duration = Duration::from_millis(100);

/// Set (to anything) to read as if the kernel had no cachestat(2): memrel's
/// own tests of the mincore path on a kernel that has it. Inert unless set.
pub const NO_CACHESTAT_ENV: &str = "MEMREL_NO_CACHESTAT";

/// `cachestat(2)`'s number: 451 in the generic syscall table every
/// architecture shares since Linux 6.5 (libc does not name it for glibc yet).
const SYS_CACHESTAT: libc::c_long = 451;

/// Which system call reads a file's cached bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Cachestat,
    Mincore,
}

impl Method {
    /// cachestat where the kernel has it (tried on `probe_file`), else
    /// mincore; the text says which, and why not cachestat.
    pub fn choose(probe_file: Option<&Path>) -> (Method, String) {
        let Some(path) = probe_file else {
            return (
                Method::Mincore,
                "mincore (no file to try cachestat on)".into(),
            );
        };
        if std::env::var_os(NO_CACHESTAT_ENV).is_some() {
            let enosys = io::Error::from_raw_os_error(libc::ENOSYS);
            let note = Method::fallback_note(&enosys);
            return (Method::Mincore, format!("{note} [{NO_CACHESTAT_ENV} set]"));
        }
        match File::open(path).and_then(|f| cachestat_bytes(&f)) {
            Ok(_) => (Method::Cachestat, "cachestat".into()),
            Err(e) => (Method::Mincore, Method::fallback_note(&e)),
        }
    }

    /// Why mincore is used when cachestat failed with `error`.
    pub fn fallback_note(error: &io::Error) -> String {
        match error.raw_os_error() {
            Some(libc::ENOSYS) => {
                "mincore (this kernel has no cachestat(2): it came in Linux 6.5)".into()
            }
            Some(libc::EPERM) => "mincore (cachestat(2) refused: EPERM, a seccomp filter?)".into(),
            _ => format!("mincore (cachestat(2) failed: {error})"),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Method::Cachestat => "cachestat",
            Method::Mincore => "mincore",
        }
    }
}

/// Reads the cached bytes of a fixed list of files; clones share the record
/// of the first failure (the sampler's copy and the orchestrator's).
#[derive(Debug, Clone)]
pub struct PageCacheProbe {
    files: Vec<Watched>,
    method: Method,
    /// mincore's per-page buffer ([`MINCORE_CHUNK_PAGES`]), made once.
    pages: Vec<u8>,
    failure: Arc<OnceLock<String>>,
}

/// A file and the inode it had when the probe was opened: a file replaced
/// under the same name is not the file the worker loaded.
#[derive(Debug, Clone)]
struct Watched {
    path: PathBuf,
    inode: Option<(u64, u64)>,
}

impl PageCacheProbe {
    /// A probe of `files` with `method` (see [`Method::choose`]).
    pub fn new(files: &[PathBuf], method: Method) -> PageCacheProbe {
        PageCacheProbe {
            files: files
                .iter()
                .map(|path| Watched {
                    path: path.clone(),
                    inode: std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino())),
                })
                .collect(),
            method,
            pages: vec![0; MINCORE_CHUNK_PAGES],
            failure: Arc::new(OnceLock::new()),
        }
    }

    pub fn method(&self) -> Method {
        self.method
    }

    /// The cached bytes of every file, summed; `Err`: why they cannot be
    /// counted now (the first such reason is also kept: [`PageCacheProbe::failure`]).
    pub fn read(&mut self) -> Result<u64, String> {
        let mut total = 0u64;
        for i in 0..self.files.len() {
            match self.read_file(i) {
                Ok(bytes) => total += bytes,
                Err(why) => {
                    let _ = self.failure.set(why.clone());
                    return Err(why);
                }
            }
        }
        Ok(total)
    }

    /// Reads on a thread of its own every [`PERIOD`] (longer where a reading
    /// takes more than a tenth of it: cachestat and mincore walk every page
    /// of the file, ~2 ms for a cached 415 MiB file on the project's VM), so
    /// the sampler's tick only takes the latest reading. `Err`: the thread
    /// could not be started.
    pub fn spawn(mut self) -> io::Result<PageCacheReader> {
        let latest = Arc::new(AtomicU64::new(NONE));
        let stop = Arc::new(AtomicBool::new(false));
        let (out, flag) = (Arc::clone(&latest), Arc::clone(&stop));
        let handle = std::thread::Builder::new()
            .name("memrel-page-cache".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    if let Ok(bytes) = self.read() {
                        out.store(bytes, Ordering::Relaxed);
                    }
                    let wait = PERIOD.max(started.elapsed() * 10);
                    let deadline = Instant::now() + wait;
                    while !flag.load(Ordering::Relaxed) && Instant::now() < deadline {
                        std::thread::park_timeout(deadline - Instant::now());
                    }
                }
            })?;
        Ok(PageCacheReader {
            latest,
            stop,
            handle: Some(handle),
        })
    }

    /// Why a reading failed, the first time one did (`None`: every one worked).
    pub fn failure(&self) -> Option<String> {
        self.failure.get().cloned()
    }

    fn read_file(&mut self, i: usize) -> Result<u64, String> {
        let watched = &self.files[i];
        let path = &watched.path;
        let file = File::open(path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => format!(
                "{} was deleted during the run: the pages of a deleted file cannot be counted \
                 (they are freed once the last process that maps it lets go)",
                path.display()
            ),
            _ => format!("cannot open {}: {e}", path.display()),
        })?;
        let meta = file
            .metadata()
            .map_err(|e| format!("cannot stat {}: {e}", path.display()))?;
        if watched
            .inode
            .is_some_and(|inode| inode != (meta.dev(), meta.ino()))
        {
            return Err(format!(
                "{} was replaced during the run (another file under its name): the pages \
                 of the file the worker loaded cannot be counted",
                path.display()
            ));
        }
        let result = match self.method {
            Method::Cachestat => cachestat_bytes(&file),
            Method::Mincore => mincore_bytes(&file, meta.len(), &mut self.pages),
        };
        result.map_err(|e| format!("{} of {} failed: {e}", self.method.name(), path.display()))
    }
}

/// "No new reading" in [`PageCacheReader`]'s slot.
const NONE: u64 = u64::MAX;

/// A [`PageCacheProbe`] reading on its own thread; the sampler takes each
/// reading once.
/// Dropping it stops the thread, as [`PageCacheReader::stop`] does.
pub struct PageCacheReader {
    latest: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    /// `None` once stopped.
    handle: Option<std::thread::JoinHandle<()>>,
}

impl PageCacheReader {
    /// The reading made since the last call, if any (one atomic swap: the
    /// sampler's tick stays cheap).
    pub fn take(&self) -> Option<u64> {
        let bytes = self.latest.swap(NONE, Ordering::Relaxed);
        (bytes != NONE).then_some(bytes)
    }

    /// Stops the thread and waits for it (at most one reading).
    pub fn stop(mut self) {
        self.stop_thread();
    }

    fn stop_thread(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(handle) = self.handle.take() {
            handle.thread().unpark();
            let _ = handle.join();
        }
    }
}

impl Drop for PageCacheReader {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

impl ResourceProbe for PageCacheReader {
    /// One atomic swap: the reading its thread made since the last tick.
    fn read(&mut self, _at: &Measured, into: &mut Readings) -> Got {
        if into.get(Resource::PageCache).is_some() {
            return Got::Kept;
        }
        match self.take() {
            Some(bytes) => {
                into.set(Resource::PageCache, bytes);
                Got::Read
            }
            None => Got::Nothing,
        }
    }

    fn how(&self) -> String {
        "the model files' page cache, read on its own thread".into()
    }
}

impl ResourceProbe for PageCacheProbe {
    /// Read now (each file opened, counted and closed).
    fn read(&mut self, _at: &Measured, into: &mut Readings) -> Got {
        if into.get(Resource::PageCache).is_some() {
            return Got::Kept;
        }
        match PageCacheProbe::read(self) {
            Ok(bytes) => {
                into.set(Resource::PageCache, bytes);
                Got::Read
            }
            Err(_) => Got::Nothing,
        }
    }

    fn how(&self) -> String {
        format!("the model files' page cache ({})", self.method.name())
    }
}

/// The bytes of `file` in the page cache, by cachestat(2): cached pages × page size.
pub fn cachestat_bytes(file: &File) -> io::Result<u64> {
    /// `struct cachestat_range` (linux/mman.h).
    #[repr(C)]
    struct Range {
        off: u64,
        len: u64,
    }
    /// `struct cachestat` (linux/mman.h), in pages.
    #[repr(C)]
    #[derive(Default)]
    struct Cachestat {
        nr_cache: u64,
        nr_dirty: u64,
        nr_writeback: u64,
        nr_evicted: u64,
        nr_recently_evicted: u64,
    }
    // len 0: from `off` to the end of the file.
    let range = Range { off: 0, len: 0 };
    let mut stat = Cachestat::default();
    // SAFETY: cachestat reads one `cachestat_range` and writes one `cachestat`
    // through the pointers, both live locals of the kernel's layout; the
    // descriptor is open for the call's duration.
    let rc = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            file.as_raw_fd(),
            &range as *const Range,
            &mut stat as *mut Cachestat,
            0u32,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(stat.nr_cache * super::procfs::page_size())
}

/// Pages mincore reports on per call (64 MiB of 4 KiB pages): the probe's
/// one buffer, made when it is opened, whatever the size of the files. The
/// worker reads at its edges too, and a buffer growing with the model would
/// be memory of the worker's own, made between its phases.
pub const MINCORE_CHUNK_PAGES: usize = 16 * 1024;

/// The bytes of `file` (`len` bytes long) in the page cache, by mincore(2)
/// over a read-only shared mapping, which faults nothing in, a chunk of
/// `pages.len()` pages at a time.
pub fn mincore_bytes(file: &File, len: u64, pages: &mut [u8]) -> io::Result<u64> {
    if len == 0 {
        return Ok(0);
    }
    if pages.is_empty() {
        return Err(io::Error::other(
            "mincore needs a buffer of at least one page",
        ));
    }
    let page = super::procfs::page_size();
    let len = usize::try_from(len).map_err(|_| io::Error::other("file too large to map"))?;
    // SAFETY: a fresh read-only shared mapping of an open file; the kernel
    // chooses the address; it is unmapped below on every path.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let chunk_bytes = pages.len() * page as usize;
    let mut resident = 0u64;
    let mut error = None;
    let mut offset = 0usize;
    while offset < len {
        let span = chunk_bytes.min(len - offset);
        let n_pages = span.div_ceil(page as usize);
        // SAFETY: `addr + offset .. + span` lies inside the mapping made above
        // (offset is a multiple of the page size); `pages` has at least
        // `n_pages` bytes, one per page, as mincore writes.
        let rc = unsafe {
            libc::mincore(
                addr.cast::<u8>().add(offset).cast(),
                span,
                pages.as_mut_ptr(),
            )
        };
        if rc != 0 {
            error = Some(io::Error::last_os_error());
            break;
        }
        resident += pages[..n_pages].iter().filter(|&&b| b & 1 == 1).count() as u64;
        offset += span;
    }
    // SAFETY: unmaps exactly the mapping made above; nothing points into it.
    unsafe { libc::munmap(addr, len) };
    match error {
        Some(e) => Err(e),
        None => Ok(resident * page),
    }
}

/// Drops `path`'s clean pages from the page cache
/// (`posix_fadvise(POSIX_FADV_DONTNEED)`); pages still mapped by a process
/// stay (the kernel skips them), so call it after the mapping is dropped.
/// Dirty pages (a checkpoint just written) are written back first: the
/// kernel drops only clean ones.
pub fn drop_cached(path: &Path) -> Result<(), String> {
    let file = File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    file.sync_data().map_err(|e| {
        format!(
            "cannot write back {} before dropping it: {e}",
            path.display()
        )
    })?;
    // SAFETY: posix_fadvise only advises the kernel about an open descriptor.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(format!(
            "posix_fadvise(DONTNEED) on {} failed: {}",
            path.display(),
            io::Error::from_raw_os_error(rc)
        ));
    }
    Ok(())
}

/// Reads each of `files` through once, so their pages are in the page
/// cache (as far as memory holds them), and says how much of them is cached
/// after ([`PageCacheProbe::read`]). Files already cached whole are not
/// read again.
pub fn read_into_cache(files: &[PathBuf]) -> Result<CachedFiles, String> {
    let (method, _) = Method::choose(files.first().map(PathBuf::as_path));
    let mut probe = PageCacheProbe::new(files, method);
    let mut total_bytes = 0u64;
    for path in files {
        total_bytes += std::fs::metadata(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?
            .len();
    }
    if probe.read()? < total_bytes {
        for path in files {
            let file =
                File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
            let mut reader = io::BufReader::with_capacity(1 << 20, file);
            io::copy(&mut reader, &mut io::sink())
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        }
    }
    Ok(CachedFiles {
        cached_bytes: probe.read()?,
        total_bytes,
    })
}

/// The model files' bytes in the page cache, of their size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachedFiles {
    pub cached_bytes: u64,
    pub total_bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A file of `mib` MiB on the disk (not tmpfs: fadvise cannot evict
    /// tmpfs pages), written and synced so its pages are clean.
    fn weights(mib: usize) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/target")).unwrap();
        let path = dir.path().join("model.safetensors");
        let mut f = File::create(&path).unwrap();
        let block: Vec<u8> = (0..1024 * 1024).map(|i| (i % 251) as u8).collect();
        for _ in 0..mib {
            f.write_all(&block).unwrap();
        }
        f.sync_all().unwrap();
        (dir, path)
    }

    const MIB: u64 = 1024 * 1024;

    #[test]
    fn mincore_and_cachestat_agree_and_dontneed_empties_the_cache() {
        let (_dir, path) = weights(8);
        std::fs::read(&path).unwrap();
        let file = File::open(&path).unwrap();
        // A 3-page buffer: the file is read in many chunks.
        let mut pages = vec![0u8; 3];
        let by_mincore = mincore_bytes(&file, 8 * MIB, &mut pages).unwrap();
        assert_eq!(by_mincore, 8 * MIB, "a file just read is all cached");
        match cachestat_bytes(&file) {
            Ok(bytes) => assert_eq!(bytes, by_mincore),
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::ENOSYS), "{e}"),
        }
        drop_cached(&path).unwrap();
        let after = mincore_bytes(&file, 8 * MIB, &mut pages).unwrap();
        assert!(
            after < MIB,
            "DONTNEED left {after} bytes of a clean file cached"
        );
    }

    #[test]
    fn a_probe_sums_its_files_by_either_method() {
        let (_a, first) = weights(2);
        let (_b, second) = weights(3);
        for method in [Method::Mincore, Method::choose(Some(&first)).0] {
            let files = [first.clone(), second.clone()];
            for f in &files {
                std::fs::read(f).unwrap();
            }
            let mut probe = PageCacheProbe::new(&files, method);
            assert_eq!(probe.read(), Ok(5 * MIB), "{method:?}");
            assert_eq!(probe.failure(), None);
            let reader = probe.spawn().unwrap();
            let deadline = Instant::now() + Duration::from_secs(10);
            let first = loop {
                if let Some(bytes) = reader.take() {
                    break bytes;
                }
                assert!(Instant::now() < deadline, "no reading from the thread");
                std::thread::sleep(Duration::from_millis(5));
            };
            assert_eq!(first, 5 * MIB);
            assert_eq!(reader.take(), None, "each reading is taken once");
            reader.stop();
        }
    }

    #[test]
    fn a_deleted_file_is_not_available_with_the_reason() {
        let (_dir, path) = weights(1);
        let mut probe = PageCacheProbe::new(std::slice::from_ref(&path), Method::Mincore);
        let edge_probe = probe.clone();
        assert!(probe.read().is_ok());
        std::fs::remove_file(&path).unwrap();
        let why = probe.read().unwrap_err();
        assert!(why.contains("was deleted during the run"), "{why}");
        assert_eq!(edge_probe.failure(), Some(why), "clones share the failure");
    }

    #[test]
    fn a_replaced_file_is_not_the_loaded_one() {
        let (_dir, path) = weights(1);
        let mut probe = PageCacheProbe::new(std::slice::from_ref(&path), Method::Mincore);
        let other = path.with_extension("new");
        std::fs::write(&other, b"not the weights").unwrap();
        std::fs::rename(&other, &path).unwrap();
        let why = probe.read().unwrap_err();
        assert!(why.contains("was replaced during the run"), "{why}");
    }

    #[test]
    fn a_kernel_without_cachestat_falls_back_to_mincore_and_says_why() {
        let note = Method::fallback_note(&io::Error::from_raw_os_error(libc::ENOSYS));
        assert!(
            note.starts_with("mincore") && note.contains("Linux 6.5"),
            "{note}"
        );
        let (method, note) = Method::choose(Some(Path::new("/nonexistent/model.safetensors")));
        assert_eq!(method, Method::Mincore);
        assert!(note.contains("cachestat(2) failed"), "{note}");
    }
}
