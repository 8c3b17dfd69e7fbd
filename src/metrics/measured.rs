//! What every way of measuring hands on (`plan`'s runs, `memrel attach`,
//! `memrel drive`): the results directory, the record as it was written
//! there, and the record's summary, so the console, the trace, a baseline's
//! save and exec's end notes take the measurement as it is, and none reads
//! back what was just written. (`report`, `compare` and `check` read saved
//! directories: `results::load`.)

use std::path::PathBuf;

use super::{summarize, Summary};
use crate::record::Record;

/// One measurement, just made.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The results directory it was written into.
    pub dir: PathBuf,
    /// The record, as its files hold it (times to the microsecond).
    pub record: Record,
    /// The summary its derived outputs (`summary.json`, the console) show.
    pub summary: Summary,
}

impl Measured {
    /// `record`, written into `dir`, with its summary.
    pub fn new(dir: PathBuf, record: Record) -> Measured {
        let summary = summarize(&record);
        Measured {
            dir,
            record,
            summary,
        }
    }
}
