//! Another log's hash tiles, as `audit verify --log` (and a monitor) reads them: whatever a
//! remote log serves (short tiles, long ones, odd lengths, none), building a root or a
//! consistency proof from it gives one or an error, and never panics. (Whether the proof
//! then verifies is `merkle::verify_consistency`'s to say, against signed roots.)
#![no_main]
use libfuzzer_sys::fuzz_target;
use signet_log::remote::TileNodes;

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    // A tree of up to 70,000 leaves (tile level 2), a first size within it, then the tiles'
    // bytes, handed out in turn to whatever paths are fetched.
    let size = u64::from(u16::from_le_bytes([data[0], data[1]])) * 2 + u64::from(data[2] & 1);
    let first = u64::from(data[3]) % (size + 1);
    let body = &data[4..];
    let offset = std::cell::Cell::new(0usize);
    let fetch = |_: &str| {
        let at = offset.get();
        let take = body.len().saturating_sub(at).min(8192);
        offset.set(at + take);
        if take == 0 {
            return Err("no more bytes".to_string());
        }
        Ok(body[at..at + take].to_vec())
    };
    if first >= 1 {
        let _ = TileNodes::new(size, &fetch).consistency_proof(first);
    }
    let _ = TileNodes::new(size, &fetch).root();
});
