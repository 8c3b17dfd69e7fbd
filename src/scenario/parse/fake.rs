//! A fake model of a scenario (`fake_anon_mib`, `fake_file_mib`, … for
//! memrel's fake worker: exact bytes), its amounts checked.

use super::ModelFile;
use crate::model::spec::FakeModel;

/// The most one fake model may allocate, in MiB (64 GiB): more is a typo.
const MAX_FAKE_MIB: f64 = 64.0 * 1024.0;

/// The longest a fake model may hold its memory after the release returns (1 min).
const MAX_LATE_FREE_MS: u64 = 60_000;

/// How long a fake model's spike (`fake_spike_mib`) is held when
/// `fake_spike_ms` is not given: shorter than the default 10 ms interval.
const DEFAULT_SPIKE_MS: u64 = 5;

pub(super) fn is_fake(m: &ModelFile) -> bool {
    m.fake_anon_mib.is_some()
        || m.fake_file_mib.is_some()
        || m.fake_leak_mib.is_some()
        || m.fake_vram_mib.is_some()
        || m.fake_late_free_ms.is_some()
        || m.fake_spike_mib.is_some()
        || m.fake_spike_ms.is_some()
}

/// A fake model's bytes, each amount 0 to [`MAX_FAKE_MIB`] and some of them above 0.
pub(super) fn fake_model(m: &ModelFile) -> Result<FakeModel, String> {
    let bytes = |key: &str, v: Option<f64>| -> Result<u64, String> {
        let v = v.unwrap_or(0.0);
        if !(0.0..=MAX_FAKE_MIB).contains(&v) {
            return Err(format!(
                "{key} = {v} is out of range: use 0 to {MAX_FAKE_MIB}"
            ));
        }
        Ok((v * crate::textutil::MIB).round() as u64)
    };
    let model = FakeModel {
        anon_bytes: bytes("fake_anon_mib", m.fake_anon_mib)?,
        file_bytes: bytes("fake_file_mib", m.fake_file_mib)?,
        leak_bytes: bytes("fake_leak_mib", m.fake_leak_mib)?,
        vram_bytes: bytes("fake_vram_mib", m.fake_vram_mib)?,
        late_free_ms: m.fake_late_free_ms.unwrap_or(0),
        spike_bytes: bytes("fake_spike_mib", m.fake_spike_mib)?,
        spike_ms: m.fake_spike_ms.unwrap_or(DEFAULT_SPIKE_MS),
    };
    if model.spike_ms > MAX_LATE_FREE_MS {
        return Err(format!(
            "fake_spike_ms = {} is out of range: use 0 to {MAX_LATE_FREE_MS}",
            model.spike_ms
        ));
    }
    if model.late_free_ms > MAX_LATE_FREE_MS {
        return Err(format!(
            "fake_late_free_ms = {} is out of range: use 0 to {MAX_LATE_FREE_MS}",
            model.late_free_ms
        ));
    }
    if model.load_bytes() == 0 {
        return Err("a fake model needs some bytes: set fake_anon_mib, fake_file_mib, fake_leak_mib or fake_vram_mib above 0".into());
    }
    Ok(model)
}
