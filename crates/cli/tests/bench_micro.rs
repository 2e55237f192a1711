//! `signet bench micro`: suites listed by name, a suite run by name into JSON, and a usage
//! error for a name that picks nothing. Shapes only: speed is not a test's business.

use std::process::Command;

fn signet() -> Command {
    Command::new(env!("CARGO_BIN_EXE_signet"))
}

#[test]
fn list_names_every_suite_and_benchmark() {
    let out = signet().args(["bench", "micro", "--list"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for suite in ["core: ", "log: ", "ca: ", "guard: "] {
        assert!(text.lines().any(|l| l.starts_with(suite)), "no suite line {suite:?} in\n{text}");
    }
    for id in ["core/jcs/hashedrekord", "log/tree/inclusion_proof_1m", "log/sqlite/commit_256", "ca/tsa/timestamp", "guard/ratelimit/refuse"] {
        assert!(text.contains(id), "{id} not listed in\n{text}");
    }
}

#[test]
fn core_suite_writes_json_with_a_positive_median() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("micro.json");
    let out = signet().args(["bench", "micro", "core", "--quick", "--json"]).arg(&json).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("| core/jcs/hashedrekord "), "no table row in\n{stdout}");

    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r["quick"], true);
    let benches = r["benchmarks"].as_array().unwrap();
    let ids: Vec<&str> = benches.iter().map(|b| b["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["core/jcs/hashedrekord", "core/pubkey/parse_and_verify_digest", "core/pubkey/verify_digest"], "{r}");
    for b in benches {
        let median = b["median_ns"].as_f64().unwrap();
        assert!(median > 0.0, "{b}");
        assert!(b["median_lower_ns"].as_f64().unwrap() <= median && median <= b["median_upper_ns"].as_f64().unwrap(), "{b}");
        assert!(b["mean_ns"].as_f64().unwrap() > 0.0 && b["ops_per_s"].as_f64().unwrap() > 0.0, "{b}");
    }
    assert_eq!(benches[0]["throughput"]["unit"], "bytes");
    // A P-256 verification is tens of µs; canonical JSON of one body is about one.
    assert!(benches[2]["median_ns"].as_f64().unwrap() > benches[0]["median_ns"].as_f64().unwrap(), "{r}");
}

#[test]
fn a_name_that_picks_nothing_is_a_usage_error() {
    let out = signet().args(["bench", "micro", "no-such-bench"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("\"no-such-bench\"") && err.contains("core, log, ca, guard"), "{err}");
}
