//! `POST /ct/v1/add-chain` and `add-pre-chain` chains (`signet_ca::ct::submission::check`),
//! against a CA made once: the input is cut into up to three certificates (each behind a
//! 2-byte length) and checked as both kinds. A chain that passes logs what was sent.
#![no_main]
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use signet_ca::authority::{Authority, CaKeys};
use signet_ca::ct::submission::{check, OwnCa, Submitted};

fn ca() -> &'static Authority {
    static CA: OnceLock<(tempfile::TempDir, Authority)> = OnceLock::new();
    let (_, ca) = CA.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temp dir");
        let ca = Authority::open(dir.path(), &CaKeys::curve(None)).expect("a CA");
        (dir, ca)
    });
    ca
}

fuzz_target!(|data: &[u8]| {
    let ca = ca();
    let mut chain = Vec::new();
    let mut rest = data;
    while chain.len() < 3 && rest.len() >= 2 {
        let len = u16::from_be_bytes([rest[0], rest[1]]) as usize;
        let body = &rest[2..];
        let take = len.min(body.len());
        chain.push(body[..take].to_vec());
        rest = &body[take..];
    }
    // The CA's own certificates where the input says so (a 0-length slot), so that the
    // fuzzer gets past the intermediate check to the leaf's.
    if chain.get(1).is_some_and(|c| c.is_empty()) {
        chain[1] = ca.intermediate_der().to_vec();
    }
    let own = OwnCa { root: ca.root_der(), intermediate: ca.intermediate_der() };
    for kind in [Submitted::Certificate, Submitted::Precertificate] {
        if let Ok(checked) = check(&chain, kind, own) {
            match kind {
                Submitted::Certificate => assert_eq!(checked.entry, chain[0]),
                Submitted::Precertificate => assert_eq!(checked.extra, chain[0]),
            }
        }
    }
});
