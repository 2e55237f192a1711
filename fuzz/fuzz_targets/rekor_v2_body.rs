//! `POST /api/v2/log/entries` bodies (hashedRekordRequestV002).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(entry) = signet_log::rekor::v2::parse(data) {
        assert!(serde_json::from_slice::<serde_json::Value>(&entry.body).is_ok());
    }
});
