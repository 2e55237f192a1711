//! What `signet import rekor` reads from the Rekor it copies: a retrieve answer's entries
//! (`signet_log::rekor::copy`), and the stored bodies it derives search keys from
//! (`rekor::stored_keys`, `copy::stored_digest`; also `signet admin log reindex`'s input).
//!
//! - Nothing panics, whatever the Rekor answers.
//! - No entry passes the check under a key made at start: its SET cannot verify.
//! - A body's search keys are found the same way twice, and name well-formed keys.
#![no_main]
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use signet_core::pubkey::PublicKey;
use signet_log::rekor::copy::{check, stored_digest, Served};
use signet_log::rekor::stored_keys;

fn key() -> &'static PublicKey {
    static K: OnceLock<PublicKey> = OnceLock::new();
    K.get_or_init(|| {
        let key = signet_keys::Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).expect("a key");
        PublicKey::from_spki(key.spki_der()).expect("its SPKI")
    })
}

fuzz_target!(|data: &[u8]| {
    if let Ok(serde_json::Value::Array(items)) = serde_json::from_slice::<serde_json::Value>(data) {
        for item in items {
            let Some(map) = item.as_object() else { continue };
            for (uuid, entry) in map {
                if let Ok(served) = serde_json::from_value::<Served>(entry.clone()) {
                    assert!(check(uuid, &served, served.log_index, 1, key()).is_err(), "no SET is signed by a key made at start");
                }
            }
        }
    }
    let keys = stored_keys(data);
    assert_eq!(keys, stored_keys(data));
    if let Some(k) = keys {
        assert!(k.public_key.starts_with("sha256:") && k.public_key.len() == 7 + 64);
    }
    if let Some(d) = stored_digest(data) {
        let (alg, hex) = d.split_once(':').expect("algorithm:hex");
        assert!(!alg.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    }
});
