//! The few CUDA driver API calls the fake worker needs to hold an exact
//! number of bytes of device memory, for `memrel calibrate --device cuda`.
//!
//! Why it exists: calibrating VRAM must not need candle's CUDA device or a
//! build with the `cuda` feature (a CUDA toolkit, 15 minutes of kernels);
//! the default binary calibrates any GPU machine that has the NVIDIA driver.
//! So `libcuda.so.1` (shipped with the driver) is opened with dlopen at run
//! time, the way nvml-wrapper opens NVML: a machine without the driver gets
//! a clear error here, never a binary that fails to start.
//!
//! What it must not do: measure. It allocates (`cuMemAlloc_v2`), touches
//! (`cuMemsetD8_v2` + `cuCtxSynchronize`) and frees (`cuMemFree_v2`); the
//! parent reads VRAM through NVML. Every call runs on the thread that
//! retained the context (the worker's main thread), where it is current.
//! The library is opened once and never closed: the driver must outlive
//! every context and allocation, up to the process's exit.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::OnceLock;

use anyhow::{bail, Result};

/// The NVIDIA driver's CUDA library, as the driver installs it.
pub const LIBRARY: &str = "libcuda.so.1";

type CuResult = c_int;
type CuDevice = c_int;
type CuContext = *mut c_void;
type CuDevicePtr = u64;

/// The entry points, typed as in cuda.h (driver API, 64-bit `_v2` names).
struct Api {
    init: unsafe extern "C" fn(c_uint) -> CuResult,
    device_get_count: unsafe extern "C" fn(*mut c_int) -> CuResult,
    device_get: unsafe extern "C" fn(*mut CuDevice, c_int) -> CuResult,
    device_get_name: unsafe extern "C" fn(*mut c_char, c_int, CuDevice) -> CuResult,
    device_get_uuid: unsafe extern "C" fn(*mut [u8; 16], CuDevice) -> CuResult,
    device_total_mem: unsafe extern "C" fn(*mut usize, CuDevice) -> CuResult,
    primary_ctx_retain: unsafe extern "C" fn(*mut CuContext, CuDevice) -> CuResult,
    primary_ctx_release: unsafe extern "C" fn(CuDevice) -> CuResult,
    ctx_set_current: unsafe extern "C" fn(CuContext) -> CuResult,
    ctx_synchronize: unsafe extern "C" fn() -> CuResult,
    mem_alloc: unsafe extern "C" fn(*mut CuDevicePtr, usize) -> CuResult,
    memset_d8: unsafe extern "C" fn(CuDevicePtr, u8, usize) -> CuResult,
    mem_free: unsafe extern "C" fn(CuDevicePtr) -> CuResult,
    mem_get_info: unsafe extern "C" fn(*mut usize, *mut usize) -> CuResult,
    get_error_name: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
    driver_get_version: unsafe extern "C" fn(*mut c_int) -> CuResult,
}

/// The loaded driver library and its entry points.
pub struct Driver {
    /// Keeps the library mapped, so the pointers in `api` stay valid.
    _library: libloading::Library,
    api: Api,
}

static DRIVER: OnceLock<Result<Driver, String>> = OnceLock::new();

/// The process-wide driver, loaded on first use (no `cuInit` yet: loading
/// it creates no context and holds no VRAM, so the parent can check it).
pub fn driver() -> Result<&'static Driver, String> {
    DRIVER.get_or_init(load).as_ref().map_err(Clone::clone)
}

fn load() -> Result<Driver, String> {
    // SAFETY: loading the NVIDIA driver library runs its initialisers, which
    // have no preconditions on this process.
    let library = unsafe { libloading::Library::new(LIBRARY) }.map_err(|e| {
        format!(
            "cannot load the CUDA driver library {LIBRARY} ({e}): a cuda device needs the NVIDIA \
             driver; install it (nvidia-smi must work), or use device cpu"
        )
    })?;
    let api = Api {
        init: entry(&library, "cuInit")?,
        device_get_count: entry(&library, "cuDeviceGetCount")?,
        device_get: entry(&library, "cuDeviceGet")?,
        device_get_name: entry(&library, "cuDeviceGetName")?,
        device_get_uuid: entry(&library, "cuDeviceGetUuid")?,
        device_total_mem: entry(&library, "cuDeviceTotalMem_v2")?,
        primary_ctx_retain: entry(&library, "cuDevicePrimaryCtxRetain")?,
        primary_ctx_release: entry(&library, "cuDevicePrimaryCtxRelease_v2")?,
        ctx_set_current: entry(&library, "cuCtxSetCurrent")?,
        ctx_synchronize: entry(&library, "cuCtxSynchronize")?,
        mem_alloc: entry(&library, "cuMemAlloc_v2")?,
        memset_d8: entry(&library, "cuMemsetD8_v2")?,
        mem_free: entry(&library, "cuMemFree_v2")?,
        mem_get_info: entry(&library, "cuMemGetInfo_v2")?,
        get_error_name: entry(&library, "cuGetErrorName")?,
        driver_get_version: entry(&library, "cuDriverGetVersion")?,
    };
    Ok(Driver {
        _library: library,
        api,
    })
}

/// One entry point of `library`, as the function type `T`.
fn entry<T: Copy>(library: &libloading::Library, name: &str) -> Result<T, String> {
    let symbol = format!("{name}\0");
    // SAFETY: every caller's `T` is the function's signature in cuda.h, and
    // `library` stays loaded as long as the pointer is used (it is kept next
    // to it in `Driver`, in a static that is never dropped).
    unsafe { library.get::<T>(symbol.as_bytes()) }
        .map(|f| *f)
        .map_err(|e| {
            format!("{LIBRARY} lacks {name} ({e}): the NVIDIA driver is too old, update it")
        })
}

impl Driver {
    /// `Ok` for `CUDA_SUCCESS`, else an error naming the call and the code.
    fn check(&self, call: &str, code: CuResult) -> Result<()> {
        if code == 0 {
            return Ok(());
        }
        let mut name: *const c_char = std::ptr::null();
        // SAFETY: cuGetErrorName writes a pointer to a static string (or
        // leaves it null for an unknown code); it is only read if non-null.
        let known = unsafe { (self.api.get_error_name)(code, &mut name) } == 0 && !name.is_null();
        let text = if known {
            // SAFETY: non-null and NUL-terminated, owned by the driver for the process's life.
            unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned()
        } else {
            "an unknown error".into()
        };
        bail!("cuda driver: {call} failed with {text} ({code})")
    }

    /// The driver's CUDA version, e.g. `13.0`.
    pub fn version(&self) -> Result<String> {
        let mut v: c_int = 0;
        // SAFETY: writes one int.
        self.check("cuDriverGetVersion", unsafe {
            (self.api.driver_get_version)(&mut v)
        })?;
        Ok(format!("{}.{}", v / 1000, (v % 1000) / 10))
    }

    /// Initialises the driver and picks CUDA device `ordinal`.
    pub fn device(&'static self, ordinal: usize) -> Result<Gpu> {
        // SAFETY: cuInit(0) has no preconditions; later calls need it.
        self.check("cuInit", unsafe { (self.api.init)(0) })?;
        let mut count: c_int = 0;
        // SAFETY: writes one int.
        self.check("cuDeviceGetCount", unsafe {
            (self.api.device_get_count)(&mut count)
        })?;
        if ordinal >= count.max(0) as usize {
            bail!("device cuda:{ordinal} does not exist: this machine has {count} CUDA device(s)");
        }
        let mut handle: CuDevice = 0;
        // SAFETY: writes one device handle; the ordinal was checked above.
        self.check("cuDeviceGet", unsafe {
            (self.api.device_get)(&mut handle, ordinal as c_int)
        })?;
        Ok(Gpu {
            driver: self,
            handle,
            ordinal,
        })
    }
}

/// One CUDA device, before any context.
pub struct Gpu {
    driver: &'static Driver,
    handle: CuDevice,
    pub ordinal: usize,
}

impl Gpu {
    pub fn name(&self) -> Result<String> {
        let mut buf = [0 as c_char; 256];
        // SAFETY: the driver writes at most `len` bytes, NUL-terminated.
        self.driver.check("cuDeviceGetName", unsafe {
            (self.driver.api.device_get_name)(buf.as_mut_ptr(), buf.len() as c_int, self.handle)
        })?;
        // SAFETY: NUL-terminated within `buf` (the driver's contract; the last byte is still 0).
        Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned())
    }

    /// The device's UUID, as NVML names the same GPU.
    pub fn uuid(&self) -> Result<[u8; 16]> {
        let mut uuid = [0u8; 16];
        // SAFETY: CUuuid is 16 bytes; the driver writes exactly those.
        self.driver.check("cuDeviceGetUuid", unsafe {
            (self.driver.api.device_get_uuid)(&mut uuid, self.handle)
        })?;
        Ok(uuid)
    }

    pub fn total_bytes(&self) -> Result<u64> {
        let mut bytes: usize = 0;
        // SAFETY: writes one size_t.
        self.driver.check("cuDeviceTotalMem_v2", unsafe {
            (self.driver.api.device_total_mem)(&mut bytes, self.handle)
        })?;
        Ok(bytes as u64)
    }

    /// Retains the device's primary context and makes it current on this
    /// thread: from here the process holds the context's VRAM.
    pub fn retain_context(&self) -> Result<Context> {
        let mut ctx: CuContext = std::ptr::null_mut();
        // SAFETY: writes one context handle for a device from cuDeviceGet.
        self.driver.check("cuDevicePrimaryCtxRetain", unsafe {
            (self.driver.api.primary_ctx_retain)(&mut ctx, self.handle)
        })?;
        let context = Context {
            driver: self.driver,
            device: self.handle,
        };
        // SAFETY: ctx was just retained and stays valid until `context` releases it.
        self.driver.check("cuCtxSetCurrent", unsafe {
            (self.driver.api.ctx_set_current)(ctx)
        })?;
        Ok(context)
    }
}

/// The device's primary context, current on the thread that retained it;
/// released when dropped.
pub struct Context {
    driver: &'static Driver,
    device: CuDevice,
}

impl Context {
    /// Waits for all work queued in the context.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: no arguments; the context is current on this thread.
        self.driver.check("cuCtxSynchronize", unsafe {
            (self.driver.api.ctx_synchronize)()
        })
    }

    /// (free, total) bytes of the device as the driver sees them.
    pub fn memory_info(&self) -> Result<(u64, u64)> {
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: writes two size_t; the context is current.
        self.driver.check("cuMemGetInfo_v2", unsafe {
            (self.driver.api.mem_get_info)(&mut free, &mut total)
        })?;
        Ok((free as u64, total as u64))
    }

    /// `bytes` of device memory (`cuMemAlloc_v2`), every byte set to `fill`
    /// and synchronized, so the memory is really there when this returns.
    pub fn alloc(&self, bytes: usize, fill: u8) -> Result<DeviceMemory> {
        if bytes == 0 {
            bail!("cuda driver: an allocation of 0 bytes (a memrel bug: skip empty allocations)");
        }
        let mut ptr: CuDevicePtr = 0;
        // SAFETY: writes one device pointer; the context is current.
        self.driver
            .check(&format!("cuMemAlloc_v2 of {bytes} bytes"), unsafe {
                (self.driver.api.mem_alloc)(&mut ptr, bytes)
            })?;
        let memory = DeviceMemory {
            driver: self.driver,
            ptr,
            bytes,
        };
        memory.fill(fill)?;
        Ok(memory)
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: releases the one retain `Gpu::retain_context` made.
        let _ = unsafe { (self.driver.api.primary_ctx_release)(self.device) };
    }
}

/// One `cuMemAlloc_v2` allocation; freed (`cuMemFree_v2`) when dropped.
/// Drop it before its context, on the context's thread.
pub struct DeviceMemory {
    driver: &'static Driver,
    ptr: CuDevicePtr,
    bytes: usize,
}

impl DeviceMemory {
    /// Writes `value` to every byte and waits for it (the fake "forward pass").
    pub fn fill(&self, value: u8) -> Result<()> {
        // SAFETY: ptr/bytes are exactly one live allocation of this context.
        self.driver.check("cuMemsetD8_v2", unsafe {
            (self.driver.api.memset_d8)(self.ptr, value, self.bytes)
        })?;
        // SAFETY: no arguments; the context is current on this thread.
        self.driver.check("cuCtxSynchronize", unsafe {
            (self.driver.api.ctx_synchronize)()
        })
    }
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        // SAFETY: ptr came from cuMemAlloc_v2 and is freed exactly once, here.
        let _ = unsafe { (self.driver.api.mem_free)(self.ptr) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_the_driver_the_error_names_the_library_and_the_fix() {
        // Only meaningful where the driver is missing (CI, the dev VM); on a
        // GPU machine the driver loads and this test checks that instead.
        match driver() {
            Err(e) => {
                assert!(e.starts_with("cannot load"), "{e}");
                for needle in [LIBRARY, "a cuda device needs the NVIDIA driver"] {
                    assert!(e.contains(needle), "missing {needle:?} in {e}");
                }
            }
            Ok(d) => assert!(d.version().is_ok()),
        }
    }
}
