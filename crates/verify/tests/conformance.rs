//! The sigstore-conformance verification vectors (../shared/conformance/bundle-verify): every
//! case must verify, or be rejected for the reason its README gives. One test runs them all
//! and names every case that went wrong.

use std::path::{Path, PathBuf};

use signet_verify::{Artifact, Policy, Verifier, VerifyError};

const DEFAULT_IDENTITY: &str = "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main";
const DEFAULT_ISSUER: &str = "https://token.actions.githubusercontent.com";

/// Each `_fail` case and a substring its error must contain: the check its README names.
const EXPECTED_FAILURES: &[(&str, &str)] = &[
    ("bundle-empty-certificate-chain_fail", "bundle: x509CertificateChain has no certificates"),
    ("bundle-from-wrong-instance_fail", "is not a transparency log in the trusted root"),
    ("bundle-invalid-base64-signature_fail", "bundle: messageSignature.signature is not valid base64"),
    ("bundle-malformed-json_fail", "bundle: not a valid bundle JSON document"),
    ("bundle-negative-log-index_fail", "bundle: tlogEntries.logIndex is negative"),
    ("bundle-unknown-version_fail", "bundle: unsupported mediaType"),
    ("bundle-with-root-cert_fail", "certificate chain: the bundle's chain includes the root certificate"),
    ("checkpoint-bad-keyhint_fail", "checkpoint: no signature line by the log's key"),
    ("checkpoint-wrong-roothash_fail", "inclusion proof: the proof's tree (size 23083062) and root hash do not match the checkpoint"),
    ("dsse-invalid-sig_fail", "DSSE envelope: signature over the envelope (PAE) does not verify"),
    ("dsse-mismatch-envelope_fail", "tlog entry does not match the bundle: the entry's payload hash differs"),
    ("dsse-mismatch-sig_fail", "tlog entry does not match the bundle: the entry's signature differs"),
    ("inclusion-proof-corrupted-hash_fail", "inclusion proof: computed root does not match the checkpoint root"),
    ("incorrect-public-key_fail", "tlog entry does not match the bundle: the entry's certificate / public key differs"),
    ("integrated-time-in-future_fail", "certificate chain: the signing certificate is not valid at the log's integrated time"),
    ("intoto-expired-certificate_fail", "certificate chain: the signing certificate is not valid at the log's integrated time 2023-02-01T00:00:00Z (valid 2030-01-01"),
    ("intoto-log-entry-mismatch_fail", "tlog entry does not match the bundle: the entry's signature differs from the envelope's"),
    ("intoto-missing-inclusion-proof_fail", "bundle: tlogEntries[0] has no inclusionProof"),
    ("intoto-set-outside-signing-cert-validity_fail", "certificate chain: the signing certificate is not valid at the log's integrated time"),
    ("intoto-tsa-timestamp-outside-cert-validity_fail", "certificate chain: the signing certificate is not valid at the RFC 3161 timestamp"),
    ("invalid-checkpoint-signature_fail", "checkpoint: the log's signature on the checkpoint does not verify"),
    ("invalid-ct-key_fail", "SCT: no embedded SCT verifies"),
    ("invalid-inclusion-proof_fail", "inclusion proof: computed root does not match the proof's root hash"),
    ("managed-key-no-key_fail", "policy: the bundle is signed with a managed key, but no key was given"),
    ("managed-key-wrong-key_fail", "policy: the given public key is not a valid public key"),
    ("message-digest-mismatch_fail", "artifact signature: the artifact's SHA-256 digest does not match the bundle's messageDigest"),
    ("rekor2-checkpoint-missing-log-signature_fail", "checkpoint: checkpoint note is malformed"),
    ("rekor2-checkpoint-missing-origin_fail", "checkpoint: checkpoint note is malformed"),
    ("rekor2-checkpoint-missing-root-hash_fail", "checkpoint: checkpoint note is malformed"),
    ("rekor2-checkpoint-missing-size_fail", "checkpoint: checkpoint note is malformed"),
    ("rekor2-checkpoint-no-matching-signature_fail", "checkpoint: no signature line by the log's key"),
    ("rekor2-dsse-invalid-sig_fail", "DSSE envelope: signature over the envelope (PAE) does not verify"),
    ("rekor2-dsse-mismatch-envelope_fail", "tlog entry does not match the bundle: the entry's digest of the envelope (PAE) differs"),
    ("rekor2-dsse-mismatch-sig_fail", "tlog entry does not match the bundle: the entry's signature differs"),
    ("rekor2-no-inclusion-proof_fail", "bundle: tlogEntries[0] has no inclusionProof"),
    ("rekor2-no-timestamp_fail", "signing time: the log entry has no SET-backed integrated time (Rekor v2), so an RFC 3161 timestamp is required"),
    ("rekor2-timestamp-outside-trust-root-tsa-validity_fail", "timestamp: time 2025-06-12T12:02:20Z is outside the trusted root's validity for TSA"),
    ("rekor2-timestamp-outside-tsa-cert-validity_fail", "is outside the validity of TSA certificate"),
    ("rekor2-timestamp-payload-mismatch_fail", "timestamp: the message imprint does not match the hash of the bundle's signature"),
    ("rekor2-timestamp-untrusted-tsa-with-embedded-cert_fail", "timestamp: not signed by any timestamp authority in the trusted root"),
    ("rekor2-timestamp-untrusted-tsa-without-embedded-cert_fail", "timestamp: not signed by any timestamp authority in the trusted root"),
    ("rekor2-timestamp-with-incorrect-time_fail", "certificate chain: the signing certificate is not valid at the RFC 3161 timestamp"),
    ("set-invalid-signature_fail", "signed entry timestamp: signature does not verify"),
    ("signature-mismatch_fail", "artifact signature: signature over the artifact does not verify"),
    ("trust-root-tlog-missing-validity-start_fail", "trusted root: tlogs[1] (https://log2025-alpha1.rekor.sigstage.dev).publicKey: validFor has no start"),
    ("wrong-hashedrekord-artifact_fail", "tlog entry does not match the bundle: the entry's artifact digest differs"),
    ("wrong-hashedrekord-cert-and-sig_fail", "tlog entry does not match the bundle: the entry's signature differs"),
    ("wrong-hashedrekord-entry_fail", "tlog entry does not match the bundle: the entry's artifact digest differs"),
    ("wrong-material_fail", "artifact signature: the artifact's SHA-256 digest does not match the bundle's messageDigest"),
];

fn conformance_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance")
}

fn read_trimmed(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

/// Runs one case the way the conformance harness drives `verify-bundle`.
fn run_case(root_dir: &Path, case: &Path) -> Result<(), VerifyError> {
    let trusted_root = if case.join("trusted_root.json").exists() {
        case.join("trusted_root.json")
    } else {
        root_dir.join("production-trusted_root.json")
    };
    let verifier = Verifier::new(&std::fs::read(&trusted_root).expect("read trusted root"))?;
    let artifact_path = if case.join("artifact").exists() { case.join("artifact") } else { root_dir.join("bundle-verify/a.txt") };
    let artifact = std::fs::read(&artifact_path).expect("read artifact");
    let policy = if case.join("key.pub").exists() {
        Policy::key_from_pem(&std::fs::read(case.join("key.pub")).expect("read key.pub"))?
    } else {
        Policy::Identity {
            identity: read_trimmed(&case.join("identity")).unwrap_or_else(|| DEFAULT_IDENTITY.into()),
            issuer: read_trimmed(&case.join("issuer")).unwrap_or_else(|| DEFAULT_ISSUER.into()),
        }
    };
    let bundle = std::fs::read(case.join("bundle.sigstore.json")).expect("read bundle");
    verifier.verify_json(&bundle, Artifact::Bytes(&artifact), &policy).map(|_| ())
}

#[test]
fn all_conformance_cases() {
    let dir = conformance_dir();
    let cases_dir = dir.join("bundle-verify");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&cases_dir)
        .unwrap_or_else(|e| panic!("conformance vectors not found at {}: {e}", cases_dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    assert_eq!(cases.len(), 70, "expected the 70 conformance cases");

    let mut failures = Vec::new();
    let (mut passed, mut rejected) = (0, 0);
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        let result = std::panic::catch_unwind(|| run_case(&dir, case));
        // Shown with --nocapture: the outcome of every case.
        match &result {
            Ok(Ok(())) => println!("{name}: verified"),
            Ok(Err(e)) => println!("{name}: rejected: {e}"),
            Err(_) => println!("{name}: panicked"),
        }
        match (name.ends_with("_fail"), result) {
            (_, Err(_)) => failures.push(format!("{name}: PANICKED")),
            (false, Ok(Ok(()))) => passed += 1,
            (false, Ok(Err(e))) => failures.push(format!("{name}: should verify, but: {e}")),
            (true, Ok(Ok(()))) => failures.push(format!("{name}: should be rejected, but verified")),
            (true, Ok(Err(e))) => {
                let msg = e.to_string();
                match EXPECTED_FAILURES.iter().find(|(n, _)| *n == name) {
                    None => failures.push(format!("{name}: no expected reason in the table (got: {msg})")),
                    Some((_, want)) if !msg.contains(want) => {
                        failures.push(format!("{name}: rejected for the wrong reason: {msg}\n    expected: {want}"))
                    }
                    Some(_) => rejected += 1,
                }
            }
        }
    }
    assert_eq!(EXPECTED_FAILURES.len(), 49, "one expected reason per _fail case");
    assert!(
        failures.is_empty(),
        "{} of {} conformance cases went wrong ({passed} verified, {rejected} rejected as expected):\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    assert_eq!((passed, rejected), (21, 49));
}
