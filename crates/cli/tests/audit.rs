//! The audit log on a real server: every request recorded (refusals too), callers named by
//! IP or token id but never by token, and `signet audit verify` catching an edit. Off by
//! default: a server without `[guard.audit]` writes no audit log.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{agent, get, get_bearer, Server};
use serde_json::Value;

fn signet(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_signet")).args(args).output().expect("run signet");
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn verify(data: &Path) -> (Option<i32>, String, String) {
    signet(&["audit", "verify", "--data-dir", data.to_str().unwrap()])
}

fn records(data: &Path) -> Vec<Value> {
    let conn = rusqlite::Connection::open(data.join("audit.sqlite")).unwrap();
    let mut q = conn.prepare("SELECT records FROM audit ORDER BY first_seq").unwrap();
    let batches = q.query_map([], |r| r.get::<_, Vec<u8>>(0)).unwrap();
    let mut all = Vec::new();
    for batch in batches {
        for line in batch.unwrap().split(|b| *b == b'\n') {
            all.push(serde_json::from_slice(line).unwrap());
        }
    }
    all
}

#[test]
fn every_request_is_recorded_in_a_chain_that_verify_checks() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, "[guard.audit]\nenabled = true\n[guard.rate_limit]\nenabled = true\nper_second = 1\nburst = 3\n").unwrap();
    let mut server = Server::start(&data, &["--config", config.to_str().unwrap()]);
    let (ok, token, err) = signet(&["admin", "token", "create", "--data-dir", data.to_str().unwrap(), "--role", "reader", "--name", "audited"]);
    assert_eq!(ok, Some(0), "{err}");
    let token = token.trim().to_string();

    let a = agent();
    let log = format!("{}/api/v1/log", server.url);
    let missing = get(&a, &format!("{}/no/such/route?secret=1", server.url)).unwrap();
    assert_eq!(missing.status, 404);
    let missing_id = missing.header("x-request-id").expect("x-request-id").to_string();
    let statuses: Vec<u16> = (0..3).map(|_| get(&a, &log).unwrap().status).collect();
    assert_eq!(statuses, [200, 200, 429], "the fourth request from this IP exceeds the burst of 3");
    // The server picks the new token up within 200 ms; the token's own bucket is fresh.
    let deadline = Instant::now() + Duration::from_secs(5);
    while get_bearer(&a, &log, &token).unwrap().status != 200 {
        assert!(Instant::now() < deadline, "the token was never accepted");
        std::thread::sleep(Duration::from_millis(50));
    }

    // Records reach the file within about 100 ms.
    let deadline = Instant::now() + Duration::from_secs(5);
    let all = loop {
        let all = records(&data);
        if all.iter().any(|r| r["client"].as_str().unwrap_or("").starts_with("token:")) {
            break all;
        }
        assert!(Instant::now() < deadline, "no token-named record: {all:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let refused: Vec<&Value> = all.iter().filter(|r| r["status"] == 429).collect();
    assert!(!refused.is_empty(), "the 429 is recorded: {all:?}");
    assert_eq!(refused[0]["client"], "ip:127.0.0.1");
    assert_eq!(refused[0]["path"], "/api/v1/log");
    assert!(all.iter().any(|r| r["status"] == 404 && r["path"] == "/no/such/route"), "paths are kept without their query");
    assert!(
        all.iter().any(|r| r["status"] == 404 && r["request_id"] == missing_id.as_str()),
        "the record carries the id the response was sent with: {missing_id} {all:?}"
    );
    let id = token.strip_prefix("sgt_").unwrap().split('_').next().unwrap();
    assert!(all.iter().any(|r| r["client"].as_str().unwrap().contains(id)), "the token's id names its caller");
    let file = std::fs::read(data.join("audit.sqlite")).unwrap();
    let wal = std::fs::read(data.join("audit.sqlite-wal")).unwrap_or_default();
    for bytes in [&file, &wal] {
        assert!(!bytes.windows(token.len()).any(|w| w == token.as_bytes()), "the token itself is never stored");
    }
    for (i, r) in all.iter().enumerate() {
        assert_eq!(r["seq"], i as u64 + 1);
    }

    let (code, out, err) = verify(&data);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with(&format!("audit chain ok: {} records, head ", all.len())), "{out}");

    // Turning the 429 into a 200, with the server stopped, is caught at that record.
    server.kill();
    let seq = refused[0]["seq"].as_u64().unwrap();
    let conn = rusqlite::Connection::open(data.join("audit.sqlite")).unwrap();
    let edited = conn
        .execute("UPDATE audit SET records = CAST(replace(CAST(records AS TEXT), '\"status\":429', '\"status\":200') AS BLOB) WHERE first_seq <= ?1 AND last_seq >= ?1", [seq])
        .unwrap();
    assert_eq!(edited, 1);
    drop(conn);
    let (code, _, err) = verify(&data);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(&format!("audit chain broken at record {seq}:")), "{err}");

    let (code, _, err) = verify(&dir.path().join("nowhere"));
    assert_eq!(code, Some(2));
    assert!(err.contains("no audit log"), "{err}");

    let plain = tempfile::tempdir().unwrap();
    let server = Server::start(&plain.path().join("data"), &[]);
    assert_eq!(get(&a, &format!("{}/api/v1/log", server.url)).unwrap().status, 200);
    assert!(!plain.path().join("data/audit.sqlite").exists(), "off by default");
}

/// A record says who (the token's role), which route, why a refusal was refused, and what a
/// request did: the entry it appended (log, index, leaf hash), the certificate it got (serial,
/// identity, issuer), the timestamp (serial). The values match what the client was answered.
#[test]
fn records_name_the_route_the_role_the_reason_and_what_was_done() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, "[guard.audit]\nenabled = true\n[guard.auth]\nrequire = \"writes\"\n").unwrap();
    let server = Server::start(&data, &["--config", config.to_str().unwrap()]);
    let (ok, token, err) = signet(&["admin", "token", "create", "--data-dir", data.to_str().unwrap(), "--role", "signer"]);
    assert_eq!(ok, Some(0), "{err}");
    let token = token.trim().to_string();
    let a = agent();
    let post = |path: &str, ct: &str, body: Vec<u8>, bearer: Option<&str>| {
        let r = a.post(&format!("{}{path}", server.url)).header("content-type", ct);
        let r = match bearer {
            Some(t) => r.header("authorization", &format!("Bearer {t}")),
            None => r,
        };
        common::reply(r.send(body)).unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while get_bearer(&a, &format!("{}/healthz", server.url), &token).unwrap().status != 200 {
        assert!(Instant::now() < deadline, "the token was never accepted");
        std::thread::sleep(Duration::from_millis(50));
    }
    let signer = common::Signer::new();
    let entry = serde_json::to_vec(&signer.v1_entry(b"audited artifact")).unwrap();
    let refused = post("/api/v1/log/entries", "application/json", entry.clone(), None);
    assert_eq!(refused.status, 401, "{}", refused.text());
    let appended = post("/api/v1/log/entries", "application/json", entry, Some(&token));
    assert_eq!(appended.status, 201, "{}", appended.text());
    let answered: Value = appended.json();
    let (uuid, body) = answered.as_object().unwrap().iter().next().map(|(k, v)| (k.clone(), v.clone())).unwrap();
    let oidc = signet(&["dev-token", "--data-dir", data.to_str().unwrap(), "--subject", "ci@acme.dev"]).1.trim().to_string();
    let cert_request = common::cert_request(&oidc, "ci@acme.dev");
    let issued = post("/api/v2/signingCert", "application/json", cert_request, Some(&token));
    assert_eq!(issued.status, 200, "{}", issued.text());
    let leaf_pem = issued.json()["signedCertificateEmbeddedSct"]["chain"]["certificates"][0].as_str().unwrap().to_string();
    let leaf = signet_core::pem::decode_first(leaf_pem.as_bytes()).unwrap().der;
    let serial = {
        use der::Decode;
        hex::encode(x509_cert::Certificate::from_der(&leaf).unwrap().tbs_certificate.serial_number.as_bytes())
    };
    let stamp = post("/api/v1/timestamp", "application/json", br#"{"artifactHash":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","hashAlgorithm":"sha256"}"#.to_vec(), Some(&token));
    assert_eq!(stamp.status, 200, "{}", stamp.text());

    let deadline = Instant::now() + Duration::from_secs(10);
    let all = loop {
        let all = records(&data);
        if all.iter().filter(|r| r["path"] != "/healthz").count() >= 4 {
            break all;
        }
        assert!(Instant::now() < deadline, "records: {all:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let find = |status: u16, path: &str| all.iter().find(|r| r["status"] == status && r["path"] == path).unwrap_or_else(|| panic!("{status} {path}: {all:?}")).clone();
    let r = find(401, "/api/v1/log/entries");
    assert_eq!((r["reason"].as_str(), r.get("role"), r.get("did")), (Some("token_missing"), None, None), "{r}");
    let r = find(201, "/api/v1/log/entries");
    assert_eq!(r["role"], "signer");
    assert_eq!(r["route"], "/api/v1/log/entries");
    let did = &r["did"]["appended"];
    assert_eq!(did["log"], "rekor-v1");
    assert_eq!(did["index"], body["logIndex"], "{r}");
    assert!(uuid.ends_with(did["entry_hash"].as_str().unwrap()), "the leaf hash is the UUID's tail: {uuid} {r}");
    let r = find(200, "/api/v2/signingCert");
    assert_eq!(r["did"]["issued"]["serial"], serial.as_str(), "{r}");
    assert_eq!(r["did"]["issued"]["identity"], "ci@acme.dev");
    assert!(r["did"]["issued"]["issuer"].as_str().unwrap().ends_with("/oidc"), "{r}");
    let r = find(200, "/api/v1/timestamp");
    assert_eq!(r["did"]["stamped"]["serial"].as_str().unwrap().len(), 32, "{r}");
    let text = format!("{all:?}");
    assert!(!text.contains(&token[21..]) && !text.contains(&oidc[..40]), "no token of either kind is recorded");
    assert_eq!(verify(&data).0, Some(0));
    let (code, out, err) = signet(&["audit", "tail", "--data-dir", data.to_str().unwrap(), "-n", "2"]);
    assert_eq!(code, Some(0), "{err}");
    let tailed: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(tailed.len(), 2, "{out}");
    assert_eq!(tailed[1]["seq"].as_u64().unwrap(), tailed[0]["seq"].as_u64().unwrap() + 1, "oldest first, in order");
    assert_eq!(tailed[1]["seq"], records(&data).last().unwrap()["seq"], "the last record is last");
}

/// `mode = "closed"` (the default): an answer goes out only once its record is in the file;
/// a store that fails turns answers into 503s, and the requests that follow never reach a
/// handler, until a write succeeds again.
#[test]
fn closed_mode_answers_only_what_it_has_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, "[guard.audit]\nenabled = true\n").unwrap();
    let server = Server::start(&data, &["--config", config.to_str().unwrap()]);
    let a = agent();
    let url = |path: &str| format!("{}{path}", server.url);

    for _ in 0..5 {
        let r = get(&a, &url("/healthz")).unwrap();
        assert_eq!(r.status, 200);
        let id = r.header("x-request-id").unwrap().to_string();
        // No waiting: the record was committed before the answer left.
        assert!(records(&data).iter().any(|r| r["request_id"] == id.as_str()), "the record of {id} is in the file with its answer");
    }

    // Every insert into the audit table now fails, as on a full disk.
    let db = rusqlite::Connection::open(data.join("audit.sqlite")).unwrap();
    db.execute_batch("CREATE TRIGGER fail BEFORE INSERT ON audit BEGIN SELECT RAISE(ABORT, 'injected'); END;").unwrap();
    let signer = common::Signer::new();
    let entries = url("/api/v1/log/entries");
    let first = common::post_json(&a, &entries, &signer.v1_entry(b"first")).unwrap();
    assert_eq!(first.status, 503, "{}", first.text());
    assert!(first.json()["message"].as_str().unwrap().contains("audit log"), "{}", first.text());
    assert_eq!(first.header("retry-after"), Some("1"));
    // The store failed: the next ones are refused before any handler runs.
    let second = common::post_json(&a, &entries, &signer.v1_entry(b"second")).unwrap();
    assert_eq!(second.status, 503);
    assert_eq!(get(&a, &url("/api/v1/log")).unwrap().status, 503, "reads too: nothing is answered unrecorded");

    db.execute_batch("DROP TRIGGER fail;").unwrap();
    // The first request after the repair is still refused (the store was failing when it
    // came), but its record is written, and that lifts the refusal.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut refused_after = 0;
    while get(&a, &url("/healthz")).unwrap().status != 200 {
        refused_after += 1;
        assert!(Instant::now() < deadline, "the audit log never recovered");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(refused_after >= 1);

    // The first entry's handler ran before its record failed (its answer was withheld);
    // the second never reached the log.
    let log = get(&a, &url("/api/v1/log")).unwrap();
    assert_eq!(log.status, 200);
    assert_eq!(log.json()["treeSize"], 2, "the genesis entry and the first: {}", log.text());
    let metrics = get(&a, &url("/metrics")).unwrap().text();
    let value = |name: &str| -> u64 {
        let line = metrics.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("{name} missing"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert!(value("signet_audit_refused_total") >= 3 + refused_after, "{metrics}");
    assert!(value("signet_audit_write_failures_total") >= 1);

    let all = records(&data);
    assert!(all.iter().any(|r| r["note"].as_str().is_some_and(|n| n.starts_with("lost "))), "the lost records are noted: {all:?}");
    let (code, out, err) = verify(&data);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("audit chain ok"), "{out}");
}

/// Over HTTP/1 a held answer is kept as bytes by its connection (`audit::gate`): a
/// pipelining client still gets every answer, whole and in order, each only once its record
/// is in the file, and a `Connection: close` request gets its answer before the close.
#[test]
fn pipelined_answers_come_whole_in_order_and_each_after_its_record() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, "[guard.audit]\nenabled = true\n").unwrap();
    let server = Server::start(&data, &["--config", config.to_str().unwrap()]);
    let host = server.url.trim_start_matches("http://").to_string();
    let mut tcp = std::net::TcpStream::connect(&host).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let ask = |path: &str, close: bool| format!("GET {path} HTTP/1.1\r\nhost: {host}\r\n{}\r\n", if close { "connection: close\r\n" } else { "" });
    let pipelined = [ask("/healthz", false), ask("/api/v1/log", false), ask("/no/such/route", false), ask("/healthz", true)].concat();
    tcp.write_all(pipelined.as_bytes()).unwrap();
    let mut got = String::new();
    tcp.read_to_string(&mut got).expect("the server closes the connection after the last answer");
    // A body has no line end of its own: the next status line follows it directly.
    let statuses: Vec<&str> = got.match_indices("HTTP/1.1 ").filter_map(|(at, _)| got[at..].lines().next()).collect();
    assert_eq!(statuses, ["HTTP/1.1 200 OK", "HTTP/1.1 200 OK", "HTTP/1.1 404 Not Found", "HTTP/1.1 200 OK"], "{got}");
    let ids: Vec<&str> = got.lines().filter_map(|l| l.strip_prefix("x-request-id: ")).collect();
    assert_eq!(ids.len(), 4, "{got}");
    let recorded = records(&data);
    for id in &ids {
        assert!(recorded.iter().any(|r| r["request_id"] == *id), "the record of {id} was in the file before its answer left");
    }
    let paths: Vec<&str> = ids.iter().filter_map(|id| recorded.iter().find(|r| r["request_id"] == *id)).filter_map(|r| r["path"].as_str()).collect();
    assert_eq!(paths, ["/healthz", "/api/v1/log", "/no/such/route", "/healthz"], "the answers came in the order asked");
}

/// `mode = "best-effort"`: a failing store costs records (counted and noted), not answers.
#[test]
fn best_effort_mode_answers_while_the_store_fails() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, "[guard.audit]\nenabled = true\nmode = \"best-effort\"\n").unwrap();
    let server = Server::start(&data, &["--config", config.to_str().unwrap()]);
    let a = agent();
    let healthz = format!("{}/healthz", server.url);
    assert_eq!(get(&a, &healthz).unwrap().status, 200);
    common::wait_for_audit_records(&data, 1);
    let db = rusqlite::Connection::open(data.join("audit.sqlite")).unwrap();
    db.execute_batch("CREATE TRIGGER fail BEFORE INSERT ON audit BEGIN SELECT RAISE(ABORT, 'injected'); END;").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert_eq!(get(&a, &healthz).unwrap().status, 200, "best-effort answers regardless");
        let metrics = get(&a, &format!("{}/metrics", server.url)).unwrap().text();
        if metrics.lines().any(|l| l.starts_with("signet_audit_write_failures_total ") && !l.ends_with(" 0")) {
            assert!(metrics.contains("signet_audit_refused_total 0"), "{metrics}");
            break;
        }
        assert!(Instant::now() < deadline, "no failed write was counted");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn anchors(data: &Path) -> Vec<(u64, u64)> {
    let conn = rusqlite::Connection::open(data.join("audit.sqlite")).unwrap();
    let mut q = conn.prepare("SELECT seq, log_index FROM anchors ORDER BY seq").unwrap();
    q.query_map([], |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64))).unwrap().map(Result::unwrap).collect()
}

/// Rewrites every record from `from` on, with fresh hashes that chain: an attacker holding
/// the disk, whom the chain alone does not catch.
fn rewrite_chain_from(data: &Path, from: u64) {
    let conn = rusqlite::Connection::open(data.join("audit.sqlite")).unwrap();
    let batches: Vec<(i64, Vec<u8>)> = conn
        .prepare("SELECT first_seq, records FROM audit ORDER BY first_seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut head = signet_guard::audit::record::GENESIS;
    for (first, records) in batches {
        let mut lines = Vec::new();
        let mut hashes = Vec::new();
        for (i, line) in records.split(|b| *b == b'\n').enumerate() {
            let mut record: Value = serde_json::from_slice(line).unwrap();
            if first as u64 + i as u64 >= from {
                record["status"] = serde_json::json!(299);
            }
            let json = serde_json::to_vec(&record).unwrap();
            head = signet_guard::audit::record::link(&head, &json);
            hashes.extend_from_slice(&head);
            lines.push(json);
        }
        conn.execute("UPDATE audit SET records = ?1, hashes = ?2 WHERE first_seq = ?3", rusqlite::params![lines.join(&b'\n'), hashes, first])
            .unwrap();
    }
}

fn copy_dir(from: &Path, to: &Path) {
    assert!(Command::new("cp").arg("-a").arg(from).arg(to).status().unwrap().success());
}

/// Anchors: the chain's head signed with the audit key and appended to the Rekor v2 log
/// every `anchor_interval_secs` and at shutdown; `audit verify` checks each against the
/// log, and so catches what the chain alone does not: a chain rewritten with fresh hashes,
/// and a deleted tail.
#[test]
fn anchors_catch_a_rewritten_chain_and_a_deleted_tail() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, "[guard.audit]\nenabled = true\nanchor_interval_secs = 1\n").unwrap();
    let mut server = Server::start(&data, &["--config", config.to_str().unwrap()]);
    let a = agent();
    for _ in 0..5 {
        assert_eq!(get(&a, &format!("{}/healthz", server.url)).unwrap().status, 200);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while anchors(&data).is_empty() {
        assert!(Instant::now() < deadline, "no anchor within 10 s at an interval of 1 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (_, index) = anchors(&data)[0];
    let checkpoint = get(&a, &format!("{}/api/v2/checkpoint", server.url)).unwrap().text();
    let size: u64 = checkpoint.lines().nth(1).unwrap().parse().unwrap();
    assert!(size > index, "the anchor is in the Rekor v2 log: {checkpoint}");
    let (code, out, err) = verify(&data);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("anchors ok: "), "{out}");
    // Online: the live log's checkpoint extends every anchor's, proved from its tiles; the
    // log grows meanwhile (the anchors themselves, and these appends), so the proofs are real.
    let signer = common::Signer::new();
    for i in 0..300 {
        let r = common::post_json(&a, &format!("{}/api/v2/log/entries", server.url), &signer.v2_entry(format!("grow {i}").as_bytes())).unwrap();
        assert_eq!(r.status, 201, "{}", r.text());
    }
    let (code, out, err) = signet(&["audit", "verify", "--data-dir", data.to_str().unwrap(), "--log", &server.url]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("anchors online: ") && out.contains("consistent with the checkpoint of"), "{out}");
    // Another instance's log is not the one that holds the anchors.
    let other_dir = tempfile::tempdir().unwrap();
    let other = Server::start(&other_dir.path().join("data"), &[]);
    let (code, _, err) = signet(&["audit", "verify", "--data-dir", data.to_str().unwrap(), "--log", &other.url]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("not signed by the log that holds the anchors"), "{err}");
    drop(other);
    let metrics = get(&a, &format!("{}/metrics", server.url)).unwrap().text();
    assert!(metrics.contains("\nsignet_audit_last_anchor_age_seconds ") && metrics.contains("\nsignet_audit_unanchored_records "), "{metrics}");

    // A graceful stop anchors what the last interval left.
    for _ in 0..3 {
        get(&a, &format!("{}/healthz", server.url)).unwrap();
    }
    assert!(Command::new("kill").args(["-TERM", &server.child.id().to_string()]).status().unwrap().success());
    let _ = server.child.wait();
    let (code, out, err) = verify(&data);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("; 0 records after it not yet anchored"), "the shutdown anchored the rest: {out}");
    let anchored = anchors(&data);
    let last = anchored.last().unwrap().0;
    // The audit key's public half is exported with the trust documents, and is the key the
    // log entries name.
    let exported = dir.path().join("trust");
    let (code, _, err) = signet(&["trust", "export", "--data-dir", data.to_str().unwrap(), "--out", exported.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    let pem = std::fs::read_to_string(exported.join("audit_key.pem")).unwrap();
    let spki = signet_core::pem::decode_first(pem.as_bytes()).unwrap().der;
    let conn = rusqlite::Connection::open(data.join("audit.sqlite")).unwrap();
    let entry: String = conn.query_row("SELECT entry FROM anchors ORDER BY seq LIMIT 1", [], |r| r.get(0)).unwrap();
    let entry: Value = serde_json::from_str(&entry).unwrap();
    let body: Value = serde_json::from_slice(&signet_core::b64::decode(entry["canonicalizedBody"].as_str().unwrap()).unwrap()).unwrap();
    let named = &body["spec"]["hashedRekordV002"]["signature"]["verifier"]["publicKey"]["rawBytes"];
    assert_eq!(named.as_str().unwrap(), signet_core::b64::encode(&spki));
    drop(conn);

    // The whole chain rewritten with fresh hashes: the chain holds, the anchors do not.
    let rewritten = dir.path().join("rewritten");
    copy_dir(&data, &rewritten);
    rewrite_chain_from(&rewritten, 1);
    let (code, _, err) = verify(&rewritten);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(&format!("audit chain broken at record {}:", anchored[0].0)) && err.contains("rewritten after they were anchored"), "{err}");
    // Moving the anchors to the new hashes does not help: the log holds the old ones.
    let conn = rusqlite::Connection::open(rewritten.join("audit.sqlite")).unwrap();
    for (seq, _) in &anchored {
        let (first, hashes): (i64, Vec<u8>) = conn
            .query_row("SELECT first_seq, hashes FROM audit WHERE first_seq <= ?1 AND last_seq >= ?1", [*seq as i64], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap();
        let at = (*seq as i64 - first) as usize * 32;
        conn.execute("UPDATE anchors SET head = ?1 WHERE seq = ?2", rusqlite::params![&hashes[at..at + 32], *seq as i64]).unwrap();
    }
    drop(conn);
    let (code, _, err) = verify(&rewritten);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("does not hold") && err.contains("not the statement"), "{err}");

    // The tail deleted, anchored records with it: named.
    let cut = dir.path().join("cut");
    copy_dir(&data, &cut);
    let conn = rusqlite::Connection::open(cut.join("audit.sqlite")).unwrap();
    conn.execute("DELETE FROM audit WHERE last_seq >= ?1", [last as i64]).unwrap();
    drop(conn);
    let (code, _, err) = verify(&cut);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(&format!("audit chain broken at record {last}:")) && err.contains("were deleted"), "{err}");
}

/// After the Rekor v2 log is rotated, the anchors in the frozen log cannot be proved against
/// the live checkpoint: `audit verify --log` checks the new log's anchors online and counts the
/// old ones apart (they were checked offline against the trusted root, which keeps the old key).
#[test]
fn anchors_from_before_a_rekor_v2_rotation_are_counted_apart_online() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, "[guard.audit]\nenabled = true\nanchor_interval_secs = 1\n").unwrap();
    let stop = |server: &mut Server| {
        assert!(Command::new("kill").args(["-TERM", &server.child.id().to_string()]).status().unwrap().success());
        let _ = server.child.wait();
    };
    let a = agent();
    let mut server = Server::start(&data, &["--config", config.to_str().unwrap()]);
    get(&a, &format!("{}/healthz", server.url)).unwrap();
    stop(&mut server);
    let before = anchors(&data).len();
    assert!(before >= 1, "the shutdown anchors");

    let (code, _, err) = signet(&["admin", "log", "rotate", "--log", "rekor-v2", "--data-dir", data.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    let mut server = Server::start(&data, &["--config", config.to_str().unwrap()]);
    get(&a, &format!("{}/healthz", server.url)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while anchors(&data).len() == before {
        assert!(Instant::now() < deadline, "no anchor in the new log within 10 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (code, out, err) = signet(&["audit", "verify", "--data-dir", data.to_str().unwrap(), "--log", &server.url]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("consistent with the checkpoint of"), "{out}");
    assert!(out.contains(&format!("anchors online: {before} in a Rekor v2 log rotated out since")), "{out}");
    stop(&mut server);
}

/// The whole segments: a cut writes `<name>.sqlite.partial` until its file is complete.
fn segments(data: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(data.join("audit-segments"))
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "sqlite")).collect())
        .unwrap_or_default();
    files.sort();
    files
}

/// Retention: past `segment_max_bytes`, the records up to an anchor move into a segment
/// file; every file verifies, alone too once archived elsewhere, and its anchors are
/// checked against the transparency log; an edit inside an archived segment is caught.
#[test]
fn segments_are_cut_at_anchors_and_verify_alone_once_archived() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, "[guard.audit]\nenabled = true\nanchor_interval_secs = 1\nsegment_max_bytes = 1\n").unwrap();
    let mut server = Server::start(&data, &["--config", config.to_str().unwrap()]);
    let a = agent();
    for round in 1..=2 {
        for _ in 0..5 {
            assert_eq!(get(&a, &format!("{}/healthz", server.url)).unwrap().status, 200);
        }
        let deadline = Instant::now() + Duration::from_secs(15);
        while segments(&data).len() < round {
            assert!(Instant::now() < deadline, "no segment {round} within 15 s at an anchor interval of 1 s");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    assert!(Command::new("kill").args(["-TERM", &server.child.id().to_string()]).status().unwrap().success());
    let _ = server.child.wait();
    let (code, out, err) = verify(&data);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("segments ok: ") && out.contains("records 1.."), "{out}");
    let total: u64 = out.split_whitespace().nth(3).unwrap().parse().unwrap();
    assert!(total >= 10, "{out}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for f in segments(&data) {
            assert_eq!(std::fs::metadata(&f).unwrap().permissions().mode() & 0o777, 0o600, "{}", f.display());
        }
    }

    // The oldest segment archived elsewhere: it verifies alone, anchors and all, and the
    // rest verifies from its anchored start.
    let archive = dir.path().join("archive");
    std::fs::create_dir(&archive).unwrap();
    let oldest = segments(&data).remove(0);
    let archived = archive.join(oldest.file_name().unwrap());
    std::fs::rename(&oldest, &archived).unwrap();
    let (code, out, err) = signet(&["audit", "verify", "--data-dir", data.to_str().unwrap(), "--segment", archived.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("anchors ok: ") && out.contains("; 0 records after it not yet anchored"), "a segment ends at an anchor: {out}");
    let (code, out, err) = verify(&data);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("are in segments archived elsewhere"), "{out}");

    // An edit in the archived segment is caught there.
    let conn = rusqlite::Connection::open(&archived).unwrap();
    conn.execute_batch("UPDATE audit SET records = CAST(replace(CAST(records AS TEXT), '/healthz', '/healthy') AS BLOB)").unwrap();
    drop(conn);
    let (code, _, err) = signet(&["audit", "verify", "--data-dir", data.to_str().unwrap(), "--segment", archived.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("audit chain broken at record"), "{err}");
}

/// kill -9 in the middle of the traffic: the chain still verifies (a batch is written whole
/// or not at all), and in closed mode every answer a client got has its record.
#[test]
fn after_kill_9_every_answered_request_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, "[guard.audit]\nenabled = true\nanchor_interval_secs = 0\n").unwrap();
    let mut server = Server::start(&data, &["--config", config.to_str().unwrap()]);
    let url = format!("{}/api/v2/checkpoint", server.url);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let (url, stop) = (url.clone(), stop.clone());
            std::thread::spawn(move || {
                let a = agent();
                let mut answered = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    match get(&a, &url) {
                        Ok(r) if r.status == 200 => answered.push(r.header("x-request-id").unwrap().to_string()),
                        _ => break,
                    }
                }
                answered
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(700));
    server.kill();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let answered: Vec<String> = clients.into_iter().flat_map(|c| c.join().unwrap()).collect();
    assert!(answered.len() > 50, "the clients got only {} answers", answered.len());
    let (code, out, err) = verify(&data);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("audit chain ok"), "{out}");
    let recorded: std::collections::HashSet<String> =
        records(&data).iter().filter_map(|r| r["request_id"].as_str().map(str::to_string)).collect();
    let missing: Vec<&String> = answered.iter().filter(|id| !recorded.contains(*id)).collect();
    assert!(missing.is_empty(), "{} of {} answered requests have no record: {:?}", missing.len(), answered.len(), &missing[..missing.len().min(5)]);
}

/// The audit log on PostgreSQL: the instances of one database keep one chain each in the
/// shared tables, anchored and cut into segments as on SQLite, and `audit verify --storage`
/// checks each, catching an edit made in the database. An instance made from another's
/// backup shares its audit key, and so its chain's default name: it is refused at start,
/// naming the way out, rather than forking the other's chain.
#[test]
fn instances_on_postgres_keep_a_chain_each_in_the_shared_tables() {
    let Some(db) = common::postgres_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (a_dir, b_dir) = (dir.path().join("a"), dir.path().join("b"));
    let audit = "[guard.audit]\nenabled = true\nanchor_interval_secs = 1\nsegment_max_bytes = 1\n";
    let (config_a, config_b) = (dir.path().join("a.toml"), dir.path().join("b.toml"));
    std::fs::write(&config_a, audit).unwrap();
    std::fs::write(&config_b, format!("{audit}chain = \"instance-b\"\n")).unwrap();
    let mut a = Server::start(&a_dir, &["--storage", &db, "--config", config_a.to_str().unwrap()]);
    let agent = agent();
    let hit = |url: &str, n: usize| {
        for _ in 0..n {
            assert_eq!(get(&agent, &format!("{url}/healthz")).unwrap().status, 200);
        }
    };
    hit(&a.url, 5);
    let (code, _, err) = signet(&["backup", "--data-dir", a_dir.to_str().unwrap(), "--out", b_dir.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!a_dir.join("audit.sqlite").exists(), "on PostgreSQL the chain is not in the data dir");

    // The copy, under A's chain name: refused, and it says why.
    let mut twin = Command::new(env!("CARGO_BIN_EXE_signet"))
        .args(["serve", "--dev", "--plain-http", "--listen", "127.0.0.1:0", "--data-dir", b_dir.to_str().unwrap(), "--storage", &db])
        .args(["--config", config_a.to_str().unwrap()])
        .env("SIGNET_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = twin.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = twin.kill();
            panic!("a second writer of one chain started, and ran for 30 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut twin_err = String::new();
    std::io::Read::read_to_string(&mut twin.stderr.take().unwrap(), &mut twin_err).unwrap();
    assert!(!status.success(), "{twin_err}");
    assert!(twin_err.contains("is being written by another instance") && twin_err.contains("[guard.audit] chain"), "{twin_err}");

    let mut b = Server::start(&b_dir, &["--storage", &db, "--config", config_b.to_str().unwrap()]);
    hit(&b.url, 5);
    for data in [&a_dir, &b_dir] {
        let deadline = Instant::now() + Duration::from_secs(20);
        while segments(data).is_empty() {
            assert!(Instant::now() < deadline, "no segment cut under {} within 20 s", data.display());
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    // Records after the cuts, left in the live chains.
    hit(&a.url, 3);
    hit(&b.url, 3);
    for server in [&mut a, &mut b] {
        assert!(Command::new("kill").args(["-TERM", &server.child.id().to_string()]).status().unwrap().success());
        let _ = server.child.wait();
    }

    let verify_pg = |data: &Path, chain: Option<&str>| {
        let mut args = vec!["audit", "verify", "--data-dir", data.to_str().unwrap(), "--storage", &db];
        args.extend(chain.map(|c| ["--chain", c]).into_iter().flatten());
        signet(&args)
    };
    for (data, chain) in [(&a_dir, None), (&b_dir, Some("instance-b"))] {
        let (code, out, err) = verify_pg(data, chain);
        assert_eq!(code, Some(0), "{err}");
        assert!(out.contains("segments ok: ") && out.contains("; 0 records after it not yet anchored"), "{out}");
    }
    let (code, out, err) = signet(&["audit", "tail", "-n", "2", "--data-dir", a_dir.to_str().unwrap(), "--storage", &db]);
    assert_eq!(code, Some(0), "{err}");
    let tail: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(tail.len(), 2, "{out}");
    assert_eq!(tail[1]["seq"].as_u64(), tail[0]["seq"].as_u64().map(|s| s + 1));
    let (code, _, err) = verify_pg(&a_dir, Some("nobody"));
    assert_eq!(code, Some(2), "a chain that does not exist: {err}");

    // An edit in B's rows is caught at its record; A's chain is untouched.
    common::psql(
        &db,
        "UPDATE audit_batches SET records = convert_to(replace(convert_from(records, 'UTF8'), '/healthz', '/healthy'), 'UTF8') \
         WHERE chain = 'instance-b'",
    );
    let (code, _, err) = verify_pg(&b_dir, Some("instance-b"));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("audit chain broken at record") && err.contains("does not chain its contents"), "{err}");
    assert_eq!(verify_pg(&a_dir, None).0, Some(0));
}
