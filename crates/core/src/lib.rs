//! Shared building blocks for every signet crate.
//!
//! - [`hash`]: SHA-256 digests and the fixed-size [`hash::Hash`] type.
//! - [`hexfmt`]: fast lowercase hex.
//! - [`histogram`]: lock-free fixed-bucket histograms for `/metrics`.
//! - [`b64`]: the base64 flavours the Sigstore wire formats use.
//! - [`jcs`]: RFC 8785 canonical JSON, the form Rekor stores and signs.
//! - [`pem`]: PEM armour in the exact layout Go's `encoding/pem` writes.
//! - [`cpu`]: CPU-heavy work on a bounded blocking pool, off the async runtime.
//! - [`files`]: atomic, permission-aware file writes.
//! - [`pubkey`]: public keys of every kind Sigstore uses, and signature checks.
//! - [`grpc`]: gRPC's length-prefixed messages, and Fulcio's gRPC messages.
//! - [`request_id`]: the id that joins a request's response, access-log line and audit record.
//! - [`merkle`]: RFC 6962 Merkle hashing and inclusion / consistency proof checks.
//! - [`ctleaf`]: RFC 6962 `MerkleTreeLeaf`s, read (which certificate a CT leaf logs).
//! - [`note`]: C2SP signed-note checkpoints: parsing and verification.
//! - [`notekey`]: Ed25519 note verifier keys and what a cosignature signs (c2sp.org/tlog-cosignature).
//! - [`verifications`]: the signature checks this thread made, by algorithm, for the lab's crypto floor.
//! - [`wire`]: strictly typed JSON input, whose errors name the JSON path of the field.
//! - `micro` (feature `micro`): criterion micro-benchmark suites and their registry.

pub mod b64;
pub mod cpu;
pub mod ctleaf;
pub mod files;
pub mod grpc;
pub mod hash;
pub mod hexfmt;
pub mod histogram;
pub mod jcs;
pub mod merkle;
#[cfg(feature = "micro")]
pub mod micro;
pub mod note;
pub mod notekey;
pub mod pem;
pub mod pubkey;
pub mod request_id;
pub mod verifications;
pub mod wire;
