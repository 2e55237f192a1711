//! `signet bench load` with the transaction workloads against a real `signet serve --dev`:
//! the mixed workload signs (certificate, log entry, timestamp) and verifies (search by
//! digest, entry with inclusion proof) without errors, and its sign transactions land in the log.

use crate::common;

use std::process::Command;

use common::{agent, get, Server};
use serde_json::Value;

fn signet(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_signet")).args(args).output().expect("run signet")
}

fn tree_size(url: &str) -> u64 {
    get(&agent(), &format!("{url}/api/v1/log")).unwrap().json()["treeSize"].as_u64().expect("treeSize")
}

#[test]
fn mixed_workload_signs_and_verifies_against_a_dev_server() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &[]);
    let out = signet(&["dev-token", "--data-dir", data.to_str().unwrap(), "--subject", "lab@example.com"]);
    assert!(out.status.success(), "dev-token: {}", String::from_utf8_lossy(&out.stderr));
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();

    let before = tree_size(&server.url);
    let json = dir.path().join("mixed.json");
    let seed = 50;
    let out = signet(&[
        "bench", "load", "--target", &server.url, "--workload", "mixed", "--rate", "50", "--duration", "2",
        "--connections", "8", "--seed", &seed.to_string(), "--token", &token, "--json", json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "bench load failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();

    assert_eq!(r["workload"], "mixed");
    assert_eq!(r["scheduled"], 100);
    assert_eq!(r["errors"], serde_json::json!({}), "{stdout}");
    assert_eq!(r["ok"], 100);
    let sign_ok = r["by_kind"]["sign"]["ok"].as_u64().expect("by_kind.sign");
    let verify_ok = r["by_kind"]["verify"]["ok"].as_u64().expect("by_kind.verify");
    assert!(sign_ok > 0 && verify_ok > 0, "both kinds ran: {}", r["by_kind"]);
    assert_eq!(sign_ok + verify_ok, 100);
    assert!(r["by_kind"]["sign"]["latency_ms"]["p50"].as_f64().unwrap() > 0.0);
    // Report 004's mix: about a fifth of the transactions sign.
    assert!((5..=40).contains(&sign_ok), "{sign_ok} sign transactions of 100");
    for k in ["p50", "p90", "p99", "p999", "max"] {
        assert!(r["latency_ms"][k].is_number(), "latency_ms.{k}");
    }
    assert!(stdout.contains("\n  sign ") && stdout.contains("\n  verify "), "per-kind rows in the table: {stdout}");

    // The log grew by the seeded entries plus one entry per sign transaction (and at most a
    // few of the server's own, such as audit anchors).
    let grown = tree_size(&server.url) - before;
    let expected = seed + sign_ok;
    assert!((expected..=expected + 3).contains(&grown), "log grew by {grown}, expected about {expected}");
}

#[test]
fn sign_needs_a_token_and_soak_needs_a_pid() {
    let out = signet(&["bench", "load", "--target", "http://127.0.0.1:9", "--workload", "sign", "--rate", "5", "--duration", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--token"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = signet(&["bench", "load", "--target", "http://127.0.0.1:9", "--workload", "tsa", "--preset", "soak", "--duration", "5"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--preset soak needs --server-pid"));
    let out = signet(&["bench", "load", "--target", "http://127.0.0.1:9", "--workload", "tsa", "--preset", "soak"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--preset soak needs --duration"));
}

#[test]
fn warmup_arrivals_are_sent_but_not_recorded_and_the_disk_probe_reports() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &[]);
    let before = tree_size(&server.url);
    let json = dir.path().join("append.json");
    let out = signet(&[
        "bench", "load", "--target", &server.url, "--workload", "log-append", "--rate", "40", "--warmup", "1",
        "--duration", "1", "--connections", "4", "--disk-probe", data.to_str().unwrap(), "--json", json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "bench load failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!((r["scheduled"].as_u64(), r["ok"].as_u64(), r["warmup_s"].as_f64()), (Some(40), Some(40), Some(1.0)));
    let grown = tree_size(&server.url) - before;
    assert!((80..=83).contains(&grown), "warm-up entries were appended too: the log grew by {grown}");
    let disk = &r["disk"];
    assert!(disk["samples"].as_u64().unwrap() >= 10, "{disk}");
    assert!(disk["max_ms"].as_f64().unwrap() >= disk["p50_ms"].as_f64().unwrap());
    assert!(stdout.contains("disk probe ("), "{stdout}");
    assert!(!std::fs::read_dir(&data).unwrap().any(|e| e.unwrap().file_name().to_string_lossy().contains("disk-probe")));

    let out = signet(&["bench", "load", "--target", &server.url, "--workload", "log-read", "--rate", "5", "--duration", "1", "--warmup", "7200"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--warmup must be in [0, 3600] seconds"));
}

#[test]
fn a_header_goes_on_every_request_of_a_single_request_workload_and_not_on_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, "[guard.auth]\nrequire = \"all\"\n").unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &["--config", config.to_str().unwrap()]);
    let out = signet(&["admin", "token", "create", "--data-dir", data.to_str().unwrap(), "--role", "signer", "--name", "lab"]);
    assert!(out.status.success(), "token create: {}", String::from_utf8_lossy(&out.stderr));
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
    // The running server picks the new token up from its store.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while common::get_bearer(&agent(), &format!("{}/api/v1/log", server.url), &token).unwrap().status != 200 {
        assert!(std::time::Instant::now() < deadline, "the new token was never accepted");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let header = format!("Authorization: Bearer {token}");
    let tsa = |extra: &[&str]| -> Value {
        let json = dir.path().join("tsa.json");
        let mut args = vec!["bench", "load", "--target", &server.url, "--workload", "tsa", "--rate", "20", "--duration", "1"];
        args.extend_from_slice(&["--connections", "2", "--json", json.to_str().unwrap()]);
        args.extend_from_slice(extra);
        let out = signet(&args);
        assert!(out.status.success(), "bench load: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap()
    };
    let with = tsa(&["--header", &header]);
    assert_eq!((with["ok"].as_u64(), &with["errors"]), (Some(20), &serde_json::json!({})), "{with}");
    let without = tsa(&[]);
    assert_eq!((without["ok"].as_u64(), &without["errors"]), (Some(0), &serde_json::json!({"status_401": 20})), "{without}");

    let out = signet(&["bench", "load", "--target", &server.url, "--workload", "sign", "--rate", "5", "--duration", "1", "--token", "x", "--header", &header]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--header applies to single-request workloads"), "{}", String::from_utf8_lossy(&out.stderr));
}
