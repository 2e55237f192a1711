//! `GET /api/v2/tile/…` paths: only canonical C2SP paths parse, and they format back the same.
#![no_main]
use libfuzzer_sys::fuzz_target;
use signet_log::tiles::{self, TilePath};

fuzz_target!(|data: &[u8]| {
    let Ok(path) = std::str::from_utf8(data) else { return };
    let Ok(parsed) = tiles::parse(path) else { return };
    let (head, index, width) = match parsed {
        TilePath::Hashes { level, index, width } => (level.to_string(), index, width),
        TilePath::Entries { index, width } => ("entries".to_string(), index, width),
    };
    let mut canonical = format!("{head}/{}", tiles::format_index(index));
    if width < tiles::TILE_WIDTH {
        canonical.push_str(&format!(".p/{width}"));
    }
    assert_eq!(canonical, path, "one tile, one path");
});
