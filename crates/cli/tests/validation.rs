//! The validation layer on a real server, over raw sockets so that a request can be as
//! malformed as an attacker makes it: each case gets its 4xx with a JSON message that says
//! what was wrong, is audited, and changes nothing (the logs keep their size).

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{agent, get, Server};
use serde_json::Value;

/// Sends `head` (with `\r\n` line ends, without the blank line) and `body`, and returns the
/// status and the body of the answer. The connection is closed after one request.
fn raw(addr: &str, head: &str, body: &[u8]) -> (u16, String) {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut request = format!("{head}\r\nConnection: close\r\n\r\n").into_bytes();
    request.extend_from_slice(body);
    // A refusal may come, and the server close, before the whole body is sent.
    let _ = c.write_all(&request);
    let mut answer = Vec::new();
    let _ = c.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("no status in {text:?}"));
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

fn sizes(a: &ureq::Agent, url: &str) -> (u64, u64) {
    let v1 = get(a, &format!("{url}/api/v1/log")).unwrap().json()["treeSize"].as_u64().unwrap();
    let ct = get(a, &format!("{url}/ct/v1/get-sth")).unwrap().json()["tree_size"].as_u64().unwrap();
    (v1, ct)
}

#[test]
fn malformed_requests_are_refused_before_any_handler_with_a_clear_json_error() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, "[guard.audit]\nenabled = true\n").unwrap();
    let server = Server::start(&data, &["--config", config.to_str().unwrap()]);
    let addr = server.url.strip_prefix("http://").unwrap().to_string();
    let a = agent();
    let before = sizes(&a, &server.url);

    let host = format!("Host: {addr}");
    let many: String = (0..70).map(|i| format!("\r\nX-Filler-{i}: x")).collect();
    let huge = format!("\r\nX-Big: {}", "x".repeat(20_000));
    let deep = format!("{}1{}", "[".repeat(100), "]".repeat(100));
    let entry = r#"{"kind":"hashedrekord","apiVersion":"0.0.1","spec":{}}"#;
    let post = |path: &str, ct: &str, len: usize| format!("POST {path} HTTP/1.1\r\n{host}\r\nContent-Type: {ct}\r\nContent-Length: {len}");
    let cases: Vec<(&str, String, Vec<u8>, u16, &str)> = vec![
        ("70 header fields", format!("GET /api/v1/log HTTP/1.1\r\n{host}{many}"), vec![], 431, "header fields"),
        ("a 20 KB header", format!("GET /api/v1/log HTTP/1.1\r\n{host}{huge}"), vec![], 431, "bytes"),
        ("two Authorization", format!("GET /api/v1/log HTTP/1.1\r\n{host}\r\nAuthorization: Bearer a\r\nAuthorization: Bearer b"), vec![], 400, "more than one authorization"),
        ("two Host", format!("GET /api/v1/log HTTP/1.1\r\n{host}\r\n{host}"), vec![], 400, "more than one host"),
        ("two Content-Type", format!("{}\r\nContent-Type: application/json", post("/api/v1/log/entries", "application/json", 2)), b"{}".to_vec(), 400, "more than one content-type"),
        ("access_token in the query", format!("GET /api/v1/log?access_token=abc HTTP/1.1\r\n{host}"), vec![], 400, "credential"),
        ("an encoded sgt_ token in the query", format!("GET /api/v1/log/proof?firstSize=1&x=sgt%5F00 HTTP/1.1\r\n{host}"), vec![], 400, "credential"),
        ("a GET with a body", format!("GET /api/v1/log HTTP/1.1\r\n{host}\r\nContent-Length: 5"), b"hello".to_vec(), 400, "takes no request body"),
        ("text/plain to the log", post("/api/v1/log/entries", "text/plain", 2), b"{}".to_vec(), 415, "expected application/json"),
        ("XML to the TSA", post("/api/v1/timestamp", "text/xml", 2), b"<a/>".to_vec(), 415, "application/timestamp-query or application/json"),
        ("a declared 10 MB entry", post("/api/v1/log/entries", "application/json", 10 << 20), vec![], 413, "at most 131072"),
        ("a 100 KB certificate request", post("/api/v2/signingCert", "application/json", 100_000), vec![b' '; 100_000], 413, "at most 65536"),
        (
            "a chunked body over the limit",
            format!("POST /api/v2/log/entries HTTP/1.1\r\n{host}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked"),
            { let mut b = Vec::new(); for _ in 0..40 { b.extend_from_slice(format!("1000\r\n{}\r\n", " ".repeat(4096)).as_bytes()); } b.extend_from_slice(b"0\r\n\r\n"); b },
            413,
            "at most 131072",
        ),
        ("JSON nested 100 deep", post("/api/v2/log/entries", "application/json", deep.len()), deep.clone().into_bytes(), 400, "deeper than 32"),
        ("invalid UTF-8 in JSON", post("/api/v1/log/entries", "application/json", 4), b"{\"\xff\"".to_vec(), 400, "not valid JSON"),
        ("an entry of an unknown shape", post("/api/v1/log/entries", "application/json", entry.len()), entry.as_bytes().to_vec(), 400, ""),
        ("a bad Content-Length", format!("POST /api/v1/log/entries HTTP/1.1\r\n{host}\r\nContent-Length: 12abc"), vec![], 400, ""),
    ];
    let mut audited = Vec::new();
    for (what, head, body, status, needle) in &cases {
        let (got, text) = raw(&addr, head, body);
        assert_eq!(got, *status, "{what}: {text}");
        if !needle.is_empty() {
            let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {text:?}"));
            assert_eq!(v["code"], *status, "{what}: {text}");
            let message = v["message"].as_str().unwrap().to_ascii_lowercase();
            assert!(message.contains(&needle.to_ascii_lowercase()), "{what}: {message}");
            audited.push(*status);
        }
    }
    assert_eq!(sizes(&a, &server.url), before, "nothing was logged or issued");
    // The server is still fine, and each refusal the layer made is in the audit log.
    assert_eq!(get(&a, &format!("{}/healthz", server.url)).unwrap().status, 200);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let conn = rusqlite::Connection::open(data.join("audit.sqlite")).unwrap();
        let mut statuses: Vec<u16> = Vec::new();
        let mut rows = conn.prepare("SELECT records FROM audit ORDER BY first_seq").unwrap();
        for blob in rows.query_map([], |r| r.get::<_, Vec<u8>>(0)).unwrap() {
            for line in String::from_utf8(blob.unwrap()).unwrap().lines() {
                let record: Value = serde_json::from_str(line).unwrap();
                statuses.push(record["status"].as_u64().unwrap_or(0) as u16);
            }
        }
        let missing: Vec<u16> = audited.iter().filter(|s| statuses.iter().filter(|x| x == s).count() < audited.iter().filter(|x| x == s).count()).copied().collect();
        if missing.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "refusals missing from the audit log: {missing:?} (recorded statuses {statuses:?})");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn well_formed_requests_pass_the_layer_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let addr = server.url.strip_prefix("http://").unwrap().to_string();
    let host = format!("Host: {addr}");
    // No Content-Type on a JSON route is read as JSON (see signet_guard::validate), and a
    // chunked body within the limit is whole for the handler.
    let body = br#"{"hash":"sha256:0000000000000000000000000000000000000000000000000000000000000000"}"#;
    let (status, text) = raw(&addr, &format!("POST /api/v1/index/retrieve HTTP/1.1\r\n{host}\r\nContent-Length: {}", body.len()), body);
    assert_eq!(status, 200, "{text}");
    let mut chunked = format!("{:x}\r\n", body.len()).into_bytes();
    chunked.extend_from_slice(body);
    chunked.extend_from_slice(b"\r\n0\r\n\r\n");
    let (status, text) = raw(&addr, &format!("POST /api/v1/index/retrieve HTTP/1.1\r\n{host}\r\nContent-Type: application/json; charset=utf-8\r\nTransfer-Encoding: chunked"), &chunked);
    assert_eq!(status, 200, "{text}");
    // A GET with an empty declared body, and a HEAD.
    let (status, _) = raw(&addr, &format!("GET /api/v1/log HTTP/1.1\r\n{host}\r\nContent-Length: 0"), b"");
    assert_eq!(status, 200);
    let (status, _) = raw(&addr, &format!("HEAD /api/v2/checkpoint HTTP/1.1\r\n{host}"), b"");
    assert_eq!(status, 200);
}

/// A request refused for its headers (a duplicated Content-Type, a wrong one, a body where none
/// is taken) before its body was read: the body is read and dropped first, so an HTTP/1.1
/// client that sends its whole request before reading gets the answer, and its keep-alive
/// connection serves the next request. Before, a body larger than what the server had already
/// buffered (here 100 KB) cost a reset mid-upload and the connection.
#[test]
fn a_refusal_before_the_body_is_read_keeps_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[]);
    let addr = server.url.strip_prefix("http://").unwrap().to_string();
    let mut c = TcpStream::connect(&addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body = vec![b'x'; 100_000];
    let mut exchange = |head: &str, body: &[u8]| -> (u16, String) {
        let mut request = format!("{head}\r\nHost: {addr}\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
        request.extend_from_slice(body);
        c.write_all(&request).expect("the whole request is taken");
        // Read one response: the head, then Content-Length bytes.
        let mut got = Vec::new();
        let mut byte = [0u8; 1];
        while !got.ends_with(b"\r\n\r\n") {
            c.read_exact(&mut byte).expect("an answer on the same connection");
            got.push(byte[0]);
        }
        let head = String::from_utf8(got).unwrap();
        let length: usize = head
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
            .unwrap();
        let mut answer = vec![0u8; length];
        c.read_exact(&mut answer).unwrap();
        (head[9..12].parse().unwrap(), String::from_utf8(answer).unwrap())
    };
    let cases = [
        ("POST /api/v1/log/entries HTTP/1.1\r\nContent-Type: application/json\r\nContent-Type: application/json", "more than one content-type"),
        ("POST /api/v1/log/entries HTTP/1.1\r\nContent-Type: text/plain", "content type"),
        ("GET /api/v1/log HTTP/1.1", "takes no request body"),
    ];
    for (head, why) in cases {
        let (status, answer) = exchange(head, &body);
        assert!((400..500).contains(&status) && answer.to_lowercase().contains(why), "{head}: {status} {answer}");
        // The same connection, next request.
        let (status, answer) = exchange("POST /api/v1/log/entries HTTP/1.1\r\nContent-Type: application/json", b"{}");
        assert_eq!(status, 400, "{answer}");
        assert!(answer.contains("apiVersion"), "answered as an entry, on the kept connection: {answer}");
    }
}
