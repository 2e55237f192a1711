//! The CT log's `add-chain` and `add-pre-chain` (RFC 6962 §4.1, §4.2) against a real
//! `signet serve --dev`: with Google's own CT client (`ctclient`, certificate-transparency-go
//! from the Go module proxy, which scripts/test builds into .tools/bin), which checks the SCT,
//! the tree head and the inclusion proof itself; and every refusal, by what it says.

use crate::common;
use crate::fulcio_api::{key, request, token};

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_json::{json, Value};
use signet_core::{b64, pem};

fn ctclient() -> PathBuf {
    let built = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.tools/bin/ctclient");
    std::env::var_os("SIGNET_CTCLIENT").map(PathBuf::from).filter(|p| p.exists()).or(Some(built).filter(|p| p.exists())).expect(
        "ctclient is not installed: scripts/test builds it (go install github.com/google/certificate-transparency-go/client/ctclient) into .tools/bin",
    )
}

/// `ctclient COMMAND --log_uri URL --pub_key ct.pub.pem ARGS…`: its output, or a panic with it.
/// (The command comes first: ctclient parses Go's own flags up to the first word that is not one.)
fn run_ctclient(url: &str, pub_key: &Path, command: &str, args: &[&str]) -> String {
    let out = Command::new(ctclient()).args([command, "--log_uri", url, "--pub_key"]).arg(pub_key).args(args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "ctclient {command} {args:?} failed:\n{text}");
    text
}

/// A certificate from the CA, as `[leaf, intermediate, root]` DER.
fn certificate(server: &Server, dir: &Path) -> Vec<Vec<u8>> {
    let tok = token(dir, "alice@example.com");
    let r = post_json(&agent(), &format!("{}/api/v2/signingCert", server.url), &request(&key(), &tok, "alice@example.com")).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["signedCertificateEmbeddedSct"]["chain"]["certificates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| pem::decode_first(c.as_str().unwrap().as_bytes()).unwrap().der)
        .collect()
}

/// The precertificate the CA logged at `index`, from get-entries' `extra_data`.
fn logged_precertificate(server: &Server, index: u64) -> Vec<u8> {
    let entries = get(&agent(), &format!("{}/ct/v1/get-entries?start={index}&end={index}", server.url)).unwrap().json();
    let extra = b64::decode(entries["entries"][0]["extra_data"].as_str().unwrap()).unwrap();
    let len = u32::from_be_bytes([0, extra[0], extra[1], extra[2]]) as usize;
    extra[3..3 + len].to_vec()
}

fn pem_chain(chain: &[&[u8]]) -> String {
    chain.iter().map(|der| pem::encode("CERTIFICATE", der)).collect()
}

fn add(server: &Server, endpoint: &str, body: &Value) -> Reply {
    post_json(&agent(), &format!("{}/ct/v1/{endpoint}", server.url), body).unwrap()
}

fn chain_json(chain: &[&[u8]]) -> Value {
    json!({"chain": chain.iter().map(b64::encode).collect::<Vec<_>>()})
}

#[test]
fn ctclient_logs_a_certificate_and_a_precertificate_and_proves_both() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let issued = certificate(&server, dir.path());
    let (leaf, inter, root) = (&issued[0], &issued[1], &issued[2]);
    let precert = logged_precertificate(&server, 0);
    let ct_key = signet_keys::Signer::load_or_generate(&dir.path().join("keys/ct.pem"), signet_keys::Algorithm::EcdsaP256Sha256).unwrap();
    let pub_key = dir.path().join("ct.pub.pem");
    std::fs::write(&pub_key, pem::encode("PUBLIC KEY", ct_key.spki_der())).unwrap();
    let files = tempfile::tempdir().unwrap();
    let write = |name: &str, chain: &[&[u8]]| {
        let p = files.path().join(name);
        std::fs::write(&p, pem_chain(chain)).unwrap();
        p.to_str().unwrap().to_string()
    };
    let final_chain = write("final.pem", &[leaf, inter, root]);
    let pre_chain = write("pre.pem", &[&precert, inter]);

    // upload verifies the SCT's signature against the key, and with --log_mmd 0s fetches the
    // signed tree head (its signature checked too) and the entry's inclusion proof, and
    // verifies that as well: the SCT is answered only once the entry is durable.
    let out = run_ctclient(&server.url, &pub_key, "upload", &["--cert_chain", &final_chain, "--log_mmd", "0s"]);
    assert!(out.contains("Uploaded chain of 3 certs") && out.contains("Verified that hash"), "{out}");
    let out = run_ctclient(&server.url, &pub_key, "upload", &["--cert_chain", &pre_chain, "--log_mmd", "0s"]);
    assert!(out.contains("Uploading pre-certificate to log") && out.contains("Verified that hash"), "{out}");
    assert!(out.contains("Inclusion proof for index 2 "), "the CA's own precertificate is entry 0, the two submissions 1 and 2:\n{out}");

    // get-entries as the client reads them: an X.509 entry with the chain to the root, and
    // a precert entry with the precertificate as submitted.
    let out = run_ctclient(&server.url, &pub_key, "get-entries", &["--first", "1", "--last", "2", "--chain", "--text=false"]);
    assert!(out.contains("Index=1 ") && out.contains("X.509 certificate:"), "{out}");
    assert!(out.contains("Index=2 ") && out.contains("pre-certificate from issuer with keyhash"), "{out}");
    let printed: Vec<Vec<u8>> = pem::decode_all(out.as_bytes()).unwrap().into_iter().map(|b| b.der).collect();
    assert_eq!(printed, vec![leaf.clone(), inter.clone(), root.clone(), precert.clone(), inter.clone(), root.clone()], "{out}");
}

#[test]
fn submissions_answer_an_sct_over_the_logged_leaf_and_refuse_what_is_not_this_cas() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let issued = certificate(&server, dir.path());
    let (leaf, inter, root) = (&issued[0], &issued[1], &issued[2]);
    let precert = logged_precertificate(&server, 0);

    let r = add(&server, "add-chain", &chain_json(&[leaf, inter]));
    assert_eq!(r.status, 200, "{}", r.text());
    let sct = r.json();
    assert_eq!((sct["sct_version"].as_u64(), sct["extensions"].as_str()), (Some(0), Some("")));
    let ct_key = signet_keys::Signer::load_or_generate(&dir.path().join("keys/ct.pem"), signet_keys::Algorithm::EcdsaP256Sha256).unwrap();
    assert_eq!(b64::decode(sct["id"].as_str().unwrap()).unwrap(), ct_key.key_id());
    let leaf_input = signet_ca::ct::x509_leaf(sct["timestamp"].as_u64().unwrap(), leaf).unwrap();
    let signature = b64::decode(sct["signature"].as_str().unwrap()).unwrap();
    assert_eq!(&signature[..2], &[4, 3], "DigitallySigned: SHA-256, ECDSA");
    assert!(signet_keys::Algorithm::EcdsaP256Sha256.verify(ct_key.spki_der(), &leaf_input, &signature[4..]));
    let entries = get(&agent(), &format!("{}/ct/v1/get-entries?start=1&end=1", server.url)).unwrap().json();
    assert_eq!(b64::decode(entries["entries"][0]["leaf_input"].as_str().unwrap()).unwrap(), leaf_input, "the SCT signs the logged leaf");

    // Each refusal is a 400 that names the certificate at fault and says what was expected.
    let other_dir = tempfile::tempdir().unwrap();
    let other = signet_ca::authority::Authority::open(other_dir.path(), &signet_ca::authority::CaKeys::curve(None)).unwrap();
    let cases: Vec<(&str, Value, &str, &str)> = vec![
        ("add-chain", chain_json(&[&precert, inter]), "chain[0]", "add-pre-chain"),
        ("add-pre-chain", chain_json(&[leaf, inter, root]), "chain[0]", "/ct/v1/add-chain"),
        ("add-chain", chain_json(&[leaf, other.intermediate_der()]), "chain[1]", "not an intermediate of this log's CA"),
        ("add-chain", chain_json(&[leaf, inter, other.root_der()]), "chain[2]", "not this log's root"),
        ("add-chain", chain_json(&[leaf]), "chain", "1 certificates sent"),
        ("add-chain", json!({"chain": null}), "chain", "0 certificates sent"),
        ("add-chain", json!({"chain": ["%%%"]}), "chain[0]", "base64"),
        ("add-chain", json!({"chain": [b64::encode(leaf), b64::encode(inter)], "extra": 1}), "extra", "unknown field"),
    ];
    for (endpoint, body, at, why) in cases {
        let r = add(&server, endpoint, &body);
        assert_eq!(r.status, 400, "{endpoint} {body}: {}", r.text());
        let e = r.json();
        assert_eq!(e["path"].as_str(), Some(at), "{endpoint} {body}: {e}");
        assert!(e["message"].as_str().unwrap().contains(why), "{endpoint} {body}: {e}");
    }
    let size = get(&agent(), &format!("{}/ct/v1/get-sth", server.url)).unwrap().json()["tree_size"].as_u64();
    assert_eq!(size, Some(2), "no refused chain was logged");
}

/// `extra_data` of the precert entry at `index`: the precertificate and its chain (DER).
fn precert_chain(server: &Server, index: u64) -> (Vec<u8>, Vec<Vec<u8>>) {
    let entries = get(&agent(), &format!("{}/ct/v1/get-entries?start={index}&end={index}", server.url)).unwrap().json();
    let extra = b64::decode(entries["entries"][0]["extra_data"].as_str().unwrap()).unwrap();
    let opaque24 = |b: &[u8]| -> (Vec<u8>, usize) {
        let len = u32::from_be_bytes([0, b[0], b[1], b[2]]) as usize;
        (b[3..3 + len].to_vec(), 3 + len)
    };
    let (precert, used) = opaque24(&extra);
    let (list, _) = opaque24(&extra[used..]);
    let mut chain = Vec::new();
    let mut at = 0;
    while at < list.len() {
        let (cert, used) = opaque24(&list[at..]);
        chain.push(cert);
        at += used;
    }
    (precert, chain)
}

fn tree_size(server: &Server) -> u64 {
    get(&agent(), &format!("{}/ct/v1/get-sth", server.url)).unwrap().json()["tree_size"].as_u64().unwrap()
}

/// After `trust rotate --intermediate`, a precertificate logged before it is served with the
/// intermediate that signed it (the retired one), not today's: OpenSSL checks each chain.
#[test]
fn a_precertificate_keeps_the_intermediate_that_signed_it_after_a_rotation() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut server = Server::start(&data, &[]);
    certificate(&server, &data);
    let before = tree_size(&server) - 1;
    server.kill();
    let rotated = Command::new(env!("CARGO_BIN_EXE_signet"))
        .args(["trust", "rotate", "--intermediate", "--data-dir", data.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(rotated.status.success(), "{}", String::from_utf8_lossy(&rotated.stderr));
    let report: Value = serde_json::from_slice(&rotated.stdout).unwrap();
    let retired = pem::decode_first(&std::fs::read(data.join(report["retired_cert"].as_str().unwrap())).unwrap()).unwrap().der;

    let server = Server::start(&data, &[]);
    let today = certificate(&server, &data);
    let after = tree_size(&server) - 1;
    let (old_precert, old_chain) = precert_chain(&server, before);
    let (new_precert, new_chain) = precert_chain(&server, after);
    assert_eq!(old_chain[0], retired, "the retired intermediate signed the first");
    assert_eq!(new_chain[0], today[1], "today's intermediate the second");
    assert_ne!(old_chain[0], new_chain[0]);
    for (precert, chain) in [(&old_precert, &old_chain), (&new_precert, &new_chain)] {
        assert_eq!(chain[1], today[2], "one root");
        let path = |name: &str, der: &[u8]| {
            let p = dir.path().join(name);
            std::fs::write(&p, pem::encode("CERTIFICATE", der)).unwrap();
            p
        };
        let (root, inter, leaf) = (path("root.pem", &chain[1]), path("inter.pem", &chain[0]), path("precert.pem", precert));
        // -ignore_critical: the precertificate's poison extension is critical by design.
        let out = Command::new("openssl")
            .args(["verify", "-ignore_critical", "-purpose", "any", "-CAfile"])
            .arg(&root)
            .arg("-untrusted")
            .arg(&inter)
            .arg(&leaf)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    }
    // The chain is what decides: the old precertificate does not verify up today's intermediate.
    let wrong = |p: &str| dir.path().join(p);
    std::fs::write(wrong("inter.pem"), pem::encode("CERTIFICATE", &new_chain[0])).unwrap();
    std::fs::write(wrong("precert.pem"), pem::encode("CERTIFICATE", &old_precert)).unwrap();
    let out = Command::new("openssl")
        .args(["verify", "-ignore_critical", "-purpose", "any", "-CAfile"])
        .arg(wrong("root.pem"))
        .arg("-untrusted")
        .arg(wrong("inter.pem"))
        .arg(wrong("precert.pem"))
        .output()
        .unwrap();
    assert!(!out.status.success(), "the old precertificate verified up today's intermediate");
}
