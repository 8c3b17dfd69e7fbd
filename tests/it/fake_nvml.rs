//! A fake NVML for the truth matrix's VRAM cells (`matrix`) on a machine
//! without a GPU: tests/fixtures/fake-nvml/libnvidia-ml.c, built here with
//! `cc -shared` and found first on LD_LIBRARY_PATH, lists the compute
//! processes a text file (`FAKE_NVML_STATE`) names on `FAKE_NVML_GPUS` GPUs.
//! A program "allocates" and "frees" VRAM by rewriting that file; memrel's
//! NVML code runs unchanged against it.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The fake library's directory, built once per test binary.
pub fn fake_nvml_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir").keep();
        let source =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake-nvml/libnvidia-ml.c");
        let status = std::process::Command::new("cc")
            .args(["-shared", "-fPIC", "-O1", "-o"])
            .arg(dir.join("libnvidia-ml.so.1"))
            .arg(&source)
            .status()
            .expect("cc (gcc) builds the fake NVML: install gcc");
        assert!(status.success(), "cc failed on {}", source.display());
        dir
    })
}
