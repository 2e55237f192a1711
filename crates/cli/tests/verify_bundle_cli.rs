//! `signet verify-bundle` on sigstore-conformance vectors: exit codes (0 verified, 1 failed,
//! 2 usage/config) and a stderr line that names the failed check.

use std::path::PathBuf;
use std::process::{Command, Output};

const IDENTITY: &str = "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main";
const ISSUER: &str = "https://token.actions.githubusercontent.com";
/// SHA-256 of bundle-verify/a.txt.
const A_TXT_SHA256: &str = "sha256:a0cfc71271d6e278e57cd332ff957c3f7043fdda354c4cbb190a30d56efa01bf";

fn conformance() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance")
}

fn case(name: &str) -> PathBuf {
    conformance().join("bundle-verify").join(name)
}

fn production_root() -> String {
    conformance().join("production-trusted_root.json").display().to_string()
}

fn a_txt() -> String {
    conformance().join("bundle-verify/a.txt").display().to_string()
}

fn signet(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_signet")).arg("verify-bundle").args(args).output().expect("run signet")
}

fn identity_args<'a>(bundle: &'a str, root: &'a str, artifact: &'a str) -> Vec<&'a str> {
    vec![
        "--bundle",
        bundle,
        "--certificate-identity",
        IDENTITY,
        "--certificate-oidc-issuer",
        ISSUER,
        "--trusted-root",
        root,
        artifact,
    ]
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

#[test]
fn verifies_a_certificate_bundle_by_file_and_by_digest() {
    let bundle = case("happy-path-v0.3").join("bundle.sigstore.json").display().to_string();
    let root = production_root();
    for artifact in [a_txt(), A_TXT_SHA256.to_string()] {
        let out = signet(&identity_args(&bundle, &root, &artifact));
        assert_eq!(out.status.code(), Some(0), "{artifact}: {}", stderr(&out));
    }
}

#[test]
fn verifies_a_managed_key_bundle() {
    let dir = case("managed-key-happy-path");
    let (bundle, key) = (dir.join("bundle.sigstore.json").display().to_string(), dir.join("key.pub").display().to_string());
    let out = signet(&["--bundle", &bundle, "--key", &key, "--trusted-root", &production_root(), &a_txt()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn rejects_a_corrupted_inclusion_proof_naming_the_check() {
    let bundle = case("inclusion-proof-corrupted-hash_fail").join("bundle.sigstore.json").display().to_string();
    let out = signet(&identity_args(&bundle, &production_root(), &a_txt()));
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("inclusion proof: computed root does not match the checkpoint root"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
}

#[test]
fn rejects_a_rekor_v2_entry_without_a_timestamp() {
    let dir = case("rekor2-no-timestamp_fail");
    let bundle = dir.join("bundle.sigstore.json").display().to_string();
    let root = dir.join("trusted_root.json").display().to_string();
    let out = signet(&identity_args(&bundle, &root, &a_txt()));
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("RFC 3161 timestamp is required"), "{}", stderr(&out));
}

#[test]
fn usage_and_config_errors_exit_2() {
    let bundle = case("happy-path-v0.3").join("bundle.sigstore.json").display().to_string();
    // No --trusted-root: signet does not fetch TUF.
    let out = signet(&["--bundle", &bundle, "--certificate-identity", IDENTITY, "--certificate-oidc-issuer", ISSUER, &a_txt()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--trusted-root is required"), "{}", stderr(&out));
    // An unreadable trusted root.
    let out = signet(&identity_args(&bundle, "/nonexistent/trusted_root.json", &a_txt()));
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot read trusted root"), "{}", stderr(&out));
    // Neither an identity nor a key.
    let out = signet(&["--bundle", &bundle, "--trusted-root", &production_root(), &a_txt()]);
    assert_eq!(out.status.code(), Some(2));
}
