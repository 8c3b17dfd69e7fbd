//! Facts about the machine a record was made on, stored with every record so
//! numbers are never separated from where they were measured.

use crate::record::Host;

pub fn describe() -> Host {
    let total_memory_bytes = sysinfo::System::new()
        .map(|mut system| {
            system.refresh_memory();
            system.total_memory()
        })
        .unwrap_or(0);
    Host {
        hostname: sysinfo::System::host_name().unwrap_or_else(|_| "unknown".into()),
        os: sysinfo::System::long_os_version().unwrap_or_else(|_| std::env::consts::OS.into()),
        kernel: sysinfo::System::kernel_version().unwrap_or_else(|_| "unknown".into()),
        libc: libc_version(),
        cpus: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        total_memory_bytes,
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn libc_version() -> String {
    // SAFETY: returns a pointer to a static NUL-terminated string.
    let version = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
    format!("glibc {}", version.to_string_lossy())
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn libc_version() -> String {
    "not glibc".into()
}
