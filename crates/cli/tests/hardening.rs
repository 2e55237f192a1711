//! Regression tests for issue 17 (hardening): each names the item it covers. Every one of
//! them failed on the code before its fix.

use crate::common;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
use common::*;
use serde_json::json;
use signet_core::{b64, hash};

/// A self-signed certificate that carries `padding` bytes of a private extension, and a
/// signature over `artifact` by its key. Rekor never checks the certificate's own
/// signature, so any client can make an entry as large as the body limit allows.
fn large_certificate(artifact: &[u8], padding: usize) -> (Vec<u8>, Vec<u8>) {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["big.example".to_string()]).unwrap();
    params.custom_extensions.push(rcgen::CustomExtension::from_oid_content(&[1, 3, 6, 1, 4, 1, 99999, 1], vec![0x55; padding]));
    let cert = params.self_signed(&key).unwrap();
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &key.serialize_der()).unwrap();
    let sig = pair.sign(&SystemRandom::new(), artifact).unwrap();
    (cert.der().to_vec(), sig.as_ref().to_vec())
}

fn v2_entry_with_large_certificate(artifact: &[u8], padding: usize) -> serde_json::Value {
    let (cert, sig) = large_certificate(artifact, padding);
    json!({"hashedRekordRequestV002": {
        "digest": b64::encode(hash::sha256(artifact)),
        "signature": {"content": b64::encode(&sig), "verifier": {
            "x509Certificate": {"rawBytes": b64::encode(&cert)}, "keyDetails": "PKIX_ECDSA_P256_SHA_256"}}}})
}

fn v1_entry_with_large_certificate(artifact: &[u8], padding: usize) -> serde_json::Value {
    let (cert, sig) = large_certificate(artifact, padding);
    json!({"apiVersion": "0.0.1", "kind": "hashedrekord", "spec": {
        "signature": {"content": b64::encode(&sig), "publicKey": {"content": b64::encode(signet_core::pem::encode("CERTIFICATE", &cert))}},
        "data": {"hash": {"algorithm": "sha256", "value": hex::encode(hash::sha256(artifact))}}}})
}

/// Item 1: an entry over 65,535 bytes used to be logged, and from then on its entry-bundle
/// tile could be neither built nor read (a `u16` length `expect`ed in tiles.rs).
#[test]
fn oversized_v2_entry_is_refused_and_the_log_keeps_working() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let (agent, u) = (agent(), |p: &str| format!("{}{p}", server.url));

    let big = post_json(&agent, &u("/api/v2/log/entries"), &v2_entry_with_large_certificate(b"big", 70_000)).unwrap();
    assert_eq!(big.status, 413, "{}", big.text());
    let message = big.json()["message"].as_str().unwrap().to_string();
    assert!(message.contains("32768") && message.contains("max_entry_bytes"), "names the limit: {message}");
    // Just under the 16-bit limit but over the default entry limit: refused too.
    let mid = post_json(&agent, &u("/api/v2/log/entries"), &v2_entry_with_large_certificate(b"mid", 40_000)).unwrap();
    assert_eq!(mid.status, 413, "{}", mid.text());
    // The same kind of entry at a normal size is fine.
    let small = post_json(&agent, &u("/api/v2/log/entries"), &v2_entry_with_large_certificate(b"small", 1_000)).unwrap();
    assert_eq!(small.status, 201, "{}", small.text());

    let signer = Signer::new();
    let r = post_json(&agent, &u("/api/v2/log/entries"), &signer.v2_entry(b"after")).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["logIndex"], "2", "genesis, the small certificate entry, this one");
    let bundle = get(&agent, &u("/api/v2/tile/entries/000.p/3")).unwrap();
    assert_eq!(bundle.status, 200, "{}", bundle.text());
    let tile = get(&agent, &u("/api/v2/tile/0/000.p/3")).unwrap();
    assert_eq!((tile.status, tile.body.len()), (200, 3 * 32));

    // Rekor v1 has the same admission limit.
    let v1 = post_json(&agent, &u("/api/v1/log/entries"), &v1_entry_with_large_certificate(b"v1 big", 40_000)).unwrap();
    assert_eq!(v1.status, 413, "{}", v1.text());
    let v1 = post_json(&agent, &u("/api/v1/log/entries"), &v1_entry_with_large_certificate(b"v1 small", 1_000)).unwrap();
    assert_eq!(v1.status, 201, "{}", v1.text());
}

/// Item 2: a multibyte character in a 64- or 80-byte UUID made `split_at(16)` panic.
#[test]
fn entry_uuids_are_validated_before_they_are_sliced() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let agent = agent();
    // 15 ASCII characters, then 'é' (2 bytes) across the split at byte 16, 80 bytes in all.
    let eighty = format!("{}é{}", "0".repeat(15), "0".repeat(63));
    let sixty_four = format!("{}é{}", "0".repeat(30), "0".repeat(32));
    for uuid in [eighty, sixty_four, "ü".repeat(32)] {
        assert!(uuid.len() == 80 || uuid.len() == 64);
        let encoded: String = uuid.bytes().map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") }).collect();
        let r = get(&agent, &format!("{}/api/v1/log/entries/{encoded}", server.url)).unwrap();
        assert_eq!(r.status, 400, "{}", r.text());
        assert!(r.json()["message"].as_str().unwrap().contains("not hex"));
        let r = post_json(&agent, &format!("{}/api/v1/log/entries/retrieve", server.url), &json!({"entryUUIDs": [uuid]})).unwrap();
        assert_eq!(r.status, 400, "{}", r.text());
    }
    // The server is still there.
    assert_eq!(get(&agent, &format!("{}/healthz", server.url)).unwrap().status, 200);
}

/// Item 15: the retrieve and index routes ignored unknown fields, and tile paths had
/// non-canonical aliases.
#[test]
fn unknown_fields_and_noncanonical_tile_paths_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let (agent, u) = (agent(), |p: &str| format!("{}{p}", server.url));
    let hash = format!("sha256:{}", "ab".repeat(32));
    for (path, body) in [
        ("/api/v1/log/entries/retrieve", json!({"logIndexes": [0], "logIndex": [1]})),
        ("/api/v1/index/retrieve", json!({"hash": hash, "hashes": []})),
        ("/api/v1/index/retrieve", json!({"hash": hash, "operator": "xor"})),
    ] {
        let r = post_json(&agent, &u(path), &body).unwrap();
        assert_eq!(r.status, 400, "{path} {body}: {}", r.text());
    }
    assert_eq!(post_json(&agent, &u("/api/v1/log/entries/retrieve"), &json!({"logIndexes": [0]})).unwrap().status, 200);
    assert_eq!(post_json(&agent, &u("/api/v1/index/retrieve"), &json!({"hash": hash, "operator": "and"})).unwrap().status, 200);

    assert_eq!(get(&agent, &u("/api/v2/tile/0/000.p/1")).unwrap().status, 200);
    for alias in ["/api/v2/tile/00/000.p/1", "/api/v2/tile/0/000.p/01", "/api/v2/tile/0/x000/000.p/1", "/api/v2/tile/entries/x000/000.p/1"] {
        let r = get(&agent, &u(alias)).unwrap();
        assert_eq!(r.status, 400, "{alias}: {}", r.text());
    }
}

/// Starts `signet serve --dev` with `config` (TOML), its soft open-file limit first lowered
/// to `nofile`, and waits for the ready line.
fn start_with(dir: &std::path::Path, config: &str, nofile: u32) -> Server {
    use std::io::BufRead;
    let config_path = dir.join("signet.toml");
    std::fs::write(&config_path, config).unwrap();
    let data_dir = dir.join("data");
    let mut child = std::process::Command::new("sh")
        .args(["-c", &format!("ulimit -Sn {nofile} && exec \"$0\" \"$@\"")])
        .arg(env!("CARGO_BIN_EXE_signet"))
        .args(["serve", "--dev", "--plain-http", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config_path)
        .arg("--data-dir")
        .arg(&data_dir)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines.next().unwrap().unwrap();
    let url = line.strip_prefix("signet listening on ").unwrap_or_else(|| panic!("{line}")).to_string();
    std::thread::spawn(move || for _ in lines {});
    Server { child, url, data_dir }
}

fn addr(server: &Server) -> String {
    server.url.trim_start_matches("http://").to_string()
}

/// Whether the server has closed `conn` (a read sees EOF or a reset within `wait`).
fn closed_by_server(conn: &mut std::net::TcpStream, wait: std::time::Duration) -> bool {
    use std::io::Read;
    conn.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 512];
    loop {
        match conn.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue, // e.g. a 408 before the close
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut => return false,
            Err(_) => return true,
        }
    }
}

/// Item 6: 1,500 connections that send half a request and stall. With no header timeout and
/// `nofile` 1024, they used to starve the server: `/healthz` was dead for 30 s.
#[test]
fn stalled_connections_neither_starve_the_server_nor_stay() {
    use std::io::Write;
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let server = start_with(dir.path(), "[http]\nheader_read_timeout_secs = 3\n", 1024);
    let mut stalled = Vec::new();
    for _ in 0..1_500 {
        let mut c = std::net::TcpStream::connect(addr(&server)).unwrap();
        let _ = c.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n");
        stalled.push(c);
    }
    let fresh = ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(Duration::from_secs(2))).build();
    let fresh: ureq::Agent = fresh.into();
    let started = Instant::now();
    let r = get(&fresh, &format!("{}/healthz", server.url)).expect("a fresh client is answered within 2 s");
    assert_eq!(r.status, 200);
    assert!(started.elapsed() < Duration::from_secs(2));

    // The server closes them: all well within a minute (3 s header timeout here).
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut open: Vec<_> = stalled;
    while !open.is_empty() && Instant::now() < deadline {
        open.retain_mut(|c| !closed_by_server(c, Duration::from_millis(1)));
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(open.len() < 15, "{} of 1500 stalled connections still open after a minute", open.len());
    let metrics = get(&agent(), &format!("{}/metrics", server.url)).unwrap().text();
    assert!(metrics.contains("signet_connections_open"), "{metrics}");
}

/// Item 6: past `max_connections`, a new connection is closed at once.
#[test]
fn connections_past_the_cap_are_closed_at_once() {
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let server = start_with(dir.path(), "[http]\nmax_connections = 20\n", 4096);
    let held: Vec<_> = (0..20).map(|_| std::net::TcpStream::connect(addr(&server)).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut extra = std::net::TcpStream::connect(addr(&server)).unwrap();
    assert!(closed_by_server(&mut extra, Duration::from_secs(2)), "the 21st connection is closed");
    drop(held);
    // Once they are gone, the server answers again.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if get(&agent(), &format!("{}/healthz", server.url)).map(|r| r.status) .ok() == Some(200) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the server answers once the held connections close");
        std::thread::sleep(Duration::from_millis(100));
    }
    let metrics = get(&agent(), &format!("{}/metrics", server.url)).unwrap().text();
    assert!(!metrics.contains("signet_connections_closed_total{reason=\"max_connections\"} 0"), "{metrics}");
}

/// Item 7: a client that sent half a request held SIGTERM for 30 s or more.
#[test]
fn shutdown_is_bounded_by_the_grace_period() {
    use std::io::Write;
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let mut server = start_with(dir.path(), "[http]\nshutdown_grace_secs = 2\nheader_read_timeout_secs = 60\nidle_timeout_secs = 600\n", 4096);
    let signer = Signer::new();
    let r = post_json(&agent(), &format!("{}/api/v1/log/entries", server.url), &signer.v1_entry(b"before shutdown")).unwrap();
    assert_eq!(r.status, 201);
    // Half a request with a body still to come.
    let mut half = std::net::TcpStream::connect(addr(&server)).unwrap();
    half.write_all(b"POST /api/v1/log/entries HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{\"apiVersion\"").unwrap();
    std::thread::sleep(Duration::from_millis(300));

    let started = Instant::now();
    let status = std::process::Command::new("kill").args(["-TERM", &server.child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let deadline = started + Duration::from_secs(10);
    let exit = loop {
        if let Some(exit) = server.child.try_wait().unwrap() {
            break exit;
        }
        assert!(Instant::now() < deadline, "signet still running 10 s after SIGTERM with a 2 s grace period");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "exit 0 after a bounded shutdown: {exit:?}");
    assert!(started.elapsed() >= Duration::from_millis(1500), "in-flight requests got their grace period");

    // What was acknowledged is still there.
    let server = Server::start(&server.data_dir.clone(), &[]);
    let r = get(&agent(), &format!("{}/api/v1/log/entries?logIndex=1", server.url)).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
}

/// Item 8: a second server on the same data dir used to start, rewrite the published URL
/// and issuer files, and break the first one's signingCert until it restarted.
#[test]
fn a_second_server_on_one_data_dir_exits_2_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let first = Server::start(dir.path(), &[]);
    let files = ["public-url", "oidc-issuer"];
    let snapshot = |d: &std::path::Path| -> Vec<Option<Vec<u8>>> {
        let mut all: Vec<Option<Vec<u8>>> = files.iter().map(|f| std::fs::read(d.join(f)).ok()).collect();
        let mut names: Vec<_> = std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        all.push(Some(format!("{names:?}").into_bytes()));
        all
    };
    let before = snapshot(dir.path());
    let second = std::process::Command::new(env!("CARGO_BIN_EXE_signet"))
        .args(["serve", "--dev", "--plain-http", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(stderr.contains(&format!("is in use by pid {}", first.child.id())), "{stderr}");
    assert_eq!(snapshot(dir.path()), before, "the second server changed nothing");

    // The first one still issues certificates, and admin commands work beside it.
    let token = std::process::Command::new(env!("CARGO_BIN_EXE_signet"))
        .args(["dev-token", "--subject", "me@example.com", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(token.status.success());
    let list = std::process::Command::new(env!("CARGO_BIN_EXE_signet")).args(["admin", "token", "list", "--data-dir"]).arg(dir.path()).output().unwrap();
    assert!(list.status.success(), "{}", String::from_utf8_lossy(&list.stderr));
    let ready = get(&agent(), &format!("{}/readyz", first.url)).unwrap();
    assert_eq!(ready.status, 200, "{}", ready.text());
}

/// Item 19: the access log carries the id sent back in `x-request-id`, names the path
/// without its query, and never a token.
#[test]
fn access_log_lines_carry_the_request_id_and_no_secret() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, "[http]\naccess_log = true\n").unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_signet"))
        .args(["serve", "--dev", "--plain-http", "--listen", "127.0.0.1:0", "--log-format", "json", "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let line = std::io::BufReader::new(child.stdout.take().unwrap()).lines().next().unwrap().unwrap();
    let url = line.strip_prefix("signet listening on ").unwrap().to_string();
    let stderr = child.stderr.take().unwrap();
    let secret = "sgt_0000000000000000_secretsecretsecretsecret";
    let r = get_bearer(&agent(), &format!("{url}/api/v1/log?token={secret}"), secret).unwrap();
    // A credential in the URL is refused (the validation layer), without echoing it.
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("credential") && !r.text().contains("secretsecret"), "{}", r.text());
    let id = r.header("x-request-id").expect("x-request-id").to_string();
    assert_eq!(id.len(), 24);
    let other = get(&agent(), &format!("{url}/healthz")).unwrap();
    assert_ne!(other.header("x-request-id"), Some(id.as_str()), "each request has its own id");
    std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    child.wait().unwrap();
    let lines: Vec<serde_json::Value> = std::io::BufReader::new(stderr)
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).expect("every line is JSON"))
        .collect();
    let access: Vec<&serde_json::Value> = lines.iter().filter(|l| l["target"] == "signet::access").collect();
    let mine = access.iter().find(|l| l["request_id"] == id.as_str()).unwrap_or_else(|| panic!("no access line for {id}: {lines:?}"));
    assert_eq!(mine["path"], "/api/v1/log");
    assert_eq!(mine["status"], 400);
    assert!(lines.iter().any(|l| l["message"] == "signet started" && l["listen"].as_str().is_some()), "startup line: {lines:?}");
    assert!(lines.iter().any(|l| l["message"] == "signet stopped" && l["reason"] == "SIGTERM"), "shutdown line: {lines:?}");
    let all = format!("{lines:?}");
    assert!(!all.contains("secretsecret"), "no token in the logs");
}

/// In JSON log mode a fatal start-up error is a JSON line like every other (issue 44): a bad
/// config, and a start that fails (the data dir held by another server); every line on
/// stderr parses, and the last one says why, as an error. Text mode keeps its plain line.
#[test]
fn a_fatal_start_up_error_comes_out_in_the_chosen_log_format() {
    let dir = tempfile::tempdir().unwrap();
    let serve = |format: &str, config: &std::path::Path, data: &std::path::Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_signet"))
            .args(["serve", "--dev", "--plain-http", "--listen", "127.0.0.1:0", "--log-format", format, "--config"])
            .arg(config)
            .arg("--data-dir")
            .arg(data)
            .output()
            .unwrap()
    };
    let last_json_line = |out: &std::process::Output| -> serde_json::Value {
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect();
        lines.last().cloned().unwrap_or_else(|| panic!("nothing on stderr"))
    };
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[http]\nno_such_key = 1\n").unwrap();
    let out = serve("json", &bad, &dir.path().join("data"));
    assert_eq!(out.status.code(), Some(2));
    let line = last_json_line(&out);
    assert_eq!(line["level"], "ERROR");
    assert_eq!(line["fatal"], true);
    assert!(line["message"].as_str().unwrap().contains("no_such_key"), "{line}");
    assert!(line["timestamp"].as_str().unwrap().ends_with('Z'), "{line}");
    let text = serve("text", &bad, &dir.path().join("data"));
    assert!(String::from_utf8_lossy(&text.stderr).starts_with("signet: "), "{}", String::from_utf8_lossy(&text.stderr));

    // A start that fails after logging began: the data dir is another server's.
    let good = dir.path().join("good.toml");
    std::fs::write(&good, "").unwrap();
    let data = dir.path().join("held");
    let _first = Server::start(&data, &[]);
    let out = serve("json", &good, &data);
    assert_eq!(out.status.code(), Some(2));
    let line = last_json_line(&out);
    assert_eq!((line["level"].as_str(), line["fatal"].as_bool()), (Some("ERROR"), Some(true)), "{line}");
    assert!(line["message"].as_str().unwrap().contains("in use"), "{line}");
}

/// Item 19: with stdout and stderr on a full disk (/dev/full), writing a log line used to
/// panic (`println!`, and tracing's own `eprintln!` on a failed write). Now lines are
/// dropped and counted, and signet keeps serving and logging entries.
#[test]
fn a_full_log_disk_does_not_take_signet_down() {
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, "[http]\naccess_log = true\n").unwrap();
    let full = || std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_signet"))
        .args(["serve", "--dev", "--plain-http", "--listen", &format!("127.0.0.1:{port}"), "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .stdout(full())
        .stderr(full())
        .spawn()
        .unwrap();
    let mut server = Server { child, url: format!("http://127.0.0.1:{port}"), data_dir: dir.path().join("data") };
    let deadline = Instant::now() + Duration::from_secs(20);
    while get(&agent(), &format!("{}/readyz", server.url)).map(|r| r.status).ok() != Some(200) {
        assert!(server.child.try_wait().unwrap().is_none(), "signet exited with its output on a full disk");
        assert!(Instant::now() < deadline, "never ready");
        std::thread::sleep(Duration::from_millis(100));
    }
    let signer = Signer::new();
    for i in 0..20 {
        let r = post_json(&agent(), &format!("{}/api/v1/log/entries", server.url), &signer.v1_entry(format!("full {i}").as_bytes())).unwrap();
        assert_eq!(r.status, 201, "{}", r.text());
    }
    // A refused request, and its access-log line, go the same way.
    let bad = get(&agent(), &format!("{}/api/v1/log/entries/{}", server.url, "ab".repeat(32))).unwrap();
    assert_eq!(bad.status, 404);
    let metrics = get(&agent(), &format!("{}/metrics", server.url)).unwrap().text();
    let dropped: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("signet_log_lines_dropped_total "))
        .and_then(|v| v.parse().ok())
        .expect("the dropped-lines counter");
    assert!(dropped >= 20, "the lines that could not be written are counted: {dropped}");
    assert!(server.child.try_wait().unwrap().is_none());
    server.kill();
}

/// Item 11: a search by digest copied every candidate and read up to 1000 entries per
/// request, however often the digest was logged. Now a page is at most 256, and the next
/// page is asked for with `?after=`.
#[test]
fn searches_are_paginated() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let url = server.url.clone();
    let handles: Vec<_> = (0..6)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || {
                let agent = agent();
                for _ in 0..50 {
                    let r = post_json(&agent, &format!("{url}/api/v1/log/entries"), &Signer::new().v1_entry(b"popular")).unwrap();
                    assert_eq!(r.status, 201);
                }
            })
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().unwrap());
    let query = json!({"hash": format!("sha256:{}", hex::encode(hash::sha256(b"popular")))});
    let first = post_json(&agent(), &format!("{url}/api/v1/index/retrieve"), &query).unwrap();
    assert_eq!(first.status, 200);
    assert_eq!(first.json().as_array().unwrap().len(), 256);
    let after = first.header("x-next-after").expect("more to come").to_string();
    let second = post_json(&agent(), &format!("{url}/api/v1/index/retrieve?after={after}"), &query).unwrap();
    assert_eq!(second.json().as_array().unwrap().len(), 44);
    assert_eq!(second.header("x-next-after"), None);
    let mut all: Vec<serde_json::Value> = first.json().as_array().unwrap().clone();
    all.extend(second.json().as_array().unwrap().iter().cloned());
    all.sort_by_key(|v| v.to_string());
    all.dedup();
    assert_eq!(all.len(), 300, "the two pages are disjoint and complete");
}

/// Item 17: the SQLite `-wal`/`-shm` files were created 0644, and an existing 0755 data dir
/// was kept.
#[test]
fn everything_in_the_data_dir_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    let server = Server::start(&data, &[]);
    let r = post_json(&agent(), &format!("{}/api/v1/log/entries", server.url), &Signer::new().v1_entry(b"modes")).unwrap();
    assert_eq!(r.status, 201);
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&data), 0o700);
    let mut seen = 0;
    let mut stack = vec![data.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                assert_eq!(mode(&p), 0o700, "{}", p.display());
                stack.push(p);
            } else {
                assert_eq!(mode(&p) & 0o077, 0, "{} is {:o}", p.display(), mode(&p));
                seen += 1;
            }
        }
    }
    assert!(data.join("signet.sqlite-wal").exists() && seen > 5);
}

/// Item 18: without --dev, a missing root CA or TSA key used to be generated silently,
/// online. Production keys now come from `signet init`, the root key can stay offline, and
/// every key must match its published certificate at start.
#[test]
fn production_keys_come_from_init_and_are_checked_at_start() {
    use std::io::BufRead;
    use std::os::unix::fs::PermissionsExt;
    use std::process::{Command, Stdio};
    let bin = env!("CARGO_BIN_EXE_signet");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");

    let refused = Command::new(bin).args(["serve", "--public-url", &url, "--data-dir"]).arg(&data).output().unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("signet init --data-dir"), "names the command to run: {stderr}");
    assert!(!data.join("keys").exists(), "and made no key");

    let root_key = dir.path().join("offline-root.pem");
    let init = Command::new(bin).args(["init", "--public-url", &url, "--data-dir"]).arg(&data).arg("--root-key-out").arg(&root_key).output().unwrap();
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
    assert!(!data.join("keys/ca-root.pem").exists(), "the root key is not online");
    assert_eq!(std::fs::metadata(&root_key).unwrap().permissions().mode() & 0o777, 0o600);
    let again = Command::new(bin).args(["init", "--public-url", &url, "--data-dir"]).arg(&data).output().unwrap();
    assert_eq!(again.status.code(), Some(2), "init never overwrites keys");

    let start = || {
        let mut child = Command::new(bin)
            .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--config"])
            .arg(data.join("signet.toml"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let first = std::io::BufReader::new(child.stdout.take().unwrap()).lines().next().map(|l| l.unwrap());
        (child, first)
    };
    let (child, first) = start();
    assert_eq!(first.as_deref(), Some(format!("signet listening on {url}").as_str()));
    let mut server = Server { child, url: url.clone(), data_dir: data.clone() };
    assert_eq!(get(&agent(), &format!("{url}/api/v2/trustBundle")).unwrap().status, 200);
    assert_eq!(get(&agent(), &format!("{url}/api/v1/timestamp/certchain")).unwrap().status, 200);
    let r = post_json(&agent(), &format!("{url}/api/v1/log/entries"), &Signer::new().v1_entry(b"production")).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(get(&agent(), &format!("{url}/oidc/jwks")).unwrap().status, 404, "no dev issuer");
    // Nor metrics or the admin API on the public port: init's config gives them none of their own.
    let metrics = get(&agent(), &format!("{url}/metrics")).unwrap();
    assert!(metrics.status == 404 && metrics.text().contains("http.metrics_listen"), "{}", metrics.text());
    assert_eq!(get(&agent(), &format!("{url}/api/admin/bans")).unwrap().status, 404);
    server.kill();
    assert!(!data.join("keys/ca-root.pem").exists(), "serve did not make a root key either");

    // A TSA key that does not match the published TSA certificate stops the start.
    let other = tempfile::tempdir().unwrap();
    signet_keys::Signer::load_or_generate(&other.path().join("k.pem"), signet_keys::Algorithm::EcdsaP256Sha256).unwrap();
    std::fs::copy(other.path().join("k.pem"), data.join("keys/tsa.pem")).unwrap();
    let (mut child, first) = start();
    assert_eq!(first, None, "no ready line");
    let status = child.wait().unwrap();
    assert!(!status.success());
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains("tsa.pem") && stderr.contains("does not match"), "{stderr}");

    // A key gone from an initialised data dir: the hint is a restore, not the init that would refuse it.
    std::fs::remove_file(data.join("keys/tsa.pem")).unwrap();
    let (mut child, first) = start();
    assert_eq!(first, None, "no ready line");
    assert_eq!(child.wait().unwrap().code(), Some(2));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains("keys/tsa.pem") && stderr.contains("already holds an instance made by `signet init`"), "{stderr}");
    assert!(stderr.contains("restore what is missing") && !stderr.contains("create this instance's keys"), "{stderr}");
}

/// Item 20: a changed public URL at start read like corruption ("does not match the stored
/// tree"); it now says what changed and what to do, and exits 2 like any config error.
#[test]
fn an_origin_change_is_explained() {
    let dir = tempfile::tempdir().unwrap();
    let mut first = Server::start(dir.path(), &[]);
    first.kill();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_signet"))
        .args(["serve", "--dev", "--plain-http", "--listen", "127.0.0.1:0", "--public-url", "http://localhost:1", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("created with origin") && stderr.contains("\"localhost") && stderr.contains("public_url"), "{stderr}");
    assert!(!stderr.contains("inconsistent"), "{stderr}");
}

/// Item 13: a token whose email is not ASCII got a 500 from the CA. Now every identity the
/// CA cannot certify gets a 400 naming it, and ASCII ones still get certificates.
#[test]
fn identities_that_cannot_be_certified_get_a_400() {
    use aws_lc_rs::signature::KeyPair;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let url = format!("{}/api/v2/signingCert", server.url);
    let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).unwrap();
    let key_pem = signet_core::pem::encode("PUBLIC KEY", aws_lc_rs::encoding::AsDer::as_der(pair.public_key()).unwrap().as_ref());
    let ask = |email: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_signet"))
            .args(["dev-token", "--data-dir"])
            .arg(dir.path())
            .args(["--subject", email])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
        let pop = pair.sign(&SystemRandom::new(), email.as_bytes()).unwrap();
        post_json(&agent(), &url, &json!({"credentials": {"oidcIdentityToken": token},
            "publicKeyRequest": {"publicKey": {"algorithm": "ECDSA", "content": key_pem}, "proofOfPossession": b64::encode(pop.as_ref())}}))
        .unwrap()
    };
    for email in ["ünïcode@example.com", "alice@bücher.example", "a b@example.com", "tab\t@example.com"] {
        let r = ask(email);
        assert_eq!(r.status, 400, "{email:?}: {}", r.text());
        assert!(r.json()["message"].as_str().unwrap().contains("cannot be certified"), "{}", r.text());
    }
    assert_eq!(ask("plain@example.com").status, 200);
    let metrics = get(&agent(), &format!("{}/metrics", server.url)).unwrap().text();
    assert!(metrics.contains("reason=\"identity_not_certifiable\"} 4"), "{metrics}");
    assert!(!metrics.contains("status=\"500\""), "{metrics}");
    // The soak compares SQLite's own allocations with the process's memory.
    let sqlite: u64 = metrics.lines().find_map(|l| l.strip_prefix("signet_sqlite_memory_bytes ")).and_then(|v| v.parse().ok()).expect("signet_sqlite_memory_bytes");
    assert!(sqlite > 0, "{metrics}");
}

fn signatures(url: &str) -> u64 {
    get(&agent(), &format!("{url}/metrics"))
        .unwrap()
        .text()
        .lines()
        .find_map(|l| l.strip_prefix("signet_signatures_total "))
        .and_then(|v| v.parse().ok())
        .expect("signet_signatures_total")
}

/// Item 11: CT `get-entries` signed a precertificate per entry on every GET (up to 256
/// ECDSA signatures), and `get-sth` signed on every request. Now one GET costs O(1).
#[test]
fn unauthenticated_ct_reads_cost_no_signatures() {
    use aws_lc_rs::signature::KeyPair;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).unwrap();
    let key_pem = signet_core::pem::encode("PUBLIC KEY", aws_lc_rs::encoding::AsDer::as_der(pair.public_key()).unwrap().as_ref());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_signet"))
        .args(["dev-token", "--subject", "ct@example.com", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
    for _ in 0..20 {
        let pop = pair.sign(&SystemRandom::new(), b"ct@example.com").unwrap();
        let r = post_json(&agent(), &format!("{}/api/v2/signingCert", server.url), &json!({"credentials": {"oidcIdentityToken": token},
            "publicKeyRequest": {"publicKey": {"algorithm": "ECDSA", "content": key_pem}, "proofOfPossession": b64::encode(pop.as_ref())}}))
        .unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let before = signatures(&server.url);
    let entries = get(&agent(), &format!("{}/ct/v1/get-entries?start=0&end=255", server.url)).unwrap();
    assert_eq!(entries.status, 200);
    let entries = entries.json();
    assert_eq!(entries["entries"].as_array().unwrap().len(), 20);
    for e in entries["entries"].as_array().unwrap() {
        let extra = b64::decode(e["extra_data"].as_str().unwrap()).unwrap();
        let len = u32::from_be_bytes([0, extra[0], extra[1], extra[2]]) as usize;
        let precert = <x509_cert::Certificate as der::Decode>::from_der(&extra[3..3 + len]).unwrap();
        let poison = precert.tbs_certificate.extensions.as_ref().unwrap().last().unwrap();
        assert!(poison.critical && poison.extn_id == signet_ca::authority::OID_CT_POISON, "each entry serves its precertificate");
    }
    let sths: Vec<serde_json::Value> = (0..5).map(|_| get(&agent(), &format!("{}/ct/v1/get-sth", server.url)).unwrap().json()).collect();
    assert!(sths.windows(2).all(|w| w[0] == w[1]), "one tree head, one signed tree head");
    let after = signatures(&server.url);
    assert!(after - before <= 1, "get-entries over 20 entries and 5 get-sth made {} signatures", after - before);
}

/// Item 10: `X-Forwarded-For` counts only from a trusted proxy; from anyone else, a spoofed
/// header changes nothing.
#[test]
fn forwarded_addresses_count_only_from_trusted_proxies() {
    let statuses = |trusted: &str| -> Vec<u16> {
        let dir = tempfile::tempdir().unwrap();
        let config = format!("[guard]\ntrusted_proxies = [{trusted}]\n[guard.rate_limit]\nenabled = true\nper_second = 1\nburst = 2\n");
        let server = start_with(dir.path(), &config, 4096);
        let a = agent();
        ["198.51.100.1", "198.51.100.1", "198.51.100.1", "198.51.100.2", "198.51.100.3"]
            .iter()
            .map(|client| {
                let r = a.get(format!("{}/api/v1/log", server.url)).header("x-forwarded-for", format!("6.6.6.6, {client}")).call().unwrap();
                r.status().as_u16()
            })
            .collect()
    };
    // Behind a trusted proxy (this test is the proxy, on 127.0.0.1): each forwarded client
    // has its own burst of 2.
    assert_eq!(statuses("\"127.0.0.0/8\""), [200, 200, 429, 200, 200]);
    // No trusted proxy: every request is the peer's, whatever the header claims.
    assert_eq!(statuses(""), [200, 200, 429, 429, 429]);
}
