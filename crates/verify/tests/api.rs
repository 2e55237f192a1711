//! The library API beyond the conformance vectors: policies, digests instead of artifacts,
//! one verifier reused across bundles, and hostile input that must fail without panicking.

use std::path::{Path, PathBuf};

use signet_core::pubkey::HashAlg;
use signet_verify::{Artifact, Bundle, Policy, Verifier, VerifyError};

const IDENTITY: &str = "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main";
const ISSUER: &str = "https://token.actions.githubusercontent.com";

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance")
}

fn read(rel: &str) -> Vec<u8> {
    std::fs::read(dir().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn production() -> Verifier {
    Verifier::new(&read("production-trusted_root.json")).unwrap()
}

fn identity(id: &str, issuer: &str) -> Policy {
    Policy::Identity { identity: id.into(), issuer: issuer.into() }
}

#[test]
fn one_verifier_many_bundles_and_what_it_reports() {
    let v = production();
    let artifact = read("bundle-verify/a.txt");
    for case in ["happy-path-v0.1", "happy-path-v0.2", "happy-path-v0.3", "happy-path-intoto-in-dsse-v3"] {
        let bundle = Bundle::from_json(&read(&format!("bundle-verify/{case}/bundle.sigstore.json"))).unwrap();
        let ok = v.verify(&bundle, Artifact::Bytes(&artifact), &identity(IDENTITY, ISSUER)).unwrap();
        assert_eq!(ok.identity.as_deref(), Some(IDENTITY), "{case}");
        assert_eq!(ok.issuer.as_deref(), Some(ISSUER), "{case}");
        assert_eq!(ok.times.len(), 1, "{case}: one SET-backed integrated time");
    }
}

#[test]
fn digests_stand_in_for_the_artifact() {
    let v = production();
    let digest = HashAlg::Sha256.digest(&read("bundle-verify/a.txt"));
    let policy = identity(IDENTITY, ISSUER);
    for case in ["happy-path-v0.3", "happy-path-intoto-in-dsse-v3"] {
        let bundle = read(&format!("bundle-verify/{case}/bundle.sigstore.json"));
        v.verify_json(&bundle, Artifact::Digest(HashAlg::Sha256, &digest), &policy).unwrap();
        let mut wrong = digest.clone();
        wrong[0] ^= 1;
        let e = v.verify_json(&bundle, Artifact::Digest(HashAlg::Sha256, &wrong), &policy).unwrap_err();
        assert!(matches!(e, VerifyError::Signature(_) | VerifyError::Dsse(_)), "{case}: {e}");
        let e = v.verify_json(&bundle, Artifact::Digest(HashAlg::Sha256, &digest[..31]), &policy).unwrap_err();
        assert!(matches!(e, VerifyError::Signature(_) | VerifyError::Dsse(_)), "{case}: {e}");
    }
}

#[test]
fn identity_issuer_and_key_policies_are_enforced() {
    let v = production();
    let bundle = read("bundle-verify/happy-path-v0.3/bundle.sigstore.json");
    let artifact = read("bundle-verify/a.txt");
    let e = v.verify_json(&bundle, Artifact::Bytes(&artifact), &identity("someone@example.com", ISSUER)).unwrap_err();
    assert!(e.to_string().starts_with("policy: certificate identity"), "{e}");
    let e = v.verify_json(&bundle, Artifact::Bytes(&artifact), &identity(IDENTITY, "https://accounts.google.com")).unwrap_err();
    assert!(e.to_string().starts_with("policy: certificate OIDC issuer"), "{e}");
    let key = Policy::key_from_pem(&read("bundle-verify/managed-key-happy-path/key.pub")).unwrap();
    let e = v.verify_json(&bundle, Artifact::Bytes(&artifact), &key).unwrap_err();
    assert!(e.to_string().contains("bundle is signed with a certificate"), "{e}");
    assert!(matches!(Policy::key_from_pem(b"not a key"), Err(VerifyError::Policy(_))));
}

#[test]
fn rekor_v2_entries_are_dated_by_their_timestamp() {
    let case = dir().join("bundle-verify/rekor2-happy-path");
    let v = Verifier::new(&std::fs::read(case.join("trusted_root.json")).unwrap()).unwrap();
    let ok = v
        .verify_json(
            &std::fs::read(case.join("bundle.sigstore.json")).unwrap(),
            Artifact::Bytes(&read("bundle-verify/a.txt")),
            &identity(IDENTITY, ISSUER),
        )
        .unwrap();
    assert_eq!(ok.times.len(), 1);
    assert_eq!(ok.times[0].source, signet_verify::time::TimeSource::Rfc3161);
    assert_eq!(ok.times[0].unix, 1749729740); // 2025-06-12T12:02:20Z, the TSA's genTime
}

#[test]
fn hostile_input_is_an_error_never_a_panic() {
    let v = production();
    let artifact = read("bundle-verify/a.txt");
    let policy = identity(IDENTITY, ISSUER);
    let bundle = read("bundle-verify/happy-path-v0.3/bundle.sigstore.json");
    // Every truncation is rejected.
    for cut in (0..bundle.len()).step_by(97) {
        let r = std::panic::catch_unwind(|| v.verify_json(&bundle[..cut], Artifact::Bytes(&artifact), &policy));
        assert!(matches!(r, Ok(Err(VerifyError::Bundle(_)))), "truncated at {cut}: {r:?}");
    }
    // Changing one letter or digit anywhere (field names, numbers, base64 of the signature,
    // certificate, body, proof, checkpoint) never panics and is never accepted: nothing in a
    // v0.3 certificate bundle is unauthenticated, except the optional messageDigest hint.
    let text = String::from_utf8(bundle.clone()).unwrap();
    let mut accepted = Vec::new();
    let mut tried = 0;
    for (i, c) in text.char_indices().step_by(7) {
        if !c.is_ascii_alphanumeric() {
            continue;
        }
        let mut mutated = text.clone().into_bytes();
        mutated[i] = if c == 'A' { b'B' } else { b'A' };
        let r = std::panic::catch_unwind(|| v.verify_json(&mutated, Artifact::Bytes(&artifact), &policy));
        tried += 1;
        // Renaming the `messageDigest` key drops an optional, unauthenticated hint: fine.
        let hint_dropped = !mutated.windows(15).any(|w| w == b"\"messageDigest\"");
        if r.unwrap_or_else(|_| panic!("panicked with byte {i} changed")).is_ok() && !hint_dropped {
            accepted.push(format!("byte {i}: …{}…", &text[i.saturating_sub(20)..(i + 20).min(text.len())]));
        }
    }
    assert!(tried > 500, "only {tried} mutations tried");
    assert!(accepted.is_empty(), "mutated bundles verified:\n{}", accepted.join("\n"));
    for junk in [&b""[..], b"{}", b"[]", b"null", b"{\"mediaType\": 1}", &[0xff, 0xfe, 0x00]] {
        assert!(matches!(v.verify_json(junk, Artifact::Bytes(&artifact), &policy), Err(VerifyError::Bundle(_))));
        assert!(matches!(Verifier::new(junk), Err(VerifyError::TrustedRoot(_))));
    }
}
