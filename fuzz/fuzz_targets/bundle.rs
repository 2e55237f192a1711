//! Sigstore bundles through the offline verifier, against the conformance suite's trusted
//! root: every check must fail cleanly on bad input.
#![no_main]
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use signet_verify::{Artifact, Policy, Verifier};

const ROOT: &[u8] = include_bytes!("../data/trusted_root.json");
const ARTIFACT: &[u8] = include_bytes!("../data/a.txt");

fn verifier() -> &'static Verifier {
    static V: OnceLock<Verifier> = OnceLock::new();
    V.get_or_init(|| Verifier::new(ROOT).expect("the conformance trusted root parses"))
}

fuzz_target!(|data: &[u8]| {
    // The conformance suite's default identity and artifact, so that a near-valid bundle
    // reaches the deepest checks.
    let policy = Policy::Identity {
        identity: "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main".into(),
        issuer: "https://token.actions.githubusercontent.com".into(),
    };
    let _ = verifier().verify_json(data, Artifact::Bytes(ARTIFACT), &policy);
});
