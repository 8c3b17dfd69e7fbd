//! Facts about the machine a record was made on, stored with every record so
//! numbers are never separated from where they were measured: the ones that
//! change memory behaviour (glibc, kernel, distribution, CPUs, RAM, GPU,
//! driver, CUDA, the allocator libraries' versions) are what `memrel check`
//! compares with the baseline's (`gate::machine`).
//!
//! Reading a fact never fails a run: one that cannot be read is recorded as
//! absent. It starts no process (the tests find memrel's worker as its only
//! child). Nothing here compares or judges.

use std::collections::BTreeMap;

use crate::record::{Host, Machine};
use crate::strategy::{self, Allocator, ALLOCATOR_PATH_ENV};

/// The allocators memrel preloads, whose libraries' versions are recorded.
const PRELOADED: [Allocator; 3] = [
    Allocator::Jemalloc,
    Allocator::Tcmalloc,
    Allocator::Mimalloc,
];

pub fn describe() -> Host {
    let mut system = sysinfo::System::new().ok();
    let total_memory_bytes = system
        .as_mut()
        .map(|system| {
            system.refresh_memory();
            system.total_memory()
        })
        .unwrap_or(0);
    let cpu_model = system.as_mut().and_then(|system| {
        system.refresh_cpu_list(sysinfo::CpuRefreshKind::nothing());
        let brand = system.cpus().first()?.brand().trim().to_string();
        (!brand.is_empty()).then_some(brand)
    });
    let (gpus, gpu_driver, cuda) = gpu_facts();
    Host {
        hostname: sysinfo::System::host_name().unwrap_or_else(|_| "unknown".into()),
        os: sysinfo::System::long_os_version().unwrap_or_else(|_| std::env::consts::OS.into()),
        kernel: sysinfo::System::kernel_version().unwrap_or_else(|_| "unknown".into()),
        libc: libc_version(),
        cpus: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        total_memory_bytes,
        machine: Some(Machine {
            distribution: std::fs::read_to_string("/etc/os-release")
                .ok()
                .and_then(|text| pretty_name(&text)),
            cpu_model,
            gpus,
            gpu_driver,
            cuda,
            allocators: allocator_versions(),
            name: crate::machine::name_from_env(),
        }),
    }
}

/// `PRETTY_NAME` of an os-release file, unquoted.
fn pretty_name(os_release: &str) -> Option<String> {
    os_release.lines().find_map(|line| {
        let value = line.trim().strip_prefix("PRETTY_NAME=")?.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
            .unwrap_or(value);
        (!value.is_empty()).then(|| value.to_string())
    })
}

/// The GPUs' names, the driver and the CUDA version it supports, from NVML;
/// all absent without NVML (no NVIDIA driver).
fn gpu_facts() -> (Vec<String>, Option<String>, Option<String>) {
    let Ok(nvml) = crate::sampler::nvml::handle() else {
        return (Vec::new(), None, None);
    };
    let gpus = crate::sampler::nvml::devices()
        .map(|devices| devices.iter().filter_map(|d| d.name().ok()).collect())
        .unwrap_or_default();
    let cuda = nvml.sys_cuda_driver_version().ok().map(|v| {
        format!(
            "{}.{}",
            nvml_wrapper::cuda_driver_version_major(v),
            nvml_wrapper::cuda_driver_version_minor(v)
        )
    });
    (gpus, nvml.sys_driver_version().ok(), cuda)
}

/// dpkg's database of installed packages: read, not `dpkg-query` run, so
/// memrel starts no process of its own beside the worker.
const DPKG_STATUS: &str = "/var/lib/dpkg/status";

/// The installed allocator libraries by Debian package: dpkg's version, or
/// `so:` and the library's file name where dpkg does not know the package
/// or `MEMREL_ALLOCATOR_PATH` points the preload elsewhere.
fn allocator_versions() -> BTreeMap<String, String> {
    let packages: Vec<&str> = PRELOADED
        .iter()
        .filter_map(|a| a.debian_package())
        .collect();
    let mut versions = if std::env::var_os(ALLOCATOR_PATH_ENV).is_some() {
        BTreeMap::new()
    } else {
        std::fs::read_to_string(DPKG_STATUS)
            .map(|status| installed_packages(&status, &packages))
            .unwrap_or_default()
    };
    for allocator in PRELOADED {
        let Some(package) = allocator.debian_package() else {
            continue;
        };
        if versions.contains_key(package) {
            continue;
        }
        if let Some(file) = library_file(allocator) {
            versions.insert(package.to_string(), format!("so:{file}"));
        }
    }
    versions
}

/// The `wanted` packages dpkg's status file lists as installed, with their
/// versions (what `dpkg-query -W` prints); the first stanza of a package
/// wins where several architectures are installed.
fn installed_packages(status: &str, wanted: &[&str]) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    for stanza in status.split("\n\n") {
        let field = |name: &str| {
            stanza
                .lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
                .map(str::trim)
        };
        let (Some(package), Some(state), Some(version)) =
            (field("Package"), field("Status"), field("Version"))
        else {
            continue;
        };
        if wanted.contains(&package) && state.ends_with(" installed") && !version.is_empty() {
            found
                .entry(package.to_string())
                .or_insert_with(|| version.to_string());
        }
    }
    found
}

/// The file the allocator's library resolves to (its symbolic links
/// followed), where the preload would find it.
fn library_file(allocator: Allocator) -> Option<String> {
    let strategy = strategy::all().find(|s| s.allocator == allocator)?;
    let path = strategy::find_library(strategy).ok()??;
    let real = std::fs::canonicalize(&path).unwrap_or(path);
    Some(real.file_name()?.to_string_lossy().into_owned())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pretty_name_is_read_unquoted() {
        let debian = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\n";
        assert_eq!(
            pretty_name(debian).as_deref(),
            Some("Debian GNU/Linux 12 (bookworm)")
        );
        assert_eq!(
            pretty_name("ID=alpine\nPRETTY_NAME='Alpine Linux v3.20'\n").as_deref(),
            Some("Alpine Linux v3.20")
        );
        assert_eq!(pretty_name("ID=x\nPRETTY_NAME=\"\"\n"), None);
        assert_eq!(pretty_name("ID=x\n"), None);
    }

    #[test]
    fn only_installed_packages_count() {
        let status = "Package: libjemalloc2\nStatus: install ok installed\nArchitecture: amd64\nVersion: 5.3.0-1\n\n\
                      Package: libmimalloc2.0\nStatus: deinstall ok config-files\nVersion: 2.0.9+ds-2\n\n\
                      Package: libc6\nStatus: install ok installed\nVersion: 2.36-9\n\n\
                      Package: libjemalloc2\nStatus: install ok installed\nArchitecture: i386\nVersion: 5.3.0-9\n";
        let found = installed_packages(status, &["libjemalloc2", "libmimalloc2.0"]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found["libjemalloc2"], "5.3.0-1");
    }

    /// This machine has the three allocator packages (common23: installed
    /// here; `.ci/run` installs them): every one is recorded with dpkg's version.
    #[test]
    fn this_machine_records_its_allocator_packages() {
        let host = describe();
        let machine = host.machine.expect("describe records the machine facts");
        for package in ["libjemalloc2", "libtcmalloc-minimal4", "libmimalloc2.0"] {
            let version = machine.allocators.get(package).unwrap_or_else(|| {
                panic!("{package} is not recorded: install it with `apt-get install {package}`")
            });
            assert!(
                !version.is_empty() && !version.starts_with("so:"),
                "{package}: {version}"
            );
        }
        assert!(host.libc.starts_with("glibc "), "{}", host.libc);
        assert!(host.total_memory_bytes > 0);
    }
}
