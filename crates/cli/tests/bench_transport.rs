//! `signet bench load` transports against a real `signet serve --dev`: HTTP/2 by prior
//! knowledge (h2c) and a new connection per request; and flag combinations that cannot
//! work, refused with exit 2 and a message naming the flag. (TLS is tested in
//! `crates/lab/tests/transport.rs`, against an in-test TLS server.)

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

fn load(args: &[&str], json: &std::path::Path) -> Value {
    let mut all = vec!["bench", "load", "--json", json.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = signet(&all);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "bench load failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap()
}

#[test]
fn h2c_appends_and_transactions_run_against_a_dev_server() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &[]);
    let json = dir.path().join("h2.json");

    let before = tree_size(&server.url);
    let r = load(
        &["--target", &server.url, "--workload", "log-append", "--http", "2", "--connections", "2", "--streams", "4",
          "--rate", "40", "--duration", "1"],
        &json,
    );
    assert_eq!((r["http"].as_str(), r["streams"].as_u64()), (Some("2"), Some(4)));
    assert_eq!((r["scheduled"].as_u64(), r["ok"].as_u64()), (Some(40), Some(40)), "{}", r["errors"]);
    assert!(r.get("tls").is_none() && r.get("connect_ms").is_none());
    let grown = tree_size(&server.url) - before;
    assert!((40..=43).contains(&grown), "the log grew by {grown}, expected the 40 appended entries");

    // Transactions (several requests in sequence) ride on streams too; seeding goes over HTTP/1.1.
    let r = load(
        &["--target", &server.url, "--workload", "verify", "--http", "2", "--connections", "1", "--seed", "10",
          "--rate", "20", "--duration", "1"],
        &json,
    );
    assert_eq!((r["ok"].as_u64(), &r["errors"]), (Some(20), &serde_json::json!({})));

    // A new connection per request: every request is billed its connection setup.
    let r = load(
        &["--target", &format!("{}/healthz", server.url), "--workload", "custom", "--new-connection",
          "--connections", "4", "--rate", "30", "--duration", "1"],
        &json,
    );
    assert_eq!((r["ok"].as_u64(), r["connects"].as_u64(), r["new_connection"].as_bool()), (Some(30), Some(30), Some(true)));
    assert!(r["connect_ms"]["p50"].as_f64().unwrap() > 0.0);
}

#[test]
fn flag_combinations_that_cannot_work_exit_2_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let not_pem = dir.path().join("ca.pem");
    std::fs::write(&not_pem, "hello").unwrap();
    let base = ["bench", "load", "--workload", "custom", "--rate", "5", "--duration", "1"];
    let cases: &[(&[&str], &str)] = &[
        (&["--target", "http://127.0.0.1:9", "--streams", "8"], "--streams needs --http 2"),
        (&["--target", "http://127.0.0.1:9", "--http", "2", "--new-connection", "--streams", "8"], "--streams does not go with --new-connection"),
        (&["--target", "http://127.0.0.1:9", "--ca-file", not_pem.to_str().unwrap()], "needs an https:// target"),
        (&["--target", "https://127.0.0.1:9", "--ca-file", not_pem.to_str().unwrap()], "holds no CERTIFICATE block; expected PEM CA certificates"),
        (&["--target", "ftp://127.0.0.1:9"], "must be an http:// or https:// URL"),
        (&["--target", "http://127.0.0.1:9", "--http", "3"], "unknown HTTP version \"3\"; expected 1.1 or 2"),
        (&["--target", "http://127.0.0.1:9", "--http", "2", "--streams", "0"], "streams must be 1..=1000"),
    ];
    for (args, expected) in cases {
        let mut all = base.to_vec();
        all.extend_from_slice(args);
        let out = signet(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: expected {expected:?} in {stderr}");
    }
}
