//! `signet serve --tls-cert … --tls-key …` end to end, for both backends: the ready line
//! names an https URL, /healthz answers over HTTPS to a client that trusts the CA file, over
//! HTTP/1.1 and over HTTP/2 (ALPN h2); bad TLS settings exit 2 with one clear line.

mod common;

use std::path::Path;
use std::process::Command;

use common::Server;
use serde_json::Value;
use signet_tls::testing::TestPki;
use signet_tls::{Fetcher, Trust};

fn signet(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_signet")).args(args).output().expect("run signet")
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn healthz_over_https_with_either_backend_by_http1_and_http2() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let server_pem = pki.server_pem();
    let (cert, key) = (write(dir.path(), "cert.pem", &server_pem.chain), write(dir.path(), "key.pem", &server_pem.key));
    let ca = write(dir.path(), "ca.pem", &pki.ca_pem);
    let fetcher = Fetcher::new(signet_tls::client_config(&Trust::PemFile(ca.clone().into())).unwrap());

    for backend in ["rustls", "openssl"] {
        let data = dir.path().join(format!("data-{backend}"));
        let server = Server::start(&data, &["--tls-cert", &cert, "--tls-key", &key, "--tls-backend", backend]);
        assert!(server.url.starts_with("https://127.0.0.1:"), "{backend}: {}", server.url);

        let health = fetcher.get_json(&format!("{}/healthz", server.url)).expect("GET /healthz over HTTPS");
        assert!(health.is_object(), "{backend}: {health}");

        // HTTP/2 by ALPN, through the lab's client (rustls, trusting --ca-file).
        let json = dir.path().join(format!("{backend}.json"));
        let out = signet(&[
            "bench", "load", "--target", &format!("{}/healthz", server.url), "--workload", "custom", "--http", "2",
            "--ca-file", &ca, "--connections", "1", "--rate", "20", "--duration", "1", "--json", json.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{backend}: {}", String::from_utf8_lossy(&out.stderr));
        let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        assert_eq!((r["ok"].as_u64(), &r["errors"]), (Some(20), &serde_json::json!({})), "{backend}");
        assert_eq!((r["tls"]["alpn"].as_str(), r["tls"]["version"].as_str()), (Some("h2"), Some("TLSv1.3")), "{backend}");

        // Plain HTTP is not served on the HTTPS port.
        assert!(fetcher.get_json(&format!("{}/healthz", server.url.replacen("https", "http", 1))).is_err(), "{backend}");
    }
}

#[test]
fn bad_tls_settings_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let (good, other) = (pki.server_pem(), pki.issue_server());
    let cert = write(dir.path(), "cert.pem", &good.chain);
    let wrong_key = write(dir.path(), "wrong.pem", &other.key);
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    let serve = |extra: &[&str]| {
        let mut args = vec!["serve", "--dev", "--data-dir", data, "--listen", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let out = signet(&args);
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        (out.status.code(), stderr)
    };

    let (code, err) = serve(&["--tls-cert", &cert, "--tls-key", &wrong_key]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.starts_with("signet: TLS: key ") && err.contains("does not match certificate"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");

    let (code, err) = serve(&["--tls-cert", &cert, "--tls-key", "/nonexistent/key.pem"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cannot read key /nonexistent/key.pem"), "{err}");

    let (code, err) = serve(&["--tls-cert", &cert]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("go together"), "{err}");

    let (code, err) = serve(&["--tls-cert", &cert, "--tls-key", &wrong_key, "--tls-backend", "gnutls"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("expected rustls or openssl"), "{err}");

    let (code, err) = serve(&["--tls-cert", &cert, "--tls-key", &wrong_key, "--plain-http"]);
    assert_eq!(code, Some(2), "clap refuses the contradiction: {err}");
}
