//! The log's criterion suite (feature `micro`): `signet bench micro log`, `cargo bench -p signet-log`.
//!
//! - [`tree`]: RFC 6962 hashing, the in-memory tree, and proofs on a 1,000,000-leaf tree.
//! - [`entries`]: checkpoints and Rekor v1 / v2 entries, as the request path handles them.
//! - [`storage`]: the SQLite backend: a durable batch commit and a point read.

mod entries;
mod storage;
mod tree;

use signet_core::micro::{Bench, Suite};

pub fn suite() -> Suite {
    let b = |id, about, run| Bench { id, about, run };
    Suite {
        name: "log",
        about: "transparency log: Merkle tree and proofs, checkpoints, Rekor entries, SQLite storage",
        benches: vec![
            b("log/merkle/leaf_hash", "RFC 6962 leaf hash of a hashedrekord canonical body", tree::leaf_hash),
            b("log/merkle/node_hash", "RFC 6962 node hash of two child hashes", tree::node_hash),
            b("log/tree/push", "append one leaf hash to the in-memory tree (completing the subtrees it closes)", tree::push),
            b("log/tree/inclusion_proof_1m", "inclusion proof for a leaf of a 1,000,000-leaf tree", tree::inclusion_proof),
            b("log/tree/consistency_proof_1m", "consistency proof from a smaller size to 1,000,000 leaves", tree::consistency_proof),
            b("log/merkle/verify_inclusion_1m", "check an inclusion proof in a 1,000,000-leaf tree (RFC 9162)", tree::verify_inclusion),
            b("log/checkpoint/sign", "sign a C2SP checkpoint note with ECDSA P-256", entries::checkpoint_sign),
            b("log/checkpoint/verify", "parse a signed checkpoint note and verify its ECDSA P-256 signature", entries::checkpoint_verify),
            b("log/rekor_v1/parse_verify", "Rekor v1 hashedrekord request: JSON bytes to canonical body, P-256 certificate signature verified", entries::rekor_v1),
            b("log/rekor_v1/sets_256_one_thread", "the SETs of a full batch (256 entries), signed one after another on one thread", entries::sets_256_one_thread),
            b("log/rekor_v1/sets_256", "the SETs of a full batch (256 entries), spread over the cores as the sequencer signs them", entries::sets_256),
            b("log/rekor_v2/parse_canonical_body", "Rekor v2 hashedRekordRequestV002: JSON bytes to canonical body (JCS), signature verified", entries::rekor_v2),
            b("log/sqlite/commit_256", "durable SQLite commit of a 256-entry batch with its tiles and checkpoint; times the disk's fsync ($TMPDIR)", storage::commit),
            b("log/sqlite/entry_read", "SQLite point read of one entry (body and SET) among 16,384", storage::entry_read),
        ],
    }
}

/// A Rekor v1 canonical body with a certificate, as the log stores and hashes it.
fn v1_body() -> Vec<u8> {
    let signed = signet_core::micro::fixture::SignedArtifact::new(b"micro-benchmark artifact");
    crate::rekor::v1::parse_value(&signed.hashedrekord_v1()).expect("the fixture is a valid entry").body
}
