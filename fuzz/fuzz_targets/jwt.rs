//! OIDC identity tokens: header, payload and signature parsing before any key is trusted.
#![no_main]
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use signet_ca::oidc::dev::DevIssuer;
use signet_ca::oidc::TokenVerifier;

fn verifier() -> &'static (TokenVerifier, tempfile::TempDir) {
    static V: OnceLock<(TokenVerifier, tempfile::TempDir)> = OnceLock::new();
    V.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let issuer = Arc::new(DevIssuer::open(dir.path(), "http://127.0.0.1:1/oidc").expect("dev issuer"));
        (TokenVerifier::new([issuer.config()]), dir)
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(token) = std::str::from_utf8(data) else { return };
    let _ = verifier().0.verify(token);
});
