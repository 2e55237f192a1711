//! A client certificate as an mTLS handshake hands it over, and a client-CA bundle: the SAN
//! reader (`signet_tls::subject_alt_names`, run on every verified client certificate) and the
//! bundle's PEM parser give names, or nothing, or an error, and never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use signet_tls::{subject_alt_names, ClientAuth, ClientAuthMode};

fuzz_target!(|data: &[u8]| {
    let _ = subject_alt_names(data);
    if let Ok(auth) = ClientAuth::from_pem(ClientAuthMode::Optional, data, "fuzz.pem") {
        assert!(!auth.cas().is_empty(), "a bundle that parses holds a CA");
    }
});
