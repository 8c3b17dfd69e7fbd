//! A run's samples in bounded memory: every sample up to
//! [`SAMPLES_IN_MEMORY`], and beyond that an envelope that keeps, for each
//! bucket of consecutive samples, the first one and the lowest and highest
//! reading of every series (RSS, anon, file, VRAM).
//!
//! samples.csv on disk always has every sample; this is what metrics and
//! charts hold in memory, so that an hour at 1 ms (3.6 M samples) costs the
//! parent a few MiB instead of hundreds. Peaks and troughs survive exactly;
//! a time read off the envelope (the first sample under a target) is late
//! by less than one bucket, which [`Decimation`] states. A run that fits
//! keeps every sample: its outputs are the same as without the envelope.
//!
//! Buckets double in size as the run grows (their extremes merge exactly:
//! the extremes of two buckets are among theirs), so one pass over the
//! samples, in any length, builds it.

use super::types::Sample;

/// The most samples one run keeps in memory (12 MiB of samples).
pub const SAMPLES_IN_MEMORY: usize = 1 << 18;

/// How a run's in-memory samples stand for the ones on disk, when they are
/// not all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decimation {
    /// Samples the run took (rows of samples.csv).
    pub samples_taken: u64,
    /// Consecutive samples per bucket: the envelope keeps at most nine of each.
    pub bucket_samples: u64,
}

/// Builds the in-memory samples of one run from its samples in time order.
#[derive(Debug)]
pub struct Envelope {
    cap: usize,
    bucket_samples: u64,
    taken: u64,
    /// Closed buckets' kept samples, with their index in the run.
    kept: Vec<(u64, Sample)>,
    open: Extremes,
    last: Option<(u64, Sample)>,
}

impl Default for Envelope {
    fn default() -> Self {
        Envelope::with_capacity(SAMPLES_IN_MEMORY)
    }
}

impl Envelope {
    /// An envelope keeping at most about `cap` samples (at least 64).
    pub fn with_capacity(cap: usize) -> Envelope {
        Envelope {
            cap: cap.max(64),
            bucket_samples: 1,
            taken: 0,
            kept: Vec::new(),
            open: Extremes::default(),
            last: None,
        }
    }

    pub fn push(&mut self, sample: Sample) {
        let index = self.taken;
        self.taken += 1;
        if let Some((first, _)) = self.open.first {
            if first / self.bucket_samples != index / self.bucket_samples {
                self.close_open_bucket();
            }
        }
        self.open.take(index, sample.clone());
        self.last = Some((index, sample));
        if self.kept.len() > self.cap {
            self.coarsen();
        }
    }

    /// The kept samples in time order, and how they stand for the run's
    /// (`None`: they are all of them).
    pub fn finish(mut self) -> (Vec<Sample>, Option<Decimation>) {
        self.close_open_bucket();
        if let Some(last) = self.last {
            if self.kept.last().map(|k| k.0) != Some(last.0) {
                self.kept.push(last);
            }
        }
        let decimation = (self.bucket_samples > 1).then_some(Decimation {
            samples_taken: self.taken,
            bucket_samples: self.bucket_samples,
        });
        (self.kept.into_iter().map(|(_, s)| s).collect(), decimation)
    }

    fn close_open_bucket(&mut self) {
        let open = std::mem::take(&mut self.open);
        open.append_to(&mut self.kept);
    }

    /// Doubles the bucket until the kept samples fit in half the cap, merging
    /// the kept samples of the buckets that become one.
    fn coarsen(&mut self) {
        self.close_open_bucket();
        while self.kept.len() > self.cap / 2 {
            self.bucket_samples *= 2;
            let b = self.bucket_samples;
            let mut merged = Vec::with_capacity(self.kept.len() / 2 + 16);
            let mut group = Extremes::default();
            for (index, sample) in std::mem::take(&mut self.kept) {
                if group
                    .first
                    .as_ref()
                    .is_some_and(|(first, _)| first / b != index / b)
                {
                    std::mem::take(&mut group).append_to(&mut merged);
                }
                group.take(index, sample);
            }
            // The newest bucket may not be full: it stays open.
            self.kept = merged;
            self.open = group;
        }
    }
}

/// The samples a bucket keeps: its first, and the lowest and highest of
/// each series (the first such, on ties).
#[derive(Debug, Default)]
struct Extremes {
    first: Option<(u64, Sample)>,
    lows: [Option<(u64, Sample)>; SERIES],
    highs: [Option<(u64, Sample)>; SERIES],
}

const SERIES: usize = 4;

fn series(s: &Sample) -> [Option<u64>; SERIES] {
    [
        Some(s.host_bytes()),
        Some(s.anon_bytes()),
        Some(s.file_bytes()),
        s.vram_bytes(),
    ]
}

impl Extremes {
    fn take(&mut self, index: u64, sample: Sample) {
        for (i, value) in series(&sample).into_iter().enumerate() {
            let Some(value) = value else { continue };
            let of = |k: &Option<(u64, Sample)>| k.as_ref().and_then(|(_, s)| series(s)[i]);
            if of(&self.lows[i]).is_none_or(|low| value < low) {
                self.lows[i] = Some((index, sample.clone()));
            }
            if of(&self.highs[i]).is_none_or(|high| value > high) {
                self.highs[i] = Some((index, sample.clone()));
            }
        }
        self.first.get_or_insert((index, sample));
    }

    /// Appends the kept samples in time order, each once.
    fn append_to(self, out: &mut Vec<(u64, Sample)>) {
        let mut picked: Vec<(u64, Sample)> = std::iter::once(self.first)
            .chain(self.lows)
            .chain(self.highs)
            .flatten()
            .collect();
        picked.sort_by_key(|(index, _)| *index);
        picked.dedup_by_key(|(index, _)| *index);
        out.extend(picked);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(i: u64, rss_bytes: u64) -> Sample {
        Sample::of_host(
            i as f64 * 1e-3,
            rss_bytes,
            rss_bytes / 2,
            rss_bytes / 4,
            i.is_multiple_of(3).then_some(i),
        )
    }

    #[test]
    fn a_run_that_fits_keeps_every_sample() {
        let mut envelope = Envelope::with_capacity(1000);
        let samples: Vec<Sample> = (0..1000).map(|i| sample(i, 7 * i % 13)).collect();
        samples.iter().for_each(|s| envelope.push(s.clone()));
        assert_eq!(envelope.finish(), (samples, None));
    }

    #[test]
    fn a_long_run_stays_bounded_and_keeps_every_extreme() {
        let cap = 4096;
        let n = 1_000_000u64;
        let mut envelope = Envelope::with_capacity(cap);
        // A slow wave, with one-sample spikes and dips at odd places.
        let value = |i: u64| match i {
            123_457 => 10_000,
            777_777 => 0,
            _ => 1000 + (i / 5000) % 50,
        };
        for i in 0..n {
            envelope.push(sample(i, value(i)));
        }
        let (kept, decimation) = envelope.finish();
        let decimation = decimation.expect("a million samples do not fit in 4096");
        assert!(kept.len() <= cap, "{} kept", kept.len());
        assert_eq!(decimation.samples_taken, n);
        assert!(decimation.bucket_samples.is_power_of_two());
        assert!(kept.windows(2).all(|w| w[0].t_s < w[1].t_s), "time order");
        let max = kept.iter().map(|s| s.host_bytes()).max();
        let min = kept.iter().map(|s| s.host_bytes()).min();
        assert_eq!((min, max), (Some(0), Some(10_000)));
        assert!(kept
            .iter()
            .any(|s| s.host_bytes() == 10_000 && (s.t_s * 1e3).round() as u64 == 123_457));
        assert_eq!(kept.first().map(|s| s.t_s), Some(0.0));
        assert_eq!(kept.last().map(|s| s.t_s), Some((n - 1) as f64 * 1e-3));
        // Every bucket's own lowest and highest reading is kept.
        let b = decimation.bucket_samples;
        for bucket in [0, 17, (n - 1) / b] {
            let range = bucket * b..((bucket + 1) * b).min(n);
            let high = range.clone().map(value).max().unwrap();
            assert!(
                kept.iter()
                    .any(|s| range.contains(&((s.t_s * 1e3).round() as u64))
                        && s.host_bytes() == high),
                "bucket {bucket}"
            );
        }
        let vram_max = kept.iter().filter_map(|s| s.vram_bytes()).max();
        assert_eq!(vram_max, Some((n - 1) / 3 * 3));
    }
}
