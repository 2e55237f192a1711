//! `POST /api/v1/log/entries` bodies (hashedrekord and dsse 0.0.1, intoto 0.0.2): parsing and the
//! signature check must refuse, never panic, whatever the bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(entry) = signet_log::rekor::v1::parse(data) {
        // An accepted entry has a canonical body that parses as JSON again.
        assert!(serde_json::from_slice::<serde_json::Value>(&entry.body).is_ok());
    }
});
