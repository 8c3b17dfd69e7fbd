//! One file's download shown on stderr, as hf-hub reports it through its
//! `Progress` trait: a line when it starts (and when it resumes a partial
//! file), a bar while it runs (indicatif draws it only on a terminal), a line
//! when it is done. It must not change what is downloaded.

use std::time::Instant;

use indicatif::{HumanBytes, ProgressBar, ProgressStyle};

/// One file's download. hf-hub 0.4.3 calls `init` twice (for the temp file,
/// then for the request) and then `update` with the offset it resumes from
/// (0 when it starts afresh) before the bytes it reads: the resume test in
/// tests/it/model_arg/hub.rs pins that.
pub struct Download {
    repo: String,
    file: String,
    bar: ProgressBar,
    size_bytes: u64,
    announced: bool,
    /// The next `update` is the offset the request starts from.
    offset_next: bool,
    resumed_bytes: u64,
    started: Instant,
}

impl Download {
    pub fn new(repo: &str) -> Download {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template(
                "{msg} [{elapsed_precise}] {bar:30} {bytes}/{total_bytes} {bytes_per_sec} ({eta})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        Download {
            repo: repo.to_string(),
            file: String::new(),
            bar,
            size_bytes: 0,
            announced: false,
            offset_next: false,
            resumed_bytes: 0,
            started: Instant::now(),
        }
    }

    fn say(&self, line: String) {
        self.bar.suspend(|| eprintln!("{line}"));
    }
}

impl hf_hub::api::Progress for Download {
    fn init(&mut self, size: usize, filename: &str) {
        self.size_bytes = size as u64;
        self.file = filename.to_string();
        self.bar.set_length(self.size_bytes);
        self.bar.set_position(0);
        self.bar.set_message(format!("{}: {filename}", self.repo));
        self.offset_next = true;
        if !self.announced {
            self.announced = true;
            self.started = Instant::now();
            self.say(format!(
                "memrel: downloading {}: {filename} ({})",
                self.repo,
                HumanBytes(self.size_bytes)
            ));
        }
    }

    fn update(&mut self, bytes: usize) {
        if std::mem::take(&mut self.offset_next) && bytes > 0 {
            self.resumed_bytes = bytes as u64;
            self.say(format!(
                "memrel: resuming {}: {} at {} of {} (a partial download was in the cache)",
                self.repo,
                self.file,
                HumanBytes(self.resumed_bytes),
                HumanBytes(self.size_bytes)
            ));
        }
        self.bar.inc(bytes as u64);
    }

    fn finish(&mut self) {
        self.bar.finish_and_clear();
        let fetched = self.bar.position().saturating_sub(self.resumed_bytes);
        self.say(format!(
            "memrel: downloaded {}: {} ({} in {:.1} s)",
            self.repo,
            self.file,
            HumanBytes(fetched),
            self.started.elapsed().as_secs_f64()
        ));
    }
}
