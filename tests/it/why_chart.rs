//! why.png from outside: a program plants 64 MiB in each host mechanism
//! (`tests/fixtures/planted.py`: live malloc chunks, freed-but-kept chunks,
//! a memfd segment, a mapped weight file) under `memrel exec`; its results
//! directory gets why.png beside timeline.png, each planted mechanism's bar
//! segment drawn in its fixed colour, and `memrel compare` of that
//! directory draws it again beside retained.png; `memrel report` redraws
//! the same bytes.

use std::path::Path;

use memrel::export::chart::palette::mechanism_colour;
use memrel::metrics::why::Mechanism;

/// `(width, height, RGB pixels)` of the PNG at `path`.
fn pixels(path: &Path) -> (u32, u32, Vec<u8>) {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut decoder = png::Decoder::new(file);
    decoder.set_transformations(png::Transformations::EXPAND);
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size()];
    let frame = reader.next_frame(&mut buf).expect("a frame");
    assert_eq!(frame.color_type, png::ColorType::Rgb, "{}", path.display());
    buf.truncate(frame.buffer_size());
    (frame.width, frame.height, buf)
}

/// How many pixels of `rgb` are `mechanism`'s colour.
fn painted(rgb: &[u8], mechanism: Mechanism) -> usize {
    let c = mechanism_colour(mechanism);
    rgb.chunks_exact(3)
        .filter(|p| p[0] == c.0 && p[1] == c.1 && p[2] == c.2)
        .count()
}

/// Asserts `path` is a why.png the width of every chart, one panel high
/// (the header, one resource's two lanes and axis, or its legend), with a
/// bar segment of each planted mechanism.
fn assert_planted_chart(path: &Path) {
    let (width, height, rgb) = pixels(path);
    assert_eq!(width, 1600, "{}", path.display());
    assert!(
        (250..=700).contains(&height),
        "{}: {height} px high",
        path.display()
    );
    for mechanism in [
        Mechanism::LiveHeap,
        Mechanism::FreeChunks,
        Mechanism::SharedMemory,
        Mechanism::MappedWeights,
    ] {
        // A 64 MiB segment is far wider than its legend swatch (22×15).
        let n = painted(&rgb, mechanism);
        assert!(
            n > 2_000,
            "{}: {mechanism:?} painted {n} px",
            path.display()
        );
    }
}

#[test]
fn a_planted_exec_draws_why_png_and_compare_and_report_draw_it_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/planted.py");
    let out = dir.path().join("out");
    crate::common::run_ok(
        crate::common::memrel()
            .arg("exec")
            .arg("--out")
            .arg(&out)
            .args(["--cycles", "2", "--strategy", "drop"])
            .args(["--strategy", "malloc-trim", "--", "python3", script, "64"])
            .arg(dir.path())
            .arg("--memrel"),
    );
    let results = crate::common::only_results_dir(&out, "exec");
    assert!(results.join("timeline.png").is_file());
    let why = results.join("why.png");
    assert_planted_chart(&why);

    let before = std::fs::read(&why).expect("why.png");
    crate::common::run_ok(crate::common::memrel().arg("report").arg(&results));
    assert!(
        std::fs::read(&why).expect("why.png") == before,
        "why.png changed when re-rendered"
    );

    let compared = dir.path().join("compared");
    crate::common::run_ok(
        crate::common::memrel()
            .arg("compare")
            .arg(&results)
            .arg("--out")
            .arg(&compared),
    );
    let compare_dir = crate::common::only_results_dir(&compared, "compare");
    assert!(compare_dir.join("retained.png").is_file());
    assert_planted_chart(&compare_dir.join("why.png"));
}
