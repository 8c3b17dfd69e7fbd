//! `memrel calibrate`: runs the fake worker's calibration scenarios (one per
//! kind of memory; VRAM with `--device cuda`) through the [`Plan`], measures
//! them (`crate::calibrate`) and writes calibrate.md and calibrate.json.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::ExitStatus;
use crate::calibrate::{markdown, measure, scenario_text, vram, Calibration, Kind};
use crate::cli::CalibrateArgs;
use crate::fsutil::write_atomic;
use crate::plan::Plan;
use crate::record::RunRecord;
use crate::results::create_out_dir;
use crate::scenario::{self, DeviceSpec};
use crate::worker::cuda_driver;

/// `memrel calibrate` as the arguments ask: calibrates, prints the table and
/// where it went to `out`; `Failure` when a target was missed.
pub fn run(args: &CalibrateArgs, out: &mut dyn Write) -> Result<ExitStatus> {
    let device = options(args)?;
    let calibration = measure_all(args, device)?;
    let dir = write_calibration(&args.out, &calibration)?;
    write!(out, "{}", markdown(&calibration))?;
    writeln!(out, "\ncalibration: {}", dir.join("calibrate.md").display())?;
    Ok(if calibration.passed {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    })
}

/// The device to calibrate, checked before anything runs: without the
/// driver no VRAM run can start.
fn options(args: &CalibrateArgs) -> Result<DeviceSpec> {
    let device = args.device;
    if device.is_cuda() {
        cuda_driver::driver().map_err(|e| anyhow::anyhow!("--device {device}: {e}"))?;
    }
    Ok(device)
}

/// Runs and measures the calibration of each kind (VRAM on a CUDA device).
fn measure_all(args: &CalibrateArgs, device: DeviceSpec) -> Result<Calibration> {
    let interval_s = args.interval_ms / 1e3;
    let spike = (args.spike_mib, args.spike_ms);
    let mut calibration = Calibration {
        interval_s,
        cases: Vec::new(),
        peaks: Vec::new(),
        spikes: Vec::new(),
        vram: None,
        passed: false,
    };
    for kind in [Kind::Anon, Kind::File] {
        let (run, dir) = run_kind(args, kind, device)?;
        let (cases, peak, spike) = measure(&run, kind, &args.sizes_mib, interval_s, args.spike_ms);
        if cases.len() != args.sizes_mib.len() {
            bail!(
                "the calibration run in {} lacks phase markers",
                dir.display()
            );
        }
        calibration.cases.extend(cases);
        calibration.peaks.extend(peak);
        calibration.spikes.extend(spike);
    }
    calibration.passed = calibration.cases.iter().all(|c| c.ok)
        && calibration.peaks.len() == 2
        && calibration.peaks.iter().all(|p| p.ok);
    if device.is_cuda() {
        let (run, dir) = run_kind(args, Kind::Vram, device)?;
        let v = vram::measure(
            &run,
            &device.to_string(),
            &args.sizes_mib,
            interval_s,
            spike,
        );
        if v.cases.len() != args.sizes_mib.len() {
            bail!(
                "the calibration run in {} lacks phase markers",
                dir.display()
            );
        }
        calibration.passed &= v.passed;
        calibration.vram = Some(v);
    }
    Ok(calibration)
}

/// Writes calibrate.md and calibrate.json into a new directory under
/// `<out>/calibrate`; returns it.
fn write_calibration(out_root: &Path, calibration: &Calibration) -> Result<PathBuf> {
    let out = create_out_dir(out_root, "calibrate")?;
    write_atomic(&out.join("calibrate.md"), markdown(calibration).as_bytes())?;
    let json = serde_json::to_vec_pretty(calibration).context("cannot encode calibrate.json")?;
    write_atomic(&out.join("calibrate.json"), &json)?;
    Ok(out)
}

/// Runs the calibration scenario of one kind; returns its run and directory.
fn run_kind(args: &CalibrateArgs, kind: Kind, device: DeviceSpec) -> Result<(RunRecord, PathBuf)> {
    let name = format!("calibrate-{}", kind.as_str());
    let text = scenario_text(
        kind,
        device,
        &args.sizes_mib,
        args.interval_ms,
        (args.spike_mib, args.spike_ms),
    );
    let scenario = scenario::parse_str(&name, "calibrate", &text)
        .context("memrel calibrate's own scenario")?;
    let plan = Plan::new(scenario, &[], &scenario::Overrides::default(), &args.out)?;
    let measured = plan.execute(crate::plan::command_line())?;
    let dir = measured.dir;
    let run = measured
        .record
        .runs
        .into_iter()
        .next()
        .with_context(|| format!("no run in {}", dir.display()))?;
    if let Some(e) = &run.meta.error {
        bail!("the calibration run in {} failed: {e}", dir.display());
    }
    Ok((run, dir))
}
