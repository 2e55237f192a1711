//! What a monitor reads from a log it follows: entry bundles (c2sp.org/tlog-tiles), entry
//! bodies (hashedrekord and dsse, Rekor v1 and v2) and the certificates in them, a CT log's
//! leaves and signed tree heads; and the operator's watch list.
#![no_main]
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use signet_core::pubkey::PublicKey;
use signet_witness::monitor::{entries, keys, source, watch};

fn ct_key() -> &'static [PublicKey] {
    static K: OnceLock<Vec<PublicKey>> = OnceLock::new();
    K.get_or_init(|| {
        let key = signet_keys::Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).expect("a key");
        vec![PublicKey::from_spki(key.spki_der()).expect("its SPKI")]
    })
}

fuzz_target!(|data: &[u8]| {
    if let Ok(parts) = source::split_bundle(data) {
        for body in parts {
            let _ = entries::parse(body);
        }
    }
    let _ = entries::parse(data);
    let _ = entries::certificate(data);
    let _ = entries::parse_ct_leaf(data);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = watch::WatchList::parse(text);
        assert!(keys::verify_sth(text, ct_key()).is_err(), "no input is signed by a key made at start");
    }
});
