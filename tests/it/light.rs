//! A light clone (issue 36, line 10): a results directory whose samples.csv
//! and events.csv are kept gzipped (`samples.csv.gz`, `events.csv.gz`) reads,
//! reports and compares exactly as the plain one does; re-rendering it keeps
//! them gzipped, byte for byte; a gzipped file cut short is damage, named.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use memrel::record::fixture;

use super::common::*;

const CSVS: [&str; 2] = ["samples.csv", "events.csv"];

/// The fixture record saved plain into `root/name`, with its summary and chart.
fn saved(root: &Path, name: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).expect("mkdir");
    fixture::record().save(&dir).expect("save");
    run_ok(memrel().arg("report").arg(&dir));
    dir
}

/// Replaces `dir`'s CSVs with gzipped copies (as `gzip` would).
fn gzip_csvs(dir: &Path) {
    for name in CSVS {
        let plain = dir.join(name);
        let bytes = std::fs::read(&plain).expect("csv");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&bytes).expect("gzip");
        std::fs::write(dir.join(format!("{name}.gz")), gz.finish().expect("gzip")).expect("write");
        std::fs::remove_file(plain).expect("rm");
    }
}

fn gunzip(path: &Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).expect("gz"))
        .read_to_end(&mut bytes)
        .expect("gunzip");
    bytes
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn a_directory_with_gzipped_csvs_reports_as_the_plain_one_and_stays_gzipped() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let plain = saved(tmp.path(), "plain");
    let gz = saved(tmp.path(), "gz");
    gzip_csvs(&gz);

    let a = run_ok(memrel().arg("report").arg(&plain));
    let b = run_ok(memrel().arg("report").arg(&gz));
    // The same table; only the directory named on the last line differs.
    let table = |o: &std::process::Output| {
        let t = text(&o.stdout);
        t[..t.find("re-rendered:").unwrap_or(t.len())].to_string()
    };
    assert_eq!(table(&a), table(&b));
    for file in ["summary.json", "runs.json", "timeline.png"] {
        assert!(
            read(&plain.join(file)) == read(&gz.join(file)),
            "{file} differs"
        );
    }
    for name in CSVS {
        assert!(
            !gz.join(name).exists(),
            "report wrote a plain {name} beside {name}.gz"
        );
        let kept = gz.join(format!("{name}.gz"));
        assert!(
            gunzip(&kept) == read(&plain.join(name)),
            "{name}.gz holds other rows"
        );
    }
    // Re-rendered once more, the gzipped files come out byte for byte the same.
    let before: Vec<Vec<u8>> = CSVS
        .iter()
        .map(|n| read(&gz.join(format!("{n}.gz"))))
        .collect();
    run_ok(memrel().arg("report").arg(&gz));
    let after: Vec<Vec<u8>> = CSVS
        .iter()
        .map(|n| read(&gz.join(format!("{n}.gz"))))
        .collect();
    assert!(before == after, "re-rendering changed the gzipped files");
}

/// compare.md and compare.csv wherever `memrel compare` wrote them under `out`.
fn compare_files(out: &Path) -> Vec<(String, Vec<u8>)> {
    let mut found = Vec::new();
    let mut stack = vec![out.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if ["compare.md", "compare.csv"]
                .iter()
                .any(|n| path.file_name().is_some_and(|f| f == *n))
            {
                // By name: the directory is named by the second it was made in.
                let name = path.file_name().map(|f| f.to_string_lossy().into_owned());
                found.push((name.unwrap_or_default(), read(&path)));
            }
        }
    }
    found.sort();
    found
}

#[test]
fn gzipped_directories_compare_as_the_plain_ones() {
    let (plain, gz) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for name in ["a", "b"] {
        saved(plain.path(), name);
        gzip_csvs(&saved(gz.path(), name));
    }
    for root in [plain.path(), gz.path()] {
        run_ok(
            memrel()
                .current_dir(root)
                .args(["compare", "a", "b", "--out", "out"]),
        );
    }
    let a = compare_files(&plain.path().join("out"));
    let b = compare_files(&gz.path().join("out"));
    assert!(!a.is_empty(), "memrel compare wrote no compare.md");
    assert!(a == b, "the comparisons differ");
}

#[test]
fn a_gzipped_samples_file_cut_short_is_refused_by_name() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = saved(tmp.path(), "run");
    gzip_csvs(&dir);
    let path = dir.join("samples.csv.gz");
    let bytes = read(&path);
    std::fs::write(&path, &bytes[..bytes.len() / 2]).expect("cut");
    let output = memrel()
        .arg("report")
        .arg(&dir)
        .output()
        .expect("memrel starts");
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    assert!(
        stderr(&output).contains("samples.csv.gz"),
        "{}",
        streams(&output)
    );
    assert!(
        read(&path) == bytes[..bytes.len() / 2],
        "the damaged file was rewritten"
    );
}
