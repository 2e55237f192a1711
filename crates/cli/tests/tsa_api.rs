//! The RFC 3161 timestamp authority against a real `signet serve --dev`, checked by
//! `openssl ts -verify`.

use crate::common;

use std::process::Command;

use common::*;
use serde_json::json;
use signet_core::b64;

fn openssl(args: &[&str]) -> std::process::Output {
    Command::new("openssl").args(args).output().expect("openssl is installed")
}

#[test]
fn timestamps_verify_with_openssl() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let agent = agent();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    std::fs::write(p("artifact"), b"timestamp me").unwrap();

    let chain = get(&agent, &format!("{}/api/v1/timestamp/certchain", server.url)).unwrap().text();
    let blocks = signet_core::pem::decode_all(chain.as_bytes()).unwrap();
    assert_eq!(blocks.len(), 2, "TSA certificate and root");
    std::fs::write(p("tsa.pem"), signet_core::pem::encode("CERTIFICATE", &blocks[0].der)).unwrap();
    std::fs::write(p("root.pem"), signet_core::pem::encode("CERTIFICATE", &blocks[1].der)).unwrap();
    let text = String::from_utf8(openssl(&["x509", "-noout", "-text", "-in", &p("tsa.pem")]).stdout).unwrap();
    assert!(text.contains("X509v3 Extended Key Usage: critical") && text.contains("Time Stamping"), "{text}");

    let (artifact, resp, root) = (p("artifact"), p("resp.tsr"), p("root.pem"));
    for (hash, cert) in [("-sha256", true), ("-sha384", false), ("-sha512", true)] {
        let q = p("req.tsq");
        let mut args = vec!["ts", "-query", "-data", &artifact, hash, "-out", &q];
        if cert {
            args.push("-cert");
        }
        assert!(openssl(&args).status.success());
        let r = post_raw(&agent, &format!("{}/api/v1/timestamp", server.url), "application/timestamp-query", std::fs::read(&q).unwrap()).unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.header("content-type"), Some("application/timestamp-reply"));
        std::fs::write(p("resp.tsr"), &r.body).unwrap();
        let mut verify = vec!["ts", "-verify", "-in", &resp, "-queryfile", &q, "-CAfile", &root];
        let untrusted = p("tsa.pem");
        if !cert {
            // Without certReq the token carries no certificate; openssl needs it given.
            verify.extend(["-untrusted", &untrusted]);
        }
        let out = openssl(&verify);
        assert!(out.status.success(), "{hash}: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        // Tampering: the same response does not verify for other data.
        std::fs::write(p("other"), b"something else").unwrap();
        let out = openssl(&["ts", "-verify", "-in", &p("resp.tsr"), "-data", &p("other"), "-CAfile", &p("root.pem"), "-untrusted", &untrusted]);
        assert!(!out.status.success(), "{hash}: verified against the wrong data");
    }

    // The JSON form returns the same kind of DER response.
    let digest = signet_core::hash::sha256(b"timestamp me");
    let r = post_json(&agent, &format!("{}/api/v1/timestamp", server.url),
        &json!({"artifactHash": b64::encode(digest), "hashAlgorithm": "sha256", "nonce": 12345, "certificates": true})).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    std::fs::write(p("json.tsr"), &r.body).unwrap();
    let out = openssl(&["ts", "-verify", "-in", &p("json.tsr"), "-data", &p("artifact"), "-CAfile", &p("root.pem")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(openssl(&["ts", "-reply", "-in", &p("json.tsr"), "-text"]).stdout).unwrap();
    assert!(text.contains("Nonce: 0x3039"), "{text}");
}

#[test]
fn refuses_bad_requests() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let agent = agent();
    let url = format!("{}/api/v1/timestamp", server.url);
    let json_req = |v: serde_json::Value| post_json(&agent, &url, &v).unwrap();
    let cases: Vec<(&str, Reply, u16, &str)> = vec![
        ("malformed DER", post_raw(&agent, &url, "application/timestamp-query", vec![0x30, 0x03, 0x02, 0x01]).unwrap(), 400, "not valid DER"),
        ("wrong content type", post_raw(&agent, &url, "text/plain", b"x".to_vec()).unwrap(), 415, "timestamp-query"),
        ("SHA-1", json_req(json!({"artifactHash": b64::encode([0u8; 20]), "hashAlgorithm": "sha1"})), 400, "sha1"),
        ("imprint length", json_req(json!({"artifactHash": b64::encode([0u8; 20]), "hashAlgorithm": "sha256"})), 400, "32"),
        ("policy", json_req(json!({"artifactHash": b64::encode([0u8; 32]), "tsaPolicyOID": "1.2.3.4"})), 400, "policy"),
        ("bad base64", json_req(json!({"artifactHash": "***"})), 400, "base64"),
    ];
    for (name, r, status, needle) in cases {
        assert_eq!(r.status, status, "{name}: {}", r.text());
        let msg = r.json()["message"].as_str().unwrap().to_string();
        assert!(msg.contains(needle), "{name}: {msg:?} should mention {needle:?}");
    }
}
