//! C2SP signed notes and checkpoints (what a witness or monitor reads from another log).
#![no_main]
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use signet_keys::{Algorithm, Signer};

fn key() -> &'static Signer {
    static K: OnceLock<Signer> = OnceLock::new();
    K.get_or_init(|| Signer::generate(Algorithm::EcdsaP256Sha256).expect("key"))
}

fuzz_target!(|data: &[u8]| {
    let Ok(note) = std::str::from_utf8(data) else { return };
    if let Ok(parsed) = signet_core::note::SignedNote::parse(note) {
        // The checkpoint's own lines are what was signed: its body opens the note's text.
        assert!(parsed.text.starts_with(&parsed.checkpoint.body()) || !parsed.text.ends_with('\n'));
    }
    let _ = signet_core::note::verify(note, "example.com", key().spki_der());
});
