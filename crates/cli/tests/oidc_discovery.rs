//! Issuers whose keys come from OIDC discovery: a real `signet serve` fetches the discovery
//! document and the JWKS over real TLS from an issuer on loopback, whose certificate comes
//! from a CA generated for the test.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
use common::*;
use der::Decode;
use serde_json::{json, Value};
use signet_ca::oidc::dev::DevIssuer;
use signet_core::{b64, pem};
use signet_tls::testing::{TestPki, TestServer};

const DISCOVERY: &str = "/.well-known/openid-configuration";

/// An identity provider: keys to mint tokens with, served by a TLS server on loopback.
struct Idp {
    server: TestServer,
    keys: DevIssuer,
}

impl Idp {
    fn start(dir: &Path, server: TestServer) -> Idp {
        let keys = DevIssuer::open(&dir.join("idp-keys"), &server.url).unwrap();
        server.set(DISCOVERY, 200, keys.discovery().to_string());
        server.set("/jwks", 200, keys.jwks().to_string());
        Idp { server, keys }
    }

    /// Another key of the same issuer, with its own key ID.
    fn new_key(&self, dir: &Path, name: &str) -> DevIssuer {
        DevIssuer::open(&dir.join(name), &self.server.url).unwrap()
    }
}

fn config(dir: &Path, issuer: &str, extra: &str) -> PathBuf {
    let path = dir.join("signet.toml");
    std::fs::write(&path, format!("[[oidc.issuers]]\nurl = \"{issuer}\"\nsubject = \"email\"\n{extra}")).unwrap();
    path
}

fn ca_file(dir: &Path, pki: &TestPki) -> String {
    let path = dir.join("idp-ca.pem");
    std::fs::write(&path, &pki.ca_pem).unwrap();
    format!("ca_file = \"{}\"\n", path.display())
}

fn serve(dir: &Path, config: &Path) -> Server {
    Server::start(&dir.join("data"), &["--config", config.to_str().unwrap()])
}

/// A `signingCert` request for `token`'s email, with a fresh key.
fn sign_request(token: &str, email: &str) -> Value {
    let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).unwrap();
    let spki = aws_lc_rs::encoding::AsDer::as_der(pair.public_key()).unwrap();
    let pop = pair.sign(&SystemRandom::new(), email.as_bytes()).unwrap();
    json!({"credentials": {"oidcIdentityToken": token},
           "publicKeyRequest": {"publicKey": {"algorithm": "ECDSA", "content": pem::encode("PUBLIC KEY", spki.as_ref())},
                                "proofOfPossession": b64::encode(pop.as_ref())}})
}

fn signing_cert(server: &Server, issuer: &DevIssuer, email: &str) -> Reply {
    let token = issuer.mint(email, 300).unwrap();
    post_json(&agent(), &format!("{}/api/v2/signingCert", server.url), &sign_request(&token, email)).unwrap()
}

fn message(r: &Reply) -> String {
    r.json()["message"].as_str().unwrap_or_default().to_string()
}

#[test]
fn a_discovered_issuer_gets_certificates_and_its_key_rotation_is_picked_up() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let idp = Idp::start(dir.path(), TestServer::https(&pki));
    let cfg = config(dir.path(), &idp.server.url, &format!("{}min_refresh_interval_secs = 1\n", ca_file(dir.path(), &pki)));
    let server = serve(dir.path(), &cfg);

    let r = signing_cert(&server, &idp.keys, "dev@example.com");
    assert_eq!(r.status, 200, "{}", r.text());
    let leaf_pem = r.json()["signedCertificateEmbeddedSct"]["chain"]["certificates"][0].as_str().unwrap().to_string();
    let leaf = x509_cert::Certificate::from_der(&pem::decode_first(leaf_pem.as_bytes()).unwrap().der).unwrap();
    let issuer_ext = der::asn1::ObjectIdentifier::new_unwrap("1.3.6.1.4.1.57264.1.8");
    let ext = leaf.tbs_certificate.extensions.unwrap().into_iter().find(|e| e.extn_id == issuer_ext).unwrap();
    let named = der::asn1::Utf8StringRef::from_der(ext.extn_value.as_bytes()).unwrap().as_str().to_string();
    assert_eq!(named, idp.server.url, "the certificate names the discovered issuer");
    assert!(idp.server.hits("/jwks") >= 1);

    // The issuer rotates to a new key. Before its JWKS says so, the new key ID is unknown.
    let rotated = idp.new_key(dir.path(), "idp-key-2");
    let r = signing_cert(&server, &rotated, "dev@example.com");
    assert_eq!(r.status, 401, "{}", r.text());
    assert!(message(&r).contains("key ID"), "{}", message(&r));
    idp.server.set("/jwks", 200, rotated.jwks().to_string());
    // Past the refresh interval, the next unknown key ID fetches the key set again.
    std::thread::sleep(Duration::from_millis(1500));
    let r = signing_cert(&server, &rotated, "dev@example.com");
    assert_eq!(r.status, 200, "{}", r.text());
}

#[test]
fn forged_key_ids_do_not_make_signet_fetch_again_within_the_interval() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let idp = Idp::start(dir.path(), TestServer::https(&pki));
    let cfg = config(dir.path(), &idp.server.url, &format!("{}min_refresh_interval_secs = 3600\n", ca_file(dir.path(), &pki)));
    let server = serve(dir.path(), &cfg);
    assert_eq!(signing_cert(&server, &idp.keys, "a@example.com").status, 200);
    for i in 0..4 {
        let forger = idp.new_key(dir.path(), &format!("forger-{i}"));
        let r = signing_cert(&server, &forger, "a@example.com");
        assert_eq!(r.status, 401, "{}", r.text());
        assert!(message(&r).contains("key ID"), "{}", message(&r));
    }
    assert_eq!(idp.server.hits(DISCOVERY), 1, "one discovery fetch");
    assert_eq!(idp.server.hits("/jwks"), 1, "one key set fetch");
}

#[test]
fn an_issuer_certificate_outside_the_platform_roots_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let idp = Idp::start(dir.path(), TestServer::https(&TestPki::new()));
    // No ca_file: the platform's roots do not include the test CA.
    let server = serve(dir.path(), &config(dir.path(), &idp.server.url, ""));
    let r = signing_cert(&server, &idp.keys, "a@example.com");
    assert_eq!(r.status, 401, "{}", r.text());
    let msg = message(&r);
    assert!(msg.contains("TLS verification") && msg.contains(&idp.server.url), "{msg}");
    assert_eq!(idp.server.hits(DISCOVERY), 0);
    assert_eq!(get(&agent(), &format!("{}/healthz", server.url)).unwrap().status, 200, "the server keeps running");
}

#[test]
fn a_discovery_document_for_another_issuer_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let idp = Idp::start(dir.path(), TestServer::https(&pki));
    let url = &idp.server.url;
    idp.server.set(DISCOVERY, 200, json!({"issuer": "https://other.example", "jwks_uri": format!("{url}/jwks")}).to_string());
    let server = serve(dir.path(), &config(dir.path(), url, &ca_file(dir.path(), &pki)));
    let r = signing_cert(&server, &idp.keys, "a@example.com");
    assert_eq!(r.status, 401, "{}", r.text());
    assert!(message(&r).contains("names issuer \"https://other.example\""), "{}", message(&r));
    assert_eq!(idp.server.hits("/jwks"), 0, "the key set of a mismatched document is not fetched");
}

#[test]
fn an_issuer_down_at_startup_refuses_its_tokens_but_not_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let down = Idp::start(dir.path(), TestServer::https(&TestPki::new()));
    let url = down.server.url.clone();
    let keys = down.keys;
    drop(down.server);
    let server = serve(dir.path(), &config(dir.path(), &url, ""));
    let r = signing_cert(&server, &keys, "a@example.com");
    assert_eq!(r.status, 401, "{}", r.text());
    let msg = message(&r);
    assert!(msg.contains("could not be fetched") && msg.contains("connection failed") && msg.contains(&url), "{msg}");
    assert_eq!(get(&agent(), &format!("{}/healthz", server.url)).unwrap().status, 200);
}

#[test]
fn plain_http_is_allowed_to_a_loopback_issuer_only() {
    let dir = tempfile::tempdir().unwrap();
    let idp = Idp::start(dir.path(), TestServer::http());
    let server = serve(dir.path(), &config(dir.path(), &idp.server.url, ""));
    let r = signing_cert(&server, &idp.keys, "a@example.com");
    assert_eq!(r.status, 200, "{}", r.text());

    let cfg = config(dir.path(), "http://idp.example", "");
    let out = Command::new(env!("CARGO_BIN_EXE_signet"))
        .args(["serve", "--dev", "--plain-http", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data2"))
        .arg("--config")
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a config error");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("http://idp.example") && stderr.contains("plain http"), "{stderr}");
}
