//! Which allocator serves this process's `malloc`, found out from inside, and
//! its own calls: the settings it really runs with, its view of its memory at
//! phase edges, and its forced release.
//!
//! Proof, not trust: the library is the one that defines the `malloc` the
//! dynamic linker resolves (`dlsym(RTLD_DEFAULT, "malloc")` + `dladdr`), it
//! must be mapped (`/proc/self/maps`), and it must answer a call only that
//! allocator has (jemalloc `mallctl`, tcmalloc `MallocExtension_*`, mimalloc
//! `mi_version`, glibc `gnu_get_libc_version`). Every function is looked up
//! at run time in that library, so memrel links none of them.

use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_long, c_void, CStr, CString};
use std::time::Instant;

use anyhow::{bail, Result};

use super::glibc;
use crate::protocol::{AllocatorReport, HeapStats};

/// jemalloc's `MALLCTL_ARENAS_ALL`: "every arena" in `arena.<i>.*` names.
const JEMALLOC_ARENAS_ALL: u32 = 4096;

/// mimalloc's option index of `purge_delay` (`decommit_delay` before 2.1): 15
/// in every 2.x release; other majors are not read.
const MIMALLOC_PURGE_DELAY_OPTION: c_int = 15;

type Mallctl =
    unsafe extern "C" fn(*const c_char, *mut c_void, *mut usize, *mut c_void, usize) -> c_int;
type TcGetNumericProperty = unsafe extern "C" fn(*const c_char, *mut usize) -> c_int;
type TcReleaseFreeMemory = unsafe extern "C" fn();
type TcInstance = unsafe extern "C" fn() -> *mut c_void;
type TcGetReleaseRate = unsafe extern "C" fn(*mut c_void) -> f64;
type TcVersion = unsafe extern "C" fn(*mut c_int, *mut c_int, *mut *const c_char) -> *const c_char;
type MiVersion = unsafe extern "C" fn() -> c_int;
type MiOptionGet = unsafe extern "C" fn(c_int) -> c_long;
type MiCollect = unsafe extern "C" fn(bool);
type MiProcessInfo = unsafe extern "C" fn(
    *mut usize,
    *mut usize,
    *mut usize,
    *mut usize,
    *mut usize,
    *mut usize,
    *mut usize,
    *mut usize,
);
type GnuVersion = unsafe extern "C" fn() -> *const c_char;

/// The allocator's own entry points, resolved in the library that serves `malloc`.
#[derive(Clone, Copy)]
enum Calls {
    Glibc,
    Jemalloc {
        mallctl: Mallctl,
    },
    Tcmalloc {
        property: TcGetNumericProperty,
        release: TcReleaseFreeMemory,
    },
    Mimalloc {
        version: c_int,
        collect: MiCollect,
        process_info: MiProcessInfo,
    },
    Unknown,
}

/// The allocator serving this process, identified once at worker start.
#[derive(Clone)]
pub struct Served {
    calls: Calls,
    pub report: AllocatorReport,
}

/// Identifies the allocator behind `malloc` and reads its settings back.
pub fn identify() -> Served {
    let library = malloc_library().unwrap_or_else(|| "<unknown>".into());
    let mapped = is_mapped(&library);
    let handle = open_loaded(&library);
    let mut settings = BTreeMap::new();
    let (name, version, calls) = match identify_calls(handle, &mut settings) {
        Some(found) => found,
        None => ("unknown", None, Calls::Unknown),
    };
    Served {
        calls,
        report: AllocatorReport {
            name: name.to_string(),
            version,
            library,
            mapped,
            settings,
        },
    }
}

/// Tries each allocator's signature call in `handle`.
fn identify_calls(
    handle: *mut c_void,
    settings: &mut BTreeMap<String, String>,
) -> Option<(&'static str, Option<String>, Calls)> {
    if handle.is_null() {
        return None;
    }
    // SAFETY (every `symbol` below): each name is looked up in the library
    // that serves malloc and cast to the signature its public header gives.
    if let Some(mallctl) = unsafe { symbol::<Mallctl>(handle, "mallctl") } {
        let version = mallctl_string(mallctl, "version");
        for key in [
            "opt.abort_conf",
            "opt.background_thread",
            "background_thread",
        ] {
            if let Some(v) = mallctl_read::<u8>(mallctl, key) {
                settings.insert(key.to_string(), (v != 0).to_string());
            }
        }
        for key in ["opt.dirty_decay_ms", "opt.muzzy_decay_ms"] {
            if let Some(v) = mallctl_read::<isize>(mallctl, key) {
                settings.insert(key.to_string(), v.to_string());
            }
        }
        if let Some(v) = mallctl_read::<u32>(mallctl, "opt.narenas") {
            settings.insert("opt.narenas".into(), v.to_string());
        }
        return Some(("jemalloc", version, Calls::Jemalloc { mallctl }));
    }
    let tc_property =
        unsafe { symbol::<TcGetNumericProperty>(handle, "MallocExtension_GetNumericProperty") };
    let tc_release =
        unsafe { symbol::<TcReleaseFreeMemory>(handle, "MallocExtension_ReleaseFreeMemory") };
    if let (Some(property), Some(release)) = (tc_property, tc_release) {
        let version = unsafe { symbol::<TcVersion>(handle, "tc_version") }.and_then(|f| {
            let (mut major, mut minor, mut patch) = (0, 0, std::ptr::null());
            // SAFETY: tc_version fills three out-pointers and returns a static string.
            let text = unsafe { f(&mut major, &mut minor, &mut patch) };
            c_text(text)
        });
        for key in [
            "tcmalloc.aggressive_memory_decommit",
            "tcmalloc.max_total_thread_cache_bytes",
        ] {
            if let Some(v) = tc_read(property, key) {
                let short = key.trim_start_matches("tcmalloc.");
                settings.insert(short.to_string(), v.to_string());
            }
        }
        if let Some(rate) = tc_release_rate(handle) {
            settings.insert("release_rate".into(), rate.to_string());
        }
        return Some(("tcmalloc", version, Calls::Tcmalloc { property, release }));
    }
    let mi = unsafe {
        (
            symbol::<MiVersion>(handle, "mi_version"),
            symbol::<MiCollect>(handle, "mi_collect"),
            symbol::<MiProcessInfo>(handle, "mi_process_info"),
            symbol::<MiOptionGet>(handle, "mi_option_get"),
        )
    };
    if let (Some(version_fn), Some(collect), Some(process_info), Some(option_get)) = mi {
        // SAFETY: mi_version takes nothing and returns an int.
        let version = unsafe { version_fn() };
        if (200..300).contains(&version) {
            // SAFETY: a valid option index of every mimalloc 2.x.
            let delay = unsafe { option_get(MIMALLOC_PURGE_DELAY_OPTION) };
            settings.insert("purge_delay".into(), delay.to_string());
        }
        let text = format!("{}.{}.{}", version / 100, (version / 10) % 10, version % 10);
        let calls = Calls::Mimalloc {
            version,
            collect,
            process_info,
        };
        return Some(("mimalloc", Some(text), calls));
    }
    if let Some(gnu) = unsafe { symbol::<GnuVersion>(handle, "gnu_get_libc_version") } {
        // SAFETY: returns a pointer to a static NUL-terminated string.
        let version = c_text(unsafe { gnu() });
        return Some(("glibc", version, Calls::Glibc));
    }
    None
}

impl Served {
    /// The allocator's own view of its memory now.
    pub fn heap_stats(&self) -> Option<HeapStats> {
        match self.calls {
            Calls::Glibc => glibc::allocator_state().map(|a| HeapStats {
                in_use_bytes: Some(a.in_use_bytes + a.mmapped_bytes),
                held_bytes: a.arena_bytes + a.mmapped_bytes,
            }),
            Calls::Jemalloc { mallctl } => {
                // Statistics are a snapshot refreshed by writing the epoch.
                let mut epoch: u64 = 1;
                let mut len = std::mem::size_of::<u64>();
                let name = c"epoch";
                // SAFETY: "epoch" takes and returns a uint64_t.
                unsafe {
                    mallctl(
                        name.as_ptr(),
                        (&mut epoch as *mut u64).cast(),
                        &mut len,
                        (&mut epoch as *mut u64).cast(),
                        std::mem::size_of::<u64>(),
                    )
                };
                Some(HeapStats {
                    in_use_bytes: mallctl_read::<usize>(mallctl, "stats.allocated")
                        .map(|v| v as u64),
                    held_bytes: mallctl_read::<usize>(mallctl, "stats.resident")? as u64,
                })
            }
            Calls::Tcmalloc { property, .. } => {
                let heap = tc_read(property, "generic.heap_size")?;
                let unmapped = tc_read(property, "tcmalloc.pageheap_unmapped_bytes").unwrap_or(0);
                Some(HeapStats {
                    in_use_bytes: tc_read(property, "generic.current_allocated_bytes"),
                    held_bytes: heap.saturating_sub(unmapped),
                })
            }
            Calls::Mimalloc { process_info, .. } => {
                let mut v = [0usize; 8];
                let [a, b, c, d, e, f, g, h] = &mut v;
                // SAFETY: mi_process_info writes one size_t through each pointer.
                unsafe { process_info(a, b, c, d, e, f, g, h) };
                Some(HeapStats {
                    in_use_bytes: None,
                    held_bytes: v[5] as u64,
                })
            }
            Calls::Unknown => None,
        }
    }

    /// True when glibc serves `malloc` (its mallinfo2 then describes the heap).
    pub fn is_glibc(&self) -> bool {
        matches!(self.calls, Calls::Glibc)
    }

    /// The allocator's own "give free memory back now" call; returns its note.
    pub fn force_release(&self) -> Result<String> {
        let start = Instant::now();
        let what = match self.calls {
            Calls::Jemalloc { mallctl } => {
                let name = format!("arena.{JEMALLOC_ARENAS_ALL}.purge");
                let c_name = CString::new(name.clone())?;
                // SAFETY: arena.<i>.purge takes no arguments.
                let rc = unsafe {
                    mallctl(
                        c_name.as_ptr(),
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                        0,
                    )
                };
                if rc != 0 {
                    bail!("jemalloc mallctl(\"{name}\") failed with error {rc}");
                }
                format!("mallctl(\"{name}\")")
            }
            Calls::Tcmalloc { release, .. } => {
                // SAFETY: takes nothing, returns nothing.
                unsafe { release() };
                "MallocExtension_ReleaseFreeMemory()".to_string()
            }
            Calls::Mimalloc {
                collect, version, ..
            } => {
                // SAFETY: mi_collect(force) takes a bool.
                unsafe { collect(true) };
                format!("mi_collect(true) (mimalloc {version})")
            }
            Calls::Glibc => bail!(
                "the strategy calls a preloaded allocator's release, but glibc serves malloc \
                 (the preload did not take effect)"
            ),
            Calls::Unknown => bail!("no known allocator serves malloc: nothing to call"),
        };
        Ok(format!(
            "{what} in {:.2} ms",
            start.elapsed().as_secs_f64() * 1e3
        ))
    }
}

/// The file of the library that defines the `malloc` this process calls.
fn malloc_library() -> Option<String> {
    let name = c"malloc";
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name.
    let address = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    if address.is_null() {
        return None;
    }
    // SAFETY: Dl_info is plain data; dladdr fills it for a loaded address.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: `address` is a symbol address from dlsym.
    if unsafe { libc::dladdr(address, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    c_text(info.dli_fname)
}

/// A handle to an already loaded library (never loads one: RTLD_NOLOAD).
fn open_loaded(library: &str) -> *mut c_void {
    let Ok(path) = CString::new(library) else {
        return std::ptr::null_mut();
    };
    // SAFETY: RTLD_NOLOAD only returns a handle to a library already mapped.
    unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) }
}

/// Whether the library's file is mapped into this process.
fn is_mapped(library: &str) -> bool {
    let Ok(real) = std::fs::canonicalize(library) else {
        return false;
    };
    let real = real.to_string_lossy().into_owned();
    std::fs::read_to_string("/proc/self/maps")
        .is_ok_and(|maps| maps.lines().any(|l| l.ends_with(real.as_str())))
}

/// Looks `name` up in `handle` as a function of type `F`.
///
/// # Safety
/// `F` must be the function's real signature.
unsafe fn symbol<F: Copy>(handle: *mut c_void, name: &str) -> Option<F> {
    let c_name = CString::new(name).ok()?;
    // SAFETY: a valid handle and a NUL-terminated name.
    let address = unsafe { libc::dlsym(handle, c_name.as_ptr()) };
    if address.is_null() {
        return None;
    }
    debug_assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: the caller names the real signature; function pointers and data
    // pointers have the same size on every platform memrel runs on.
    Some(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&address) })
}

/// Reads a jemalloc control of plain type `T`.
fn mallctl_read<T: Copy + Default>(mallctl: Mallctl, name: &str) -> Option<T> {
    let c_name = CString::new(name).ok()?;
    let mut value = T::default();
    let mut len = std::mem::size_of::<T>();
    // SAFETY: `value` is writable and `len` says its size; jemalloc refuses
    // (EINVAL) a size that does not match the control's type.
    let rc = unsafe {
        mallctl(
            c_name.as_ptr(),
            (&mut value as *mut T).cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    (rc == 0).then_some(value)
}

/// Reads a jemalloc control of type `const char *`.
fn mallctl_string(mallctl: Mallctl, name: &str) -> Option<String> {
    let c_name = CString::new(name).ok()?;
    let mut text: *const c_char = std::ptr::null();
    let mut len = std::mem::size_of::<*const c_char>();
    // SAFETY: the control returns a pointer to a static string.
    let rc = unsafe {
        mallctl(
            c_name.as_ptr(),
            (&mut text as *mut *const c_char).cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    if rc == 0 {
        c_text(text)
    } else {
        None
    }
}

/// A tcmalloc numeric property.
fn tc_read(property: TcGetNumericProperty, name: &str) -> Option<u64> {
    let c_name = CString::new(name).ok()?;
    let mut value = 0usize;
    // SAFETY: writes one size_t; returns 0 for an unknown property.
    let known = unsafe { property(c_name.as_ptr(), &mut value) };
    (known != 0).then_some(value as u64)
}

/// tcmalloc's memory release rate. gperftools has no C call for it: this
/// calls `TCMallocImplementation::GetMemoryReleaseRate` (an exported member
/// function, `this` first) on the registered `MallocExtension::instance()`.
fn tc_release_rate(handle: *mut c_void) -> Option<f64> {
    // SAFETY: both are exported by libtcmalloc with these (Itanium ABI) signatures.
    let instance = unsafe { symbol::<TcInstance>(handle, "_ZN15MallocExtension8instanceEv") }?;
    let rate = unsafe {
        symbol::<TcGetReleaseRate>(
            handle,
            "_ZN22TCMallocImplementation20GetMemoryReleaseRateEv",
        )
    }?;
    // SAFETY: instance() returns the registered implementation (never null
    // once tcmalloc serves malloc); the member reads one global.
    let this = unsafe { instance() };
    if this.is_null() {
        return None;
    }
    Some(unsafe { rate(this) })
}

/// A C string as text (`None` for a null pointer).
fn c_text(text: *const c_char) -> Option<String> {
    if text.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated string owned by the library.
    Some(
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_test_binary_is_served_by_glibc() {
        // The test binary runs without a preload: glibc must be found, mapped,
        // with its version, and give a heap view.
        let served = identify();
        assert_eq!(served.report.name, "glibc", "{:?}", served.report);
        assert!(served.report.mapped, "{:?}", served.report);
        assert!(served.report.library.contains("libc.so"));
        assert!(served.report.version.is_some());
        assert!(served.heap_stats().is_some_and(|h| h.held_bytes > 0));
        assert!(served.force_release().is_err());
    }
}
