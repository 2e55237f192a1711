//! PEM armour, SPKI public keys and certificates, as entries and CSR requests carry them.
#![no_main]
use libfuzzer_sys::fuzz_target;
use signet_core::pubkey::PublicKey;

fuzz_target!(|data: &[u8]| {
    if let Ok(block) = signet_core::pem::decode_first(data) {
        // What decodes re-encodes to a block that decodes to the same bytes.
        let again = signet_core::pem::encode(&block.label, &block.der);
        let round = signet_core::pem::decode_first(again.as_bytes()).expect("re-encoded PEM decodes");
        assert_eq!(round.der, block.der);
        let _ = PublicKey::from_spki(&block.der);
        let _ = PublicKey::from_certificate(&block.der);
    }
    let _ = signet_core::pem::decode_all(data);
    let _ = PublicKey::from_spki(data);
    let _ = PublicKey::from_certificate(data);
});
