//! What a monitor reads from a log it follows: entry bundles (c2sp.org/tlog-tiles), entry
//! bodies (hashedrekord and dsse, Rekor v1 and v2) and the certificates in them; and the
//! operator's watch list.
#![no_main]
use libfuzzer_sys::fuzz_target;
use signet_witness::monitor::{entries, source, watch};

fuzz_target!(|data: &[u8]| {
    if let Ok(parts) = source::split_bundle(data) {
        for body in parts {
            let _ = entries::parse(body);
        }
    }
    let _ = entries::parse(data);
    let _ = entries::certificate(data);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = watch::WatchList::parse(text);
    }
});
