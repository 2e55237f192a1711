//! RFC 6962 `MerkleTreeLeaf`s, read: which certificate a CT log's leaf logs. The CA writes
//! leaves (`signet_ca::ct`); the CT API and the monitor read them back.

/// What a CT leaf logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeafEntry<'a> {
    /// A final certificate (DER).
    X509(&'a [u8]),
    /// A precertificate: its TBS without the poison extension.
    Precert { tbs: &'a [u8] },
}

/// The entry inside a `MerkleTreeLeaf` (§3.4: version, leaf type, timestamp, entry type,
/// then the entry), or `None` if the bytes are not one.
pub fn leaf_entry(leaf: &[u8]) -> Option<LeafEntry<'_>> {
    match leaf.get(10..12)? {
        [0, 0] => opaque24_at(leaf, 12).map(LeafEntry::X509),
        [0, 1] => leaf_tbs(leaf).map(|tbs| LeafEntry::Precert { tbs }),
        _ => None,
    }
}

/// The TBS certificate inside a precert `MerkleTreeLeaf` (after the 32-byte issuer key hash).
pub fn leaf_tbs(leaf: &[u8]) -> Option<&[u8]> {
    match leaf.get(10..12)? {
        [0, 1] => opaque24_at(leaf, 44),
        _ => None,
    }
}

/// The TLS `opaque<1..2^24-1>` at `at`: a 3-byte length, then the bytes.
fn opaque24_at(bytes: &[u8], at: usize) -> Option<&[u8]> {
    let len = bytes.get(at..at + 3)?;
    let len = u32::from_be_bytes([0, len[0], len[1], len[2]]) as usize;
    bytes.get(at + 3..at + 3 + len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_kinds_are_read_and_anything_else_is_none() {
        let mut x509 = vec![0, 0];
        x509.extend_from_slice(&7u64.to_be_bytes());
        x509.extend_from_slice(&[0, 0, 0, 0, 3, b'a', b'b', b'c', 0, 0]);
        assert_eq!(leaf_entry(&x509), Some(LeafEntry::X509(b"abc")));
        assert_eq!(leaf_tbs(&x509), None);
        let mut pre = vec![0, 0];
        pre.extend_from_slice(&7u64.to_be_bytes());
        pre.extend_from_slice(&[0, 1]);
        pre.extend_from_slice(&[9; 32]);
        pre.extend_from_slice(&[0, 0, 2, b'x', b'y', 0, 0]);
        assert_eq!(leaf_entry(&pre), Some(LeafEntry::Precert { tbs: b"xy" }));
        for leaf in [&x509[..], &pre[..]] {
            for cut in 0..leaf.len() - 2 {
                assert_eq!(leaf_entry(&leaf[..cut]), None, "a leaf cut at {cut} is none, not a panic");
            }
        }
        let mut other = x509.clone();
        other[11] = 2;
        assert_eq!(leaf_entry(&other), None);
    }
}
