//! `certificateSigningRequest` on `POST /api/v2/signingCert`: PEM, DER, self-signature.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = signet_ca::issue::verify_csr(text);
    }
    // The DER alone, armoured, so the fuzzer reaches the ASN.1 without learning base64.
    let _ = signet_ca::issue::verify_csr(&signet_core::pem::encode("CERTIFICATE REQUEST", data));
});
