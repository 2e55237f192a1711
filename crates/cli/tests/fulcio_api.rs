//! The Fulcio v2 API against a real `signet serve --dev`: a certificate for a dev-issuer
//! identity, with an SCT from signet's CT log, that OpenSSL accepts up to signet's root.

use crate::common;

use std::process::Command;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
use common::*;
use der::{Decode, Encode};
use serde_json::{json, Value};
use signet_core::{b64, pem};

pub(crate) fn token(dir: &std::path::Path, email: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_signet"))
        .args(["dev-token", "--data-dir"])
        .arg(dir)
        .args(["--subject", email])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

pub(crate) struct Key {
    pub(crate) pair: EcdsaKeyPair,
    pub(crate) pem: String,
}

pub(crate) fn key() -> Key {
    let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).unwrap();
    let spki = aws_lc_rs::encoding::AsDer::as_der(pair.public_key()).unwrap();
    let pem = pem::encode("PUBLIC KEY", spki.as_ref());
    Key { pair, pem }
}

pub(crate) fn request(k: &Key, token: &str, challenge: &str) -> Value {
    let pop = k.pair.sign(&SystemRandom::new(), challenge.as_bytes()).unwrap();
    json!({"credentials": {"oidcIdentityToken": token},
           "publicKeyRequest": {"publicKey": {"algorithm": "ECDSA", "content": k.pem}, "proofOfPossession": b64::encode(pop.as_ref())}})
}

#[test]
fn issues_a_certificate_with_an_embedded_sct() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let agent = agent();
    let tok = token(dir.path(), "alice@example.com");
    let k = key();
    let r = post_json(&agent, &format!("{}/api/v2/signingCert", server.url), &request(&k, &tok, "alice@example.com")).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let body = r.json();
    let chain: Vec<String> = body["signedCertificateEmbeddedSct"]["chain"]["certificates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    assert_eq!(chain.len(), 3, "leaf, intermediate, root");
    let bundle = get(&agent, &format!("{}/api/v2/trustBundle", server.url)).unwrap().json();
    assert_eq!(bundle["chains"][0]["certificates"], json!(chain[1..]));

    // OpenSSL accepts the chain and shows the profile.
    let paths: Vec<_> = ["leaf.pem", "inter.pem", "root.pem"]
        .iter()
        .zip(&chain)
        .map(|(n, c)| {
            let p = dir.path().join(n);
            std::fs::write(&p, c).unwrap();
            p
        })
        .collect();
    let verify = Command::new("openssl")
        .args(["verify", "-CAfile"])
        .arg(&paths[2])
        .arg("-untrusted")
        .arg(&paths[1])
        .arg(&paths[0])
        .output()
        .unwrap();
    assert!(verify.status.success(), "openssl verify: {}{}", String::from_utf8_lossy(&verify.stdout), String::from_utf8_lossy(&verify.stderr));
    let text = Command::new("openssl").args(["x509", "-noout", "-text", "-in"]).arg(&paths[0]).output().unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    for needle in ["email:alice@example.com", "CT Precertificate SCTs", "Code Signing", "Validity"] {
        assert!(text.contains(needle), "no {needle:?} in:\n{text}");
    }

    // The SCT verifies against the CT log key over the TBS without the SCT extension.
    let leaf_der = pem::decode_first(chain[0].as_bytes()).unwrap().der;
    let leaf = x509_cert::Certificate::from_der(&leaf_der).unwrap();
    let mut tbs = leaf.tbs_certificate.clone();
    let exts = tbs.extensions.as_mut().unwrap();
    let pos = exts.iter().position(|e| e.extn_id == signet_ca::authority::OID_CT_SCT_LIST).unwrap();
    let sct_ext = exts.remove(pos);
    let list = der::asn1::OctetString::from_der(sct_ext.extn_value.as_bytes()).unwrap();
    let list = list.as_bytes();
    assert_eq!(u16::from_be_bytes([list[0], list[1]]) as usize, list.len() - 2);
    let sct = &list[4..];
    let ct_key = signet_keys::Signer::load_or_generate(&dir.path().join("keys/ct.pem"), signet_keys::Algorithm::EcdsaP256Sha256).unwrap();
    assert_eq!(&sct[1..33], ct_key.key_id());
    let timestamp = u64::from_be_bytes(sct[33..41].try_into().unwrap());
    let sig_len = u16::from_be_bytes([sct[45], sct[46]]) as usize;
    let inter = x509_cert::Certificate::from_der(&pem::decode_first(chain[1].as_bytes()).unwrap().der).unwrap();
    let ikh = signet_core::hash::sha256(&inter.tbs_certificate.subject_public_key_info.to_der().unwrap());
    let signed = signet_ca::ct::precert_leaf(timestamp, &ikh, &tbs.to_der().unwrap()).unwrap();
    assert!(signet_keys::Algorithm::EcdsaP256Sha256.verify(ct_key.spki_der(), &signed, &sct[47..47 + sig_len]));

    // The CT read API: the signed tree head, the entry, and its inclusion proof.
    let sth = get(&agent, &format!("{}/ct/v1/get-sth", server.url)).unwrap().json();
    let size = sth["tree_size"].as_u64().unwrap();
    assert_eq!(size, 1);
    let root: [u8; 32] = b64::decode(sth["sha256_root_hash"].as_str().unwrap()).unwrap().try_into().unwrap();
    let mut signed_head = vec![0u8, 1];
    signed_head.extend_from_slice(&sth["timestamp"].as_u64().unwrap().to_be_bytes());
    signed_head.extend_from_slice(&size.to_be_bytes());
    signed_head.extend_from_slice(&root);
    let ths = b64::decode(sth["tree_head_signature"].as_str().unwrap()).unwrap();
    assert_eq!(&ths[..2], &[4, 3]);
    assert!(signet_keys::Algorithm::EcdsaP256Sha256.verify(ct_key.spki_der(), &signed_head, &ths[4..]));
    let entries = get(&agent, &format!("{}/ct/v1/get-entries?start=0&end=0", server.url)).unwrap().json();
    let leaf_input = b64::decode(entries["entries"][0]["leaf_input"].as_str().unwrap()).unwrap();
    assert_eq!(leaf_input, signed, "the logged leaf is the data the SCT signs");
    let extra = b64::decode(entries["entries"][0]["extra_data"].as_str().unwrap()).unwrap();
    let precert_len = u32::from_be_bytes([0, extra[0], extra[1], extra[2]]) as usize;
    let precert = x509_cert::Certificate::from_der(&extra[3..3 + precert_len]).unwrap();
    let poison = precert.tbs_certificate.extensions.as_ref().unwrap().last().unwrap();
    assert!(poison.critical && poison.extn_id == signet_ca::authority::OID_CT_POISON);
    let leaf_hash = signet_log::merkle::leaf_hash(&leaf_input);
    let proof = get(&agent, &format!("{}/ct/v1/get-proof-by-hash?hash={}&tree_size=1", server.url, b64::encode(leaf_hash).replace('+', "%2B").replace('/', "%2F").replace('=', "%3D"))).unwrap().json();
    assert_eq!(proof["leaf_index"], 0);
    signet_log::merkle::verify_inclusion(&leaf_hash, 0, 1, &[], &root).unwrap();
    assert_eq!(get(&agent, &format!("{}/ct/v1/get-entries?start=5&end=1", server.url)).unwrap().status, 400);

    // get-roots names signet's root; get-entry-and-proof gives entry 0 with its proof in a
    // tree of two, which verifies against that tree's head.
    let roots = get(&agent, &format!("{}/ct/v1/get-roots", server.url)).unwrap().json();
    assert_eq!(b64::decode(roots["certificates"][0].as_str().unwrap()).unwrap(), pem::decode_first(chain[2].as_bytes()).unwrap().der);
    let second = post_json(&agent, &format!("{}/api/v2/signingCert", server.url), &request(&key(), &tok, "alice@example.com")).unwrap();
    assert_eq!(second.status, 200, "{}", second.text());
    let sth = get(&agent, &format!("{}/ct/v1/get-sth", server.url)).unwrap().json();
    assert_eq!(sth["tree_size"], 2);
    let root2: [u8; 32] = b64::decode(sth["sha256_root_hash"].as_str().unwrap()).unwrap().try_into().unwrap();
    let both = get(&agent, &format!("{}/ct/v1/get-entry-and-proof?leaf_index=0&tree_size=2", server.url)).unwrap().json();
    assert_eq!(b64::decode(both["leaf_input"].as_str().unwrap()).unwrap(), signed);
    assert_eq!(both["extra_data"], entries["entries"][0]["extra_data"]);
    let path: Vec<[u8; 32]> =
        both["audit_path"].as_array().unwrap().iter().map(|h| b64::decode(h.as_str().unwrap()).unwrap().try_into().unwrap()).collect();
    assert_eq!(path.len(), 1);
    signet_log::merkle::verify_inclusion(&leaf_hash, 0, 2, &path, &root2).unwrap();
    for bad in ["leaf_index=2&tree_size=2", "leaf_index=0&tree_size=3", "leaf_index=0", "tree_size=1"] {
        let r = get(&agent, &format!("{}/ct/v1/get-entry-and-proof?{bad}", server.url)).unwrap();
        assert_eq!(r.status, 400, "{bad}: {}", r.text());
    }

    let config = get(&agent, &format!("{}/api/v2/configuration", server.url)).unwrap().json();
    assert_eq!(config["issuers"][0]["issuerUrl"], format!("{}/oidc", server.url));
}

/// Fulcio's legacy API with the bodies its Go client (gitsign, cosign before 2.0) sends: the
/// key as base64 DER with the proof beside it; or a CSR, the unused byte fields `null` as Go
/// writes nil slices. Each gets 201 and the PEM chain, leaf first, ending in the chain that
/// `rootCert` and the v2 trust bundle serve.
#[test]
fn the_legacy_v1_api_answers_the_go_clients_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let agent = agent();
    let url = format!("{}/api/v1/signingCert", server.url);
    let post = |body: &Value, bearer: Option<&str>| {
        let mut r = agent.post(&url).header("content-type", "application/json");
        if let Some(t) = bearer {
            r = r.header("authorization", &format!("Bearer {t}"));
        }
        reply(r.send(serde_json::to_vec(body).unwrap())).unwrap()
    };
    let ders = |text: &str| -> Vec<Vec<u8>> { pem::decode_all(text.as_bytes()).unwrap().into_iter().map(|b| b.der).collect() };
    let root = get(&agent, &format!("{}/api/v1/rootCert", server.url)).unwrap();
    assert_eq!(root.status, 200);
    assert_eq!(root.header("content-type"), Some("application/pem-certificate-chain"));
    let ca = ders(&root.text());
    let bundle = get(&agent, &format!("{}/api/v2/trustBundle", server.url)).unwrap().json();
    let bundle: Vec<Vec<u8>> = bundle["chains"][0]["certificates"].as_array().unwrap().iter().flat_map(|c| ders(c.as_str().unwrap())).collect();
    assert_eq!(ca, bundle, "rootCert is the trust bundle's chain");
    let leaf_key = |der: &[u8]| x509_cert::Certificate::from_der(der).unwrap().tbs_certificate.subject_public_key_info.to_der().unwrap();

    // A public key as DER, and the signature over the email.
    let k = key();
    let spki = pem::decode_first(k.pem.as_bytes()).unwrap().der;
    let pop = k.pair.sign(&SystemRandom::new(), b"alice@example.com").unwrap();
    let tok = token(dir.path(), "alice@example.com");
    let by_key = json!({"publicKey": {"content": b64::encode(&spki), "algorithm": "ecdsa"}, "signedEmailAddress": b64::encode(pop.as_ref())});
    let r = post(&by_key, Some(&tok));
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/pem-certificate-chain"));
    assert!(!r.text().ends_with('\n') && !r.text().contains("\n\n"), "no blank lines, as Fulcio writes it");
    let chain = ders(&r.text());
    assert_eq!(chain[1..], ca[..], "leaf first, then the CA's chain");
    assert_eq!(leaf_key(&chain[0]), spki, "the certificate is for the key sent");

    // A CSR made by OpenSSL, the key fields null.
    let (key_path, csr_path) = (dir.path().join("csr.key"), dir.path().join("csr.pem"));
    let made = Command::new("openssl")
        .args(["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=legacy", "-keyout"])
        .arg(&key_path)
        .arg("-out")
        .arg(&csr_path)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let csr = std::fs::read(&csr_path).unwrap();
    let by_csr = json!({"publicKey": {"content": null}, "signedEmailAddress": null, "certificateSigningRequest": b64::encode(&csr)});
    let r = post(&by_csr, Some(&token(dir.path(), "alice@example.com")));
    assert_eq!(r.status, 201, "{}", r.text());
    let pubkey = Command::new("openssl").args(["pkey", "-pubout", "-outform", "DER", "-in"]).arg(&key_path).output().unwrap();
    assert_eq!(leaf_key(&ders(&r.text())[0]), pubkey.stdout, "the certificate is for the CSR's key");

    // Refusals say what is wrong, as the v2 API's do.
    let r = post(&by_key, None);
    assert_eq!(r.status, 401, "{}", r.text());
    let wrong = json!({"publicKey": {"content": b64::encode(&spki)}, "signedEmailAddress": b64::encode(b"not a signature")});
    let r = post(&wrong, Some(&token(dir.path(), "alice@example.com")));
    assert_eq!(r.status, 400, "{}", r.text());
    let r = post(&json!({"publicKey": null, "signedEmailAddress": null}), Some(&token(dir.path(), "alice@example.com")));
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("exactly one of publicKey.content or certificateSigningRequest"), "{}", r.text());
}

#[test]
fn refuses_bad_requests() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let agent = agent();
    let url = format!("{}/api/v2/signingCert", server.url);
    let tok = token(dir.path(), "bob@example.com");
    let k = key();
    let k1 = hex::decode(format!("3056301006072a8648ce3d020106052b8104000a034200{}", "04".repeat(65))).unwrap();
    let cases: Vec<(&str, Value, u16, &str)> = vec![
        ("no token", json!({"publicKeyRequest": request(&k, "", "x")["publicKeyRequest"]}), 401, "identity token"),
        ("garbage token", request(&k, "not.a.token", "bob@example.com"), 401, "malformed"),
        ("PoP over the wrong claim", request(&k, &tok, "mallory@example.com"), 400, "proof of possession"),
        ("missing PoP", { let mut r = request(&k, &tok, "bob@example.com"); r["publicKeyRequest"]["proofOfPossession"] = json!(""); r }, 400, "proof of possession"),
        ("wrong PEM label", { let mut r = request(&k, &tok, "bob@example.com"); r["publicKeyRequest"]["publicKey"]["content"] = json!(pem::encode("CERTIFICATE", b"x")); r }, 400, "PUBLIC KEY"),
        ("unsupported curve", { let mut r = request(&k, &tok, "bob@example.com"); r["publicKeyRequest"]["publicKey"]["content"] = json!(pem::encode("PUBLIC KEY", &k1)); r }, 400, "curve"),
        ("malformed CSR", json!({"credentials": {"oidcIdentityToken": tok}, "certificateSigningRequest": b64::encode(pem::encode("CERTIFICATE REQUEST", b"junk"))}), 400, "certificate signing request"),
        ("neither form", json!({"credentials": {"oidcIdentityToken": tok}}), 400, "exactly one"),
    ];
    for (name, body, status, needle) in cases {
        let r = post_json(&agent, &url, &body).unwrap();
        assert_eq!(r.status, status, "{name}: {}", r.text());
        let msg = r.json()["message"].as_str().unwrap().to_string();
        assert!(msg.to_lowercase().contains(&needle.to_lowercase()), "{name}: {msg:?} should mention {needle:?}");
    }
    // The token in the Authorization header works like the body field.
    let mut req = request(&k, &tok, "bob@example.com");
    req.as_object_mut().unwrap().remove("credentials");
    let r = agent
        .post(&url)
        .header("content-type", "application/json")
        .header("authorization", &format!("Bearer {tok}"))
        .send(serde_json::to_vec(&req).unwrap())
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
}

#[test]
fn configured_issuer_with_jwks_file_and_key_rotation() {
    use signet_ca::oidc::dev::DevIssuer;
    let dir = tempfile::tempdir().unwrap();
    let issuer_url = "https://ci.example";
    let first = DevIssuer::open(&dir.path().join("idp1"), issuer_url).unwrap();
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, first.jwks().to_string()).unwrap();
    let config = dir.path().join("signet.toml");
    std::fs::write(
        &config,
        format!("[[oidc.issuers]]\nurl = \"{issuer_url}\"\nsubject = \"email\"\njwks_file = \"{}\"\n", jwks.display()),
    )
    .unwrap();
    let server = Server::start(&dir.path().join("data"), &["--config", config.to_str().unwrap()]);
    let agent = agent();
    let url = format!("{}/api/v2/signingCert", server.url);
    let k = key();

    let tok = first.mint("ci@example.com", 300).unwrap();
    let r = post_json(&agent, &url, &request(&k, &tok, "ci@example.com")).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());

    // The issuer rotates its key: a token with the new key ID makes signet reread the file.
    let second = DevIssuer::open(&dir.path().join("idp2"), issuer_url).unwrap();
    let tok2 = second.mint("ci@example.com", 300).unwrap();
    assert_eq!(post_json(&agent, &url, &request(&k, &tok2, "ci@example.com")).unwrap().status, 401, "unknown key before rotation");
    std::fs::write(&jwks, second.jwks().to_string()).unwrap();
    let r = post_json(&agent, &url, &request(&k, &tok2, "ci@example.com")).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let config = get(&agent, &format!("{}/api/v2/configuration", server.url)).unwrap().json();
    let issuers: Vec<&str> = config["issuers"].as_array().unwrap().iter().map(|i| i["issuerUrl"].as_str().unwrap()).collect();
    assert!(issuers.contains(&issuer_url));
}

#[test]
fn github_actions_tokens_get_the_workflow_san_and_ci_extensions() {
    use der::asn1::Utf8StringRef;
    use signet_ca::oidc::dev::DevIssuer;
    let dir = tempfile::tempdir().unwrap();
    let issuer_url = "https://token.actions.githubusercontent.com";
    let idp = DevIssuer::open(&dir.path().join("idp"), issuer_url).unwrap();
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, idp.jwks().to_string()).unwrap();
    let config = dir.path().join("signet.toml");
    std::fs::write(
        &config,
        format!("[[oidc.issuers]]\nurl = \"{issuer_url}\"\nsubject = \"github-workflow\"\njwks_file = \"{}\"\n", jwks.display()),
    )
    .unwrap();
    let server = Server::start(&dir.path().join("data"), &["--config", config.to_str().unwrap()]);
    let url = format!("{}/api/v2/signingCert", server.url);
    let workflow = "octo/app/.github/workflows/release.yml@refs/tags/v1";
    let sub = "repo:octo/app:ref:refs/tags/v1";
    // Every claim a GitHub Actions token carries (docs.github.com, "About security hardening with OpenID Connect").
    let claims = json!({"job_workflow_ref": workflow, "job_workflow_sha": "def456", "repository": "octo/app", "repository_id": "42",
                        "repository_owner": "octo", "repository_owner_id": "7", "sha": "abc123", "ref": "refs/tags/v1",
                        "ref_type": "tag", "event_name": "push", "workflow": "release", "workflow_ref": workflow, "workflow_sha": "def456",
                        "run_id": "9", "run_number": "3", "run_attempt": "1", "runner_environment": "github-hosted", "actor": "octocat",
                        "repository_visibility": "public"});
    let tok = idp.mint_claims(sub, claims, 300).unwrap();
    let k = key();
    let r = post_json(&agent(), &url, &request(&k, &tok, sub)).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let chain = r.json()["signedCertificateEmbeddedSct"]["chain"]["certificates"][0].as_str().unwrap().to_string();
    let leaf = x509_cert::Certificate::from_der(&signet_core::pem::decode_first(chain.as_bytes()).unwrap().der).unwrap();
    let ext = |arc: &str| {
        let oid = der::asn1::ObjectIdentifier::new_unwrap(arc);
        leaf.tbs_certificate.extensions.as_ref().unwrap().iter().find(|e| e.extn_id == oid).map(|e| e.extn_value.as_bytes().to_vec())
    };
    let utf8 = |arc: &str| ext(arc).map(|v| Utf8StringRef::from_der(&v).unwrap().as_str().to_string());
    let san = ext("2.5.29.17").unwrap();
    assert!(san.windows(workflow.len()).any(|w| w == workflow.as_bytes()), "SAN is the workflow URI");
    assert_eq!(utf8("1.3.6.1.4.1.57264.1.8").unwrap(), issuer_url);
    assert_eq!(utf8("1.3.6.1.4.1.57264.1.9").unwrap(), format!("https://github.com/{workflow}"));
    assert_eq!(utf8("1.3.6.1.4.1.57264.1.12").unwrap(), "https://github.com/octo/app");
    assert_eq!(utf8("1.3.6.1.4.1.57264.1.13").unwrap(), "abc123");
    assert_eq!(utf8("1.3.6.1.4.1.57264.1.21").unwrap(), "https://github.com/octo/app/actions/runs/9/attempts/1");
    assert_eq!(ext("1.3.6.1.4.1.57264.1.5").unwrap(), b"octo/app", "the deprecated extensions hold raw bytes");
    assert_eq!(utf8("1.3.6.1.4.1.57264.1.22").unwrap(), "public");
    assert!(ext("1.3.6.1.4.1.57264.1.23").is_none(), "no environment claim, no extension");
    assert_eq!(utf8("1.3.6.1.4.1.57264.1.24").unwrap(), sub, "the token's subject");

    // A token of this issuer without job_workflow_ref names the claim it lacks.
    let bare = idp.mint_claims(sub, json!({}), 300).unwrap();
    let r = post_json(&agent(), &url, &request(&k, &bare, sub)).unwrap();
    assert_eq!(r.status, 401, "{}", r.text());
    assert!(r.text().contains("job_workflow_ref"), "{}", r.text());
}

#[test]
fn refusals_are_counted_in_metrics_by_reason() {
    use signet_ca::oidc::dev::DevIssuer;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[]);
    let idp = DevIssuer::open(&dir.path().join("data"), &format!("{}/oidc", server.url)).unwrap();
    let url = format!("{}/api/v2/signingCert", server.url);
    let (agent, k) = (agent(), key());
    let email = "m@example.com";
    let mint = |extra: Value| idp.mint_claims(email, extra, 300).unwrap();
    let expired = mint(json!({"email": email, "email_verified": true, "exp": 1_000_000_000, "nbf": 999_999_000, "iat": 999_999_000}));
    let wrong_aud = mint(json!({"email": email, "email_verified": true, "aud": "not-sigstore"}));
    let unverified = mint(json!({"email": email, "email_verified": false}));
    for (token, want) in [(&expired, "expired"), (&wrong_aud, "audience"), (&unverified, "verified")] {
        let r = post_json(&agent, &url, &request(&k, token, email)).unwrap();
        assert_eq!(r.status, 401, "{}", r.text());
        assert!(r.text().contains(want), "{}", r.text());
    }
    let good = mint(json!({"email": email, "email_verified": true}));
    assert_eq!(post_json(&agent, &url, &request(&k, &good, "someone-else@example.com")).unwrap().status, 400);
    assert_eq!(post_json(&agent, &url, &request(&k, &good, email)).unwrap().status, 200);
    assert_eq!(post_raw(&agent, &url, "text/plain", b"x".to_vec()).unwrap().status, 415);

    let metrics = get(&agent, &format!("{}/metrics", server.url)).unwrap().text();
    for line in [
        "signet_refused_total{route=\"/api/v2/signingCert\",reason=\"token_expired\"} 1",
        "signet_refused_total{route=\"/api/v2/signingCert\",reason=\"token_wrong_audience\"} 1",
        "signet_refused_total{route=\"/api/v2/signingCert\",reason=\"token_email_not_verified\"} 1",
        "signet_refused_total{route=\"/api/v2/signingCert\",reason=\"proof_of_possession\"} 1",
        "signet_refused_total{route=\"/api/v2/signingCert\",reason=\"unsupported_media_type\"} 1",
        "signet_http_responses_total{route=\"/api/v2/signingCert\",status=\"401\"} 3",
        "signet_http_responses_total{route=\"/api/v2/signingCert\",status=\"200\"} 1",
    ] {
        assert!(metrics.lines().any(|l| l == line), "missing {line:?} in\n{metrics}");
    }
}
