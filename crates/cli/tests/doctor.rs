//! `signet doctor`: one line per check, exit 1 on any problem, and it changes nothing.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output};

use common::*;

fn doctor(args: &[&str]) -> (Output, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_signet")).arg("doctor").args(args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (out, text)
}

fn line<'a>(text: &'a str, needle: &str) -> &'a str {
    text.lines().find(|l| l.contains(needle)).unwrap_or_else(|| panic!("no line with {needle:?} in\n{text}"))
}

#[test]
fn a_healthy_instance_passes_and_each_problem_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    let mut server = Server::start(&data, &[]);

    let (out, text) = doctor(&["--data-dir", d]);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(!text.contains("FAIL"), "{text}");
    for check in ["keys in", "a --dev instance", "intermediate.pem matches its key", "tsa.pem matches its key", "schema at version", "TUF repository current", "/readyz: ready", "clock agrees with the TSA"] {
        assert!(line(&text, check).starts_with("ok    "), "{check}: {text}");
    }

    // A key others can read.
    let key = data.join("keys").join("tsa.pem");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (out, text) = doctor(&["--data-dir", d]);
    assert_eq!(out.status.code(), Some(1));
    assert!(line(&text, "tsa.pem has mode 644").starts_with("FAIL  "), "{text}");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();

    // A certificate that is not its key's.
    let tsa_cert = data.join("ca").join("tsa.pem");
    let saved = std::fs::read(&tsa_cert).unwrap();
    std::fs::copy(data.join("ca").join("intermediate.pem"), &tsa_cert).unwrap();
    let (out, text) = doctor(&["--data-dir", d, "--offline"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(line(&text, "does not match its certificate").contains("keys/tsa.pem"), "{text}");
    std::fs::write(&tsa_cert, saved).unwrap();

    // The instance is down: its readiness fails, --offline skips it.
    server.kill();
    // An unrestored backup: its logs take no appends, and doctor says how to make them.
    let copy = dir.path().join("copy");
    let b = Command::new(env!("CARGO_BIN_EXE_signet")).args(["backup", "--data-dir", d, "--out"]).arg(&copy).output().unwrap();
    assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
    let (out, text) = doctor(&["--data-dir", copy.to_str().unwrap(), "--offline"]);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(line(&text, "serves a backup of").starts_with("FAIL  ") && text.contains("signet restore --data-dir"), "{text}");
    let (out, text) = doctor(&["--data-dir", d]);
    assert_eq!(out.status.code(), Some(1));
    assert!(line(&text, "/readyz").starts_with("FAIL  "), "{text}");
    let (out, text) = doctor(&["--data-dir", d, "--offline"]);
    assert!(out.status.success(), "{text}");

    // A schema behind this build's: doctor says to migrate, and does not do it.
    let db = data.join("signet.sqlite");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let current: i32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    conn.execute_batch(&format!("PRAGMA user_version = {}", current - 1)).unwrap();
    drop(conn);
    let (out, text) = doctor(&["--data-dir", d, "--offline"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(line(&text, "run `signet migrate`").starts_with("FAIL  "), "{text}");
    let after: i32 = rusqlite::Connection::open(&db).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(after, current - 1, "doctor changed the schema");

    // A bad config is exit 2, before any check.
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[tuf]\ntimestamp_expiry_secs = 1\n").unwrap();
    let (out, _) = doctor(&["--config", bad.to_str().unwrap(), "--data-dir", d]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("tuf.timestamp_expiry_secs"));
}

#[test]
fn a_production_instance_is_warned_of_no_issuers_and_an_online_root_key() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let init = Command::new(env!("CARGO_BIN_EXE_signet")).args(["init", "--public-url", "https://signet.example.com", "--data-dir"]).arg(&data).output().unwrap();
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
    let config = data.join("signet.toml");
    let c = config.to_str().unwrap();
    let (out, text) = doctor(&["--config", c, "--offline"]);
    assert!(line(&text, "no OIDC issuer is configured").starts_with("warn  "), "{text}");
    // Right after init nothing is a problem: the log's file is made by the first serve.
    assert!(out.status.success(), "doctor fails right after init: {text}");
    assert!(line(&text, "not made yet").starts_with("warn  "), "{text}");
    assert!(line(&text, "ca-root.pem is online").starts_with("warn  "), "{text}");
    // init makes the TUF repository too (its root key is never made online by serve).
    assert!(line(&text, "tuf-root.pem is online").starts_with("warn  "), "{text}");
    assert!(!text.contains("a --dev instance"), "{text}");
    let checked = Command::new(env!("CARGO_BIN_EXE_signet")).args(["config", "check", "--config", c]).output().unwrap();
    assert!(checked.status.success(), "a warning, not an error: {}", String::from_utf8_lossy(&checked.stderr));
    assert!(String::from_utf8_lossy(&checked.stderr).contains("no OIDC issuer is configured"));

    // With an issuer, and the root keys taken offline, the warnings go.
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, r#"{"keys": []}"#).unwrap();
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!("\n[[oidc.issuers]]\nurl = \"https://accounts.example.com\"\ntype = \"email\"\njwks_file = \"{}\"\n", jwks.display()));
    std::fs::write(&config, text).unwrap();
    std::fs::rename(data.join("keys/ca-root.pem"), dir.path().join("offline-root.pem")).unwrap();
    std::fs::rename(data.join("keys/tuf-root.pem"), dir.path().join("offline-tuf-root.pem")).unwrap();
    let (_, text) = doctor(&["--config", c, "--offline"]);
    assert!(line(&text, "1 OIDC issuer(s) configured").starts_with("ok    "), "{text}");
    assert!(!text.contains("is online"), "{text}");
    let checked = Command::new(env!("CARGO_BIN_EXE_signet")).args(["config", "check", "--config", c]).output().unwrap();
    assert!(checked.status.success() && checked.stderr.is_empty(), "{}", String::from_utf8_lossy(&checked.stderr));
    assert!(line(&text, "/metrics is not served").starts_with("ok    "), "{text}");

    // Metrics off loopback are warned of; the admin API on loopback is fine.
    let text = std::fs::read_to_string(&config).unwrap().replacen("[http]\n", "[http]\nmetrics_listen = \"0.0.0.0:9464\"\nadmin_listen = \"127.0.0.1:9465\"\n", 1);
    std::fs::write(&config, text).unwrap();
    let (_, text) = doctor(&["--config", c, "--offline"]);
    assert!(line(&text, "http.metrics_listen = 0.0.0.0:9464").starts_with("warn  "), "{text}");
    assert!(line(&text, "the admin API on 127.0.0.1:9465").starts_with("ok    "), "{text}");
}

#[test]
fn the_printed_example_is_valid_and_a_bad_key_or_value_is_named_with_what_is_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let signet = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_signet")).args(args).output().unwrap();
    let example = signet(&["config", "example"]);
    assert!(example.status.success());
    let path = dir.path().join("example.toml");
    std::fs::write(&path, &example.stdout).unwrap();
    let checked = signet(&["config", "check", "--config", path.to_str().unwrap()]);
    assert!(checked.status.success(), "{}", String::from_utf8_lossy(&checked.stderr));
    for (toml, says) in [
        ("[tuf]\nenable = true\n", "unknown field `enable`, expected one of `enabled`"),
        ("[guard.redis]\non_failure = \"maybe\"\n", "unknown variant `maybe`, expected `open` or `closed`"),
        ("[log]\nbatch_max_entries = 0\n", "log.batch_max_entries must be 1..=65536"),
    ] {
        std::fs::write(&path, toml).unwrap();
        let out = signet(&["config", "check", "--dev", "--config", path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.code() == Some(2) && err.contains(says), "{toml}: {err}");
    }
}
