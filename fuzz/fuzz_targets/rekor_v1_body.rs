//! `POST /api/v1/log/entries` bodies (hashedrekord and dsse 0.0.1, intoto 0.0.2 and 0.0.1):
//! parsing and the signature check must refuse, never panic, whatever the bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(entry) = signet_log::rekor::v1::parse(data) {
        // An accepted entry has a canonical body that parses as JSON again, in which a reindex
        // finds the signer the append gave it (of a dsse body, whose signatures are recorded
        // sorted, some signer); an attestation is stored under its own digest.
        assert!(serde_json::from_slice::<serde_json::Value>(&entry.body).is_ok());
        let found = signet_log::rekor::stored_keys(&entry.body).expect("an accepted body names its signer");
        if !entry.body.starts_with(br#"{"apiVersion":"0.0.1","kind":"dsse""#) {
            assert_eq!(found.public_key, entry.public_key);
        }
        if let Some(a) = &entry.attestation {
            assert_eq!(a.digest, signet_core::hash::sha256(&a.data));
        }
    }
});
