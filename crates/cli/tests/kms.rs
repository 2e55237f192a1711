//! Issue 43: every online key of an instance in AWS KMS, served by local-kms (an emulator of
//! its API, built by scripts/test from the Go module proxy), reached through the real AWS
//! SDK for Rust with the SDK's own settings, as an operator would give them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

fn local_kms_binary() -> PathBuf {
    let built = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.tools/bin/local-kms");
    std::env::var_os("SIGNET_LOCAL_KMS").map(PathBuf::from).filter(|p| p.exists()).or(Some(built).filter(|p| p.exists())).expect(
        "local-kms is not installed: scripts/test builds it (go install github.com/nsmithuk/local-kms) into .tools/bin",
    )
}

/// local-kms on `port`, keeping its keys in `data`.
fn local_kms(port: u16, data: &Path) -> Child {
    let child = Command::new(local_kms_binary())
        .env("PORT", port.to_string())
        .env("KMS_DATA_PATH", data)
        .env("KMS_REGION", "eu-west-2")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "local-kms did not listen on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

/// `signet …` with the AWS SDK's settings for the KMS on `port`.
fn signet(kms_port: u16, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_signet"));
    c.env("AWS_ENDPOINT_URL_KMS", format!("http://127.0.0.1:{kms_port}"))
        .env("AWS_REGION", "eu-west-2")
        .env("AWS_ACCESS_KEY_ID", "signet-test")
        .env("AWS_SECRET_ACCESS_KEY", "signet-test")
        .args(args);
    c
}

fn openssl(args: &[&str], files: &[&Path]) {
    let out = Command::new("openssl").args(args).args(files).output().unwrap();
    assert!(out.status.success(), "openssl {args:?}: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

#[test]
fn an_instance_whose_keys_are_in_kms_signs_everything_there_and_waits_out_kms() {
    let top = tempfile::tempdir().unwrap();
    let kms_data = top.path().join("kms");
    std::fs::create_dir(&kms_data).unwrap();
    let kms_port = crate::haproxy::free_port();
    let mut kms = local_kms(kms_port, &kms_data);
    let (data, port) = (top.path().join("data"), crate::haproxy::free_port());
    let d = data.to_str().unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let made = signet(kms_port, &["init", "--data-dir", d, "--public-url", &url, "--keys", "awskms:///", "--root-key", "awskms:///alias/signet-ca-root"])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    for f in ["rekor-v1", "rekor-v2", "ct", "tsa", "ca-intermediate", "ca-root"] {
        assert!(!data.join(format!("keys/{f}.pem")).exists(), "keys/{f}.pem was written: the key is in KMS");
    }
    let config = std::fs::read_to_string(data.join("signet.toml")).unwrap();
    assert!(config.contains("tsa = \"awskms:///alias/signet-tsa\"") && !config.contains("signet-ca-root"), "{config}");
    let (root, inter) = (data.join("ca/root.pem"), data.join("ca/intermediate.pem"));
    openssl(&["verify", "-CAfile"], &[&root, &inter]);

    let mut command = signet(kms_port, &["serve", "--dev", "--config"]);
    command.arg(data.join("signet.toml")).args(["--listen", &format!("127.0.0.1:{port}"), "--plain-http"]);
    let server = Server::spawn(command, &data);
    let agent = agent();
    // A Rekor v2 append: its checkpoint signed in KMS, verified with the key init wrote out.
    let r = post_json(&agent, &format!("{}/api/v2/log/entries", server.url), &Signer::new().v2_entry(b"signed in KMS")).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let cp = r.json()["inclusionProof"]["checkpoint"]["envelope"].as_str().unwrap().to_string();
    let spki = signet_core::pem::decode_first(&std::fs::read(data.join("keys/rekor-v2.pub.pem")).unwrap()).unwrap().der;
    signet_log::checkpoint::verify(&cp, "127.0.0.1", &spki).expect("the checkpoint verifies with the KMS key");
    // A certificate: the intermediate in KMS signs it, its SCT too; the chain verifies.
    let out = Command::new(env!("CARGO_BIN_EXE_signet")).args(["dev-token", "--data-dir", d, "--subject", "kms@example.com"]).output().unwrap();
    let oidc = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let r = post_raw(&agent, &format!("{}/api/v2/signingCert", server.url), "application/json", cert_request(&oidc, "kms@example.com")).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let leaf = top.path().join("leaf.pem");
    std::fs::write(&leaf, r.json()["signedCertificateEmbeddedSct"]["chain"]["certificates"][0].as_str().unwrap()).unwrap();
    openssl(&["verify", "-purpose", "any", "-CAfile"], &[&root, Path::new("-untrusted"), &inter, &leaf]);
    // A timestamp, signed in KMS, verifies with openssl.
    let stamp = || {
        let digest = signet_core::hash::sha256(b"stamped in KMS");
        let body = serde_json::json!({"artifactHash": signet_core::b64::encode(digest), "hashAlgorithm": "sha256", "certificates": true});
        post_json(&agent, &format!("{}/api/v1/timestamp", server.url), &body).unwrap()
    };
    let r = stamp();
    assert_eq!(r.status, 200, "{}", r.text());
    std::fs::write(top.path().join("resp.tsr"), &r.body).unwrap();
    std::fs::write(top.path().join("artifact"), b"stamped in KMS").unwrap();
    openssl(&["ts", "-verify", "-data"], &[&top.path().join("artifact"), Path::new("-in"), &top.path().join("resp.tsr"), Path::new("-CAfile"), &root]);

    // KMS stops answering: a 503 that names the key, no entry written; it comes back, so do we.
    let size = || get(&agent, &format!("{}/api/v1/log", server.url)).unwrap().json()["treeSize"].as_u64().unwrap();
    let before = size();
    let _ = kms.kill();
    let _ = kms.wait();
    let r = stamp();
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.header("retry-after"), Some("1"));
    assert!(r.text().contains("awskms:///alias/signet-tsa"), "{}", r.text());
    let r = post_json(&agent, &format!("{}/api/v1/log/entries", server.url), &Signer::new().v1_entry(b"while KMS is away")).unwrap();
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(size(), before, "an entry was written while its SET could not be signed");
    let mut kms = local_kms(kms_port, &kms_data);
    let deadline = Instant::now() + Duration::from_secs(20);
    while stamp().status != 200 {
        assert!(Instant::now() < deadline, "stamps did not resume after KMS came back");
        std::thread::sleep(Duration::from_millis(300));
    }
    let r = post_json(&agent, &format!("{}/api/v1/log/entries", server.url), &Signer::new().v1_entry(b"KMS is back")).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    drop(server);
    let _ = kms.kill();
    let _ = kms.wait();
}
