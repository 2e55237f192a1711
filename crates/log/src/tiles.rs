//! C2SP tlog-tiles paths and entry bundles (c2sp.org/tlog-tiles).
//!
//! A tile at level L, index N holds up to 256 hashes of tree level 8·L. Its path encodes N
//! in groups of three digits, all but the last prefixed with `x` (`x001/x234/067`), and a
//! partial tile of width W appends `.p/W`. Entry bundles are the leaves themselves, each
//! prefixed by its big-endian 16-bit length.

pub const TILE_WIDTH: u64 = 256;

/// What a tile path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TilePath {
    Hashes { level: u8, index: u64, width: u64 },
    Entries { index: u64, width: u64 },
}

impl TilePath {
    /// Full tiles never change, so they may be cached forever.
    pub fn is_full(&self) -> bool {
        match self {
            TilePath::Hashes { width, .. } | TilePath::Entries { width, .. } => *width == TILE_WIDTH,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad tile path {path:?}: {why} (expected <L>/<N> or entries/<N>, N like x001/x234/067, optional .p/<W>)")]
pub struct TilePathError {
    pub path: String,
    pub why: &'static str,
}

/// Parses the part of a tile URL after `tile/`. Only the canonical spelling of a tile is
/// accepted (no leading zeros in the level or width, no leading `x000` groups), so that one
/// tile has one URL and caches cannot be filled with aliases.
pub fn parse(path: &str) -> Result<TilePath, TilePathError> {
    let err = |why| TilePathError { path: path.to_string(), why };
    let (head, rest) = path.split_once('/').ok_or_else(|| err("missing index"))?;
    let (rest, width) = match rest.split_once(".p/") {
        Some((n, w)) => {
            let w: u64 = parse_digits(w).ok_or_else(|| err("partial width is not a number"))?;
            if w == 0 || w >= TILE_WIDTH {
                return Err(err("partial width must be 1..255"));
            }
            (n, w)
        }
        None => (rest, TILE_WIDTH),
    };
    let index = parse_index(rest).ok_or_else(|| err("malformed tile index"))?;
    if head == "entries" {
        return Ok(TilePath::Entries { index, width });
    }
    let level: u8 = parse_digits(head)
        .filter(|l| *l < 8)
        .map(|l| l as u8)
        .ok_or_else(|| err("level must be 0..7"))?;
    Ok(TilePath::Hashes { level, index, width })
}

/// A decimal number of 1 to 3 digits, without leading zeros.
fn parse_digits(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 3 || !s.bytes().all(|b| b.is_ascii_digit()) || (s.len() > 1 && s.starts_with('0')) {
        return None;
    }
    s.parse().ok()
}

fn parse_index(s: &str) -> Option<u64> {
    let parts: Vec<&str> = s.split('/').collect();
    let mut n: u64 = 0;
    for (i, part) in parts.iter().enumerate() {
        let last = i == parts.len() - 1;
        let digits = if last { *part } else { part.strip_prefix('x')? };
        if digits.len() != 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        // `x000/001` names tile 1, whose path is `001`: the leading group must not be zero.
        if i == 0 && !last && digits == "000" {
            return None;
        }
        n = n.checked_mul(1000)?.checked_add(digits.parse::<u64>().ok()?)?;
    }
    Some(n)
}

/// Formats an index as a tile path component: 1234067 → `x001/x234/067`.
pub fn format_index(mut n: u64) -> String {
    let mut groups = vec![format!("{:03}", n % 1000)];
    n /= 1000;
    while n > 0 {
        groups.push(format!("x{:03}", n % 1000));
        n /= 1000;
    }
    groups.reverse();
    groups.join("/")
}

/// An entry too long for a bundle's 16-bit length prefix. Admission refuses such entries
/// (`limits.max_entry_bytes`), so this names a log written without that limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("entry {position} of the bundle is {len} bytes; entry bundles hold entries of at most 65535 bytes")]
pub struct EntryTooLong {
    pub position: usize,
    pub len: usize,
}

/// Serializes leaves into an entry bundle.
pub fn entry_bundle<'a>(entries: impl IntoIterator<Item = &'a [u8]>) -> Result<Vec<u8>, EntryTooLong> {
    let mut out = Vec::new();
    for (position, e) in entries.into_iter().enumerate() {
        let len = u16::try_from(e.len()).map_err(|_| EntryTooLong { position, len: e.len() })?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(e);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_round_trip() {
        assert_eq!(format_index(0), "000");
        assert_eq!(format_index(1234067), "x001/x234/067");
        assert_eq!(parse("0/x001/x234/067").unwrap(), TilePath::Hashes { level: 0, index: 1234067, width: 256 });
        assert_eq!(parse("2/005.p/17").unwrap(), TilePath::Hashes { level: 2, index: 5, width: 17 });
        assert_eq!(parse("entries/x001/000").unwrap(), TilePath::Entries { index: 1000, width: 256 });
        assert!(parse("entries/000.p/9").unwrap() == TilePath::Entries { index: 0, width: 9 });
    }

    #[test]
    fn rejects_malformed_paths() {
        for bad in ["0", "0/1", "0/0001", "0/001/002", "9/000", "0/000.p/0", "0/000.p/256", "x/000", "0/x01/000", "0/-01",
            // Non-canonical spellings of valid tiles.
            "00/001", "0/x000/001", "entries/x000/x001/000", "0/001.p/07", "0/001.p/007", "entries/000.p/09"] {
            assert!(parse(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn bundles_are_length_prefixed() {
        assert_eq!(entry_bundle([&b"ab"[..], &b""[..]]).unwrap(), vec![0, 2, b'a', b'b', 0, 0]);
        let long = vec![0u8; 65_536];
        assert_eq!(entry_bundle([&b"a"[..], &long[..]]), Err(EntryTooLong { position: 1, len: 65_536 }));
        assert!(entry_bundle([&long[..65_535]]).is_ok());
    }
}
