//! `memrel calibrate` on this machine: exact allocations from the fake
//! worker (1 MiB to 1 GiB, anonymous and file-backed), measured by memrel,
//! must meet every target (size within 1 % + 64 pages, sampled peak within
//! 1 % of VmHWM, markers within one interval + 1 ms), and a 20 ms spike of
//! 100 MiB must be seen at the default 10 ms.

use super::common::*;

#[test]
fn calibrate_meets_its_targets_on_this_machine() {
    let out = tempfile::tempdir().expect("tempdir");
    let output = memrel()
        .args(["calibrate", "--out"])
        .arg(out.path())
        .output()
        .expect("memrel starts");
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", stderr(&output));
    let dir = only_results_dir(out.path(), "calibrate");
    let json = read_json(&dir.join("calibrate.json"));
    assert_eq!(json["passed"], true, "{stdout}");
    let cases = json["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 8, "4 sizes × anon and file: {json}");
    for case in cases {
        let expected = case["expected_bytes"].as_f64().expect("expected");
        for key in ["edge_bytes", "sampled_bytes"] {
            let got = case[key].as_f64().expect(key);
            assert!(
                (got - expected).abs() <= 0.01 * expected + 64.0 * 4096.0,
                "{key}: {case}"
            );
        }
    }
    for spike in json["spikes"].as_array().expect("spikes") {
        assert_eq!(spike["caught"], true, "{spike}");
    }
    assert!(dir.join("calibrate.md").is_file());
}
