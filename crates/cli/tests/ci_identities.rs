//! Identities beyond email (issue 42): each of Fulcio's issuer types against a real
//! `signet serve`, with tokens shaped like each provider's own (claims from its public
//! docs), signed by a key of an issuer that signet reads from a JWKS file or discovers over
//! TLS. Each certificate's SAN and extensions are checked against what Fulcio's templates
//! give for the same claims.

use crate::common;

use std::path::{Path, PathBuf};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
use common::*;
use der::asn1::Utf8StringRef;
use der::Decode;
use serde_json::{json, Value};
use signet_ca::oidc::dev::DevIssuer;
use signet_core::{b64, pem};
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::SubjectAltName;

/// An issuer's signing key, and the JWKS file signet reads it from.
struct Idp {
    keys: DevIssuer,
    jwks: PathBuf,
}

fn idp(dir: &Path, name: &str, url: &str) -> Idp {
    let keys = DevIssuer::open(&dir.join(name), url).unwrap();
    let jwks = dir.join(format!("{name}-jwks.json"));
    std::fs::write(&jwks, keys.jwks().to_string()).unwrap();
    Idp { keys, jwks }
}

/// A certificate for a token whose challenge claim is `sub`; the reply if it was refused.
fn certificate(server: &Server, token: &str, challenge: &str) -> Result<x509_cert::Certificate, Reply> {
    certificate_and_key(server, token, challenge).map(|(cert, _)| cert)
}

fn certificate_and_key(server: &Server, token: &str, challenge: &str) -> Result<(x509_cert::Certificate, EcdsaKeyPair), Reply> {
    let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).unwrap();
    let spki = aws_lc_rs::encoding::AsDer::as_der(pair.public_key()).unwrap();
    let pop = pair.sign(&SystemRandom::new(), challenge.as_bytes()).unwrap();
    let body = json!({"credentials": {"oidcIdentityToken": token},
        "publicKeyRequest": {"publicKey": {"algorithm": "ECDSA", "content": pem::encode("PUBLIC KEY", spki.as_ref())},
                             "proofOfPossession": b64::encode(pop.as_ref())}});
    let r = post_json(&agent(), &format!("{}/api/v2/signingCert", server.url), &body).unwrap();
    if r.status != 200 {
        return Err(r);
    }
    let leaf = r.json()["signedCertificateEmbeddedSct"]["chain"]["certificates"][0].as_str().unwrap().to_string();
    Ok((x509_cert::Certificate::from_der(&pem::decode_first(leaf.as_bytes()).unwrap().der).unwrap(), pair))
}

fn issue(server: &Server, idp: &Idp, sub: &str, claims: Value) -> x509_cert::Certificate {
    let token = idp.keys.mint_claims(sub, claims, 300).unwrap();
    certificate(server, &token, sub).unwrap_or_else(|r| panic!("{sub}: {} {}", r.status, r.text()))
}

fn refused(server: &Server, idp: &Idp, sub: &str, claims: Value) -> Reply {
    let token = idp.keys.mint_claims(sub, claims, 300).unwrap();
    match certificate(server, &token, sub) {
        Ok(_) => panic!("{sub}: a certificate was issued"),
        Err(r) => r,
    }
}

fn extension(cert: &x509_cert::Certificate, arc: &str) -> Option<Vec<u8>> {
    let oid = der::asn1::ObjectIdentifier::new_unwrap(arc);
    cert.tbs_certificate.extensions.as_ref()?.iter().find(|e| e.extn_id == oid).map(|e| e.extn_value.as_bytes().to_vec())
}

/// A UTF8String extension's text.
fn utf8(cert: &x509_cert::Certificate, arc: &str) -> Option<String> {
    extension(cert, arc).map(|v| Utf8StringRef::from_der(&v).unwrap().as_str().to_string())
}

fn san(cert: &x509_cert::Certificate) -> GeneralName {
    let names = SubjectAltName::from_der(&extension(cert, "2.5.29.17").unwrap()).unwrap().0;
    assert_eq!(names.len(), 1, "one name");
    names.into_iter().next().unwrap()
}

fn uri(cert: &x509_cert::Certificate) -> String {
    match san(cert) {
        GeneralName::UniformResourceIdentifier(u) => u.to_string(),
        other => panic!("not a URI SAN: {other:?}"),
    }
}

const PREFIX: &str = "1.3.6.1.4.1.57264.1.";

#[test]
fn each_issuer_type_gets_the_certificate_fulcio_would_issue() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let gitlab = idp(d, "gitlab", "https://gitlab.example.com");
    let buildkite = idp(d, "buildkite", "https://agent.buildkite.com");
    let circle = idp(d, "circleci", "https://oidc.circleci.com/org/0c5e2a13-8f1d-4f2b-9d42-5d0e5a1b7c11");
    let eks = idp(d, "eks", "https://oidc.eks.eu-west-1.amazonaws.com/id/B2E4C1A8D0F35E7A");
    let ghes = idp(d, "ghes", "https://ghes.example.com/_services/token");
    let uris = idp(d, "uri", "https://accounts.example.com");
    let users = idp(d, "username", "https://login.example.com");
    let spire = idp(d, "spiffe", "https://spire.example.org");
    let config = d.join("signet.toml");
    let entry = |url: &str, rest: &str, idp: &Idp| format!("[[oidc.issuers]]\nurl = \"{url}\"\n{rest}\njwks_file = \"{}\"\n\n", idp.jwks.display());
    let toml = [
        entry("https://gitlab.example.com", "subject = \"gitlab-pipeline\"", &gitlab),
        entry("https://agent.buildkite.com", "type = \"ci-provider\"\nci_provider = \"buildkite-job\"", &buildkite),
        entry("https://oidc.circleci.com/org/*", "type = \"ci-provider\"\nci_provider = \"circleci-job\"", &circle),
        entry("https://oidc.eks.*.amazonaws.com/id/*", "type = \"kubernetes\"", &eks),
        entry("https://ghes.example.com/_services/token", "type = \"github-workflow\"", &ghes),
        entry("https://accounts.example.com", "type = \"uri\"\nsubject_domain = \"https://ci.example.com\"", &uris),
        entry("https://login.example.com", "type = \"username\"\nsubject_domain = \"example.com\"", &users),
        entry("https://spire.example.org", "type = \"spiffe\"\ntrust_domain = \"example.org\"", &spire),
    ]
    .concat();
    std::fs::write(&config, toml).unwrap();
    let server = Server::start(&d.join("data"), &["--config", config.to_str().unwrap()]);

    // GitLab, self-managed: its ID token (docs.gitlab.com, "OpenID Connect (OIDC) authentication").
    let sub = "project_path:my-group/my-project:ref_type:branch:ref:main";
    let gl = issue(&server, &gitlab, sub, json!({
        "namespace_id": "72", "namespace_path": "my-group", "project_id": "20", "project_path": "my-group/my-project",
        "user_id": "1", "user_login": "sample-user", "pipeline_id": "574", "pipeline_source": "push", "job_id": "302",
        "ref": "main", "ref_type": "branch", "ref_path": "refs/heads/main", "ref_protected": "true", "environment": "production",
        "runner_id": 1, "runner_environment": "gitlab-hosted", "sha": "714a629c0b401fdce83e847fc9589983fc6f46bc",
        "project_visibility": "internal", "ci_config_ref_uri": "gitlab.example.com/my-group/my-project//.gitlab-ci.yml@refs/heads/main",
        "ci_config_sha": "714a629c0b401fdce83e847fc9589983fc6f46bc",
    }));
    assert_eq!(uri(&gl), "https://gitlab.example.com/my-group/my-project//.gitlab-ci.yml@refs/heads/main");
    for (arc, want) in [
        ("8", "https://gitlab.example.com"),
        ("11", "gitlab-hosted"),
        ("12", "https://gitlab.example.com/my-group/my-project"),
        ("14", "refs/heads/main"),
        ("15", "20"),
        ("16", "https://gitlab.example.com/my-group"),
        ("20", "push"),
        ("21", "https://gitlab.example.com/my-group/my-project/-/jobs/302"),
        ("22", "internal"),
        ("23", "production"),
        ("24", sub),
    ] {
        assert_eq!(utf8(&gl, &format!("{PREFIX}{arc}")).as_deref(), Some(want), "GitLab 1.{arc}");
    }
    assert!(extension(&gl, &format!("{PREFIX}5")).is_none(), "GitHub's deprecated fields are GitHub's only");
    // A claim a template needs is named when missing.
    let r = refused(&server, &gitlab, sub, json!({"ci_config_ref_uri": "gitlab.example.com/a//.gitlab-ci.yml@refs/heads/main"}));
    assert_eq!(r.status, 401, "{}", r.text());
    assert!(r.text().contains("gitlab-pipeline") && r.text().contains("ci_config_sha"), "{}", r.text());

    // Buildkite (buildkite.com/docs, "OIDC with Buildkite"): numbers in claims print as integers.
    let bk = issue(&server, &buildkite, "organization:acme:pipeline:release:ref:refs/heads/main:commit:c0ffee:step:build", json!({
        "organization_slug": "acme", "pipeline_slug": "release", "build_number": 1234, "build_branch": "main",
        "build_commit": "c0ffee", "step_key": "build", "job_id": "0184990a-477b-4fa8-9968-496074483cee", "agent_id": "0184990a-4782",
        "build_source": "webhook", "runner_environment": "buildkite-hosted",
    }));
    assert_eq!(uri(&bk), "https://buildkite.com/acme/release");
    assert_eq!(utf8(&bk, &format!("{PREFIX}21")).unwrap(), "https://buildkite.com/acme/release/builds/1234#0184990a-477b-4fa8-9968-496074483cee");
    assert_eq!(utf8(&bk, &format!("{PREFIX}13")).unwrap(), "c0ffee");

    // CircleCI, through a meta-issuer (one organisation's issuer URL).
    let cc = issue(&server, &circle, "org/0c5e2a13/project/p-1/user/u-2", json!({
        "oidc.circleci.com/project-id": "p-1", "oidc.circleci.com/pipeline-definition-id": "d-2", "oidc.circleci.com/pipeline-id": "pl-3",
        "oidc.circleci.com/workflow-id": "w-4", "oidc.circleci.com/job-id": "j-5", "oidc.circleci.com/ssh-rerun": true,
        "oidc.circleci.com/vcs-ref": "refs/heads/main", "oidc.circleci.com/vcs-origin": "github.com/acme/app",
        "oidc.circleci.com/context-ids": ["c-1"],
    }));
    assert_eq!(uri(&cc), "https://circleci.com/api/v2/projects/p-1/pipeline-definitions/d-2");
    assert_eq!(utf8(&cc, &format!("{PREFIX}11")).unwrap(), "ssh-rerun");
    assert_eq!(utf8(&cc, &format!("{PREFIX}8")).unwrap(), "https://oidc.circleci.com/org/0c5e2a13-8f1d-4f2b-9d42-5d0e5a1b7c11");

    // A Kubernetes projected service-account token from an EKS cluster, through a meta-issuer.
    let k8s_sub = "system:serviceaccount:build:signer";
    let k8s = issue(&server, &eks, k8s_sub, json!({
        "kubernetes.io": {"namespace": "build", "pod": {"name": "signer-7c9", "uid": "9a1"}, "serviceaccount": {"name": "signer", "uid": "4f2"}},
    }));
    assert_eq!(uri(&k8s), "https://kubernetes.io/namespaces/build/serviceaccounts/signer");
    assert_eq!(utf8(&k8s, &format!("{PREFIX}24")).unwrap(), k8s_sub);
    // The same key under a URL the pattern does not match: another host, not the pattern's.
    let elsewhere = DevIssuer::open(&d.join("eks"), "https://oidc.eks.eu-west-1.amazonaws.com.evil.example/id/X").unwrap();
    let token = elsewhere.mint_claims(k8s_sub, json!({}), 300).unwrap();
    let r = certificate(&server, &token, k8s_sub).unwrap_err();
    assert_eq!(r.status, 401, "{}", r.text());
    assert!(r.text().contains("not a configured OIDC issuer"), "{}", r.text());

    // GitHub Enterprise Server: the URIs are on the server's own host.
    let workflow = "octo/app/.github/workflows/release.yml@refs/tags/v1";
    let gh = issue(&server, &ghes, "repo:octo/app:environment:prod", json!({
        "job_workflow_ref": workflow, "job_workflow_sha": "a1", "repository": "octo/app", "repository_id": "42",
        "repository_owner": "octo", "repository_owner_id": "7", "sha": "b2", "ref": "refs/tags/v1", "event_name": "push",
        "workflow": "release", "workflow_ref": workflow, "workflow_sha": "c3", "run_id": "99", "run_attempt": "1",
        "runner_environment": "self-hosted", "repository_visibility": "internal", "environment": "prod", "enterprise": "octo-corp",
    }));
    assert_eq!(uri(&gh), format!("https://ghes.example.com/{workflow}"));
    assert_eq!(utf8(&gh, &format!("{PREFIX}21")).unwrap(), "https://ghes.example.com/octo/app/actions/runs/99/attempts/1");
    assert_eq!(utf8(&gh, &format!("{PREFIX}23")).unwrap(), "prod");
    assert_eq!(extension(&gh, &format!("{PREFIX}5")).unwrap(), b"octo/app", "the deprecated fields hold raw bytes");

    // uri: only subjects on the bound domain.
    let u = issue(&server, &uris, "https://ci.example.com/jobs/17", json!({}));
    assert_eq!(uri(&u), "https://ci.example.com/jobs/17");
    let r = refused(&server, &uris, "https://ci.evil.example/jobs/17", json!({}));
    assert_eq!(r.status, 401, "{}", r.text());
    assert!(r.text().contains("https://ci.example.com"), "{}", r.text());

    // username: an otherName SAN, `user!domain`, by which the Rekor v1 log finds what it signs.
    let token = users.keys.mint_claims("alice", json!({}), 300).unwrap();
    let (un, pair) = certificate_and_key(&server, &token, "alice").unwrap_or_else(|r| panic!("{} {}", r.status, r.text()));
    let artifact = b"signed by a user name\n";
    let sig = pair.sign(&SystemRandom::new(), artifact).unwrap();
    let cert_pem = pem::encode("CERTIFICATE", &der::Encode::to_der(&un).unwrap());
    let entry = json!({"kind": "hashedrekord", "apiVersion": "0.0.1", "spec": {
        "data": {"hash": {"algorithm": "sha256", "value": hex::encode(signet_core::hash::sha256(artifact))}},
        "signature": {"content": b64::encode(sig.as_ref()), "publicKey": {"content": b64::encode(cert_pem.as_bytes())}}}});
    let logged = post_json(&agent(), &format!("{}/api/v1/log/entries", server.url), &entry).unwrap();
    assert_eq!(logged.status, 201, "{}", logged.text());
    let found = post_json(&agent(), &format!("{}/api/v1/index/retrieve", server.url), &json!({"subject": "alice!example.com"})).unwrap();
    assert_eq!(found.status, 200, "{}", found.text());
    assert_eq!(found.json().as_array().map(Vec::len), Some(1), "{}", found.text());
    match san(&un) {
        GeneralName::OtherName(other) => {
            assert_eq!(other.type_id.to_string(), "1.3.6.1.4.1.57264.1.7");
            assert_eq!(other.value.decode_as::<Utf8StringRef>().unwrap().as_str(), "alice!example.com");
        }
        name => panic!("not an otherName: {name:?}"),
    }

    // spiffe: only the bound trust domain.
    assert_eq!(uri(&issue(&server, &spire, "spiffe://example.org/ns/ci/sa/signer", json!({}))), "spiffe://example.org/ns/ci/sa/signer");
    let r = refused(&server, &spire, "spiffe://other.org/ns/ci/sa/signer", json!({}));
    assert!(r.status == 401 && r.text().contains("example.org"), "{}", r.text());

    // The configuration names each issuer as Fulcio's does.
    let config = get(&agent(), &format!("{}/api/v2/configuration", server.url)).unwrap().json();
    let issuers = config["issuers"].as_array().unwrap();
    let find = |key: &str, url: &str| issuers.iter().find(|i| i[key] == url).unwrap_or_else(|| panic!("{url} in {config}")).clone();
    assert_eq!(find("wildcardIssuerUrl", "https://oidc.eks.*.amazonaws.com/id/*")["issuerType"], "kubernetes");
    assert_eq!(find("issuerUrl", "https://accounts.example.com")["subjectDomain"], "https://ci.example.com");
    assert_eq!(find("issuerUrl", "https://spire.example.org")["spiffeTrustDomain"], "example.org");
    assert_eq!(find("issuerUrl", "https://gitlab.example.com")["challengeClaim"], "sub");
}

#[test]
fn a_fulcio_config_file_is_read_as_it_is() {
    use signet_tls::testing::{TestPki, TestServer};
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    // A cluster's issuer, discovered over TLS with a private CA given inline, as Fulcio's
    // CACert field carries it.
    let issuer = TestServer::https(&pki);
    let keys = DevIssuer::open(&dir.path().join("k8s"), &issuer.url).unwrap();
    issuer.set("/.well-known/openid-configuration", 200, keys.discovery().to_string());
    issuer.set("/jwks", 200, keys.jwks().to_string());
    let fulcio = json!({
        "OIDCIssuers": {},
        "MetaIssuers": {"https://127.0.0.1:*": {"ClientID": "sigstore", "Type": "kubernetes", "CACert": pki.ca_pem, "Description": "test clusters"}},
    });
    let fulcio_path = dir.path().join("fulcio-config.json");
    std::fs::write(&fulcio_path, fulcio.to_string()).unwrap();
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, format!("[oidc]\nfulcio_config = \"{}\"\n", fulcio_path.display())).unwrap();
    let server = Server::start(&dir.path().join("data"), &["--config", config.to_str().unwrap()]);
    let sub = "system:serviceaccount:default:builder";
    let token = keys.mint_claims(sub, json!({"kubernetes.io": {"namespace": "default", "serviceaccount": {"name": "builder"}}}), 300).unwrap();
    let cert = certificate(&server, &token, sub).unwrap_or_else(|r| panic!("{} {}", r.status, r.text()));
    assert_eq!(uri(&cert), "https://kubernetes.io/namespaces/default/serviceaccounts/builder");
    assert_eq!(utf8(&cert, &format!("{PREFIX}8")).unwrap(), issuer.url);
}

#[test]
fn an_issuer_that_could_vouch_for_anyone_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, r#"{"keys": []}"#).unwrap();
    for (entry, why) in [
        ("type = \"uri\"", "subject_domain"),
        ("type = \"uri\"\nsubject_domain = \"https://ci.example.org\"", "second-level"),
        ("type = \"spiffe\"", "trust_domain"),
        ("type = \"ci-provider\"\nci_provider = \"jenkins\"", "jenkins"),
        ("type = \"ci-provider\"", "ci_provider"),
        ("type = \"email\"\nci_defaults = { url = \"x\" }", "ci_defaults"),
    ] {
        let config = dir.path().join("signet.toml");
        std::fs::write(&config, format!("[[oidc.issuers]]\nurl = \"https://accounts.example.com\"\n{entry}\njwks_file = \"{}\"\n", jwks.display())).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_signet")).args(["config", "check", "--dev", "--config", config.to_str().unwrap()]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{entry}: {stderr}");
        assert!(stderr.contains("https://accounts.example.com") && stderr.contains(why), "{entry}: {stderr}");
    }
}
