//! A TUF ceremony's proposals (`signet tuf sign` and `publish` read them from whoever carried
//! them): parsed, written back, and checked against a root as publishing does.
#![no_main]
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use signet_trust::tuf::ceremony::{check_root_after, check_targets_under, tally, Proposal};
use tough::schema::{Root, Signed};

fn root() -> &'static Signed<Root> {
    static R: OnceLock<Signed<Root>> = OnceLock::new();
    R.get_or_init(|| serde_json::from_slice(include_bytes!("../data/tuf-1.root.json")).expect("the seed root parses"))
}

fuzz_target!(|data: &[u8]| {
    let Ok(p) = Proposal::parse(data, "fuzz") else { return };
    // What is written back reads back as the same metadata, byte for byte.
    let bytes = p.to_bytes().expect("a parsed proposal serializes");
    let again = Proposal::parse(&bytes, "again").expect("what was written parses");
    assert_eq!(again.to_bytes().expect("serializes"), bytes);
    let now = jiff::Timestamp::now();
    match &p {
        Proposal::Root(r) => {
            let _ = tally(&root().signed, r);
            let _ = check_root_after(&root().signed, r, now);
        }
        Proposal::Targets(t) => {
            let _ = tally(&root().signed, t);
            let _ = check_targets_under(&root().signed, t, 1, std::path::Path::new("/nonexistent"), now);
        }
    }
});
