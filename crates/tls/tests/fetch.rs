//! The blocking JSON GET against real servers on loopback: a TLS server whose certificate
//! comes from a CA generated here, and a plain HTTP one.

use std::time::Duration;

use serde_json::json;
use signet_tls::testing::{TestPki, TestServer};
use signet_tls::{client_config, Failure, Fetcher, Trust};

fn trusting(pki: &TestPki, dir: &tempfile::TempDir) -> Fetcher {
    let path = dir.path().join("ca.pem");
    std::fs::write(&path, &pki.ca_pem).unwrap();
    Fetcher::new(client_config(&Trust::PemFile(path)).unwrap())
}

#[test]
fn gets_json_from_a_server_signed_by_the_bundle_ca() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let server = TestServer::https(&pki);
    server.set("/doc", 200, r#"{"issuer": "x", "n": [1, 2]}"#);
    let fetcher = trusting(&pki, &dir);
    assert_eq!(fetcher.get_json(&format!("{}/doc", server.url)).unwrap(), json!({"issuer": "x", "n": [1, 2]}));
    // By name as well as by address: the certificate covers both.
    let by_name = format!("https://localhost:{}/doc", server.addr.port());
    assert_eq!(fetcher.get_json(&by_name).unwrap()["n"][1], 2);
    assert_eq!(server.hits("/doc"), 2);
}

#[test]
fn an_untrusted_certificate_is_a_tls_verification_failure() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::https(&TestPki::new());
    server.set("/doc", 200, "{}");
    let url = format!("{}/doc", server.url);
    let platform = Fetcher::new(client_config(&Trust::Platform).unwrap());
    let other_ca = trusting(&TestPki::new(), &dir);
    for fetcher in [platform, other_ca] {
        let err = fetcher.get_json(&url).unwrap_err();
        assert!(matches!(err.failure, Failure::TlsVerification(_)), "{err}");
        let text = err.to_string();
        assert!(text.contains(&url) && text.contains("TLS verification"), "{text}");
    }
    assert_eq!(server.hits("/doc"), 0, "no request goes over an unverified connection");
}

#[test]
fn bad_answers_name_what_was_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let server = TestServer::https(&pki);
    server.set("/text", 200, "<html>hello</html>");
    server.set("/big", 200, format!("[{}0]", "0,".repeat(600)));
    server.set("/gone", 410, "{}");
    let fetcher = trusting(&pki, &dir).with_max_bytes(1000);
    let failure = |path: &str| fetcher.get_json(&format!("{}{path}", server.url)).unwrap_err().failure;
    assert!(matches!(failure("/text"), Failure::NotJson(_)));
    assert_eq!(failure("/big"), Failure::TooLarge(1000));
    assert_eq!(failure("/gone"), Failure::Status(410));
    assert_eq!(failure("/missing"), Failure::Status(404));
    let err = fetcher.get_json(&format!("{}/gone", server.url)).unwrap_err().to_string();
    assert!(err.contains("HTTP 410") && err.contains("/gone"), "{err}");
}

#[test]
fn connection_and_scheme_failures() {
    let dir = tempfile::tempdir().unwrap();
    let fetcher = trusting(&TestPki::new(), &dir).with_timeout(Duration::from_secs(5));
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let err = fetcher.get_json(&format!("https://127.0.0.1:{port}/x")).unwrap_err();
    assert!(matches!(err.failure, Failure::Connect(_)), "{err}");
    let err = fetcher.get_json("http://idp.example/x").unwrap_err();
    assert_eq!(err.failure, Failure::PlainHttp);
}

#[test]
fn plain_http_to_loopback_works() {
    let server = TestServer::http();
    server.set("/doc", 200, r#"{"ok": true}"#);
    let fetcher = Fetcher::new(client_config(&Trust::Platform).unwrap());
    assert_eq!(fetcher.get_json(&format!("{}/doc", server.url)).unwrap(), json!({"ok": true}));
}

#[test]
fn works_from_inside_a_tokio_runtime() {
    // The server's token verifier calls the fetcher from synchronous code on a runtime thread.
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let server = TestServer::https(&pki);
    server.set("/doc", 200, "[]");
    let fetcher = trusting(&pki, &dir);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let got = rt.block_on(async { fetcher.get_json(&format!("{}/doc", server.url)) });
    assert_eq!(got.unwrap(), json!([]));
}

/// One client, connections kept: requests to one server share one connection, over HTTP/2
/// when the server offers it (ALPN), and over HTTP/1.1 keep-alive when it does not (plain
/// HTTP here). Clones of a fetcher share its connections.
#[test]
fn connections_are_kept_alive_and_http2_is_used_when_offered() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let server = TestServer::https(&pki);
    server.set("/doc", 200, "{}");
    let fetcher = trusting(&pki, &dir);
    let clone = fetcher.clone();
    for f in [&fetcher, &clone, &fetcher] {
        f.get_json(&format!("{}/doc", server.url)).unwrap();
    }
    assert_eq!(server.hits("/doc"), 3);
    assert_eq!(server.connections(), ["h2"], "three requests, one HTTP/2 connection");

    let plain = TestServer::http();
    plain.set("/doc", 200, "{}");
    for _ in 0..3 {
        fetcher.get_json(&format!("{}/doc", plain.url)).unwrap();
    }
    assert_eq!(plain.connections(), ["http/1.1"], "three requests, one kept-alive HTTP/1.1 connection");
}
