//! One audit record and the chain rule.
//!
//! The record is stored as the exact JSON bytes that were hashed, so that verifying needs no
//! canonical form: serde writes a struct's fields in declaration order, and the stored bytes
//! are what the next hash covers. JSON escapes newlines inside strings, so a batch can keep
//! its records one per line.

use std::time::{SystemTime, UNIX_EPOCH};
use serde::{Deserialize, Serialize};
use signet_core::hash::sha256_parts;

/// The hash before the first record.
pub const GENESIS: [u8; 32] = [0; 32];

/// The longest path kept; longer ones are cut (a flood of junk paths must not bloat the log).
pub const MAX_PATH: usize = 256;

/// Records `first..=last` as stored, in one row: their JSON, one per line, and their
/// hashes, 32 bytes each, in order.
#[derive(Debug, Clone)]
pub struct Batch {
    pub first: u64,
    pub last: u64,
    pub records: Vec<u8>,
    pub hashes: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// 1, 2, 3, … with no gaps.
    pub seq: u64,
    /// When the response was ready, in milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// `token:ID` for a caller with a valid API token, else `ip:ADDR`; `signet` for the
    /// log's own records.
    pub client: String,
    pub method: String,
    /// The path without its query, at most [`MAX_PATH`] bytes.
    pub path: String,
    /// The response status; 0 for the log's own records.
    pub status: u16,
    /// Time to the response head, in microseconds.
    pub micros: u64,
    /// The id sent back in `x-request-id` and written on the access-log line. Absent in
    /// records written before ids existed, and in the log's own records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// Set on the log's own records, e.g. how many records a full queue lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The role of the caller's API token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The OIDC identity a signing request presented, once the CA verified its token: the
    /// principal its limits and bans applied to, refused or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oidc: Option<Oidc>,
    /// The route template the request matched (`/api/v1/log/entries/{uuid}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    /// Why it was refused, in the words of `signet_refused_total{reason}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What the request did, when it changed or signed something.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub did: Option<Did>,
    /// The SAN of the client certificate the connection presented (mTLS): the one that
    /// made it a principal ([`crate::mtls`]), else its first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert: Option<String>,
}

/// What a request did, as its handler reports it (a response extension the audit layer
/// reads): enough to find the entry, the certificate or the timestamp it produced, and
/// never a secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Did {
    /// An entry appended to a log: its index and its leaf hash (hex).
    Appended { log: String, index: u64, entry_hash: String },
    /// A certificate issued: its serial (hex), and the identity and OIDC issuer it certifies.
    Issued { serial: String, identity: String, issuer: String },
    /// A timestamp token: its serial (hex).
    Stamped { serial: String },
}

/// An OIDC identity (issuer and subject), as a handler reports it in a response extension.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Oidc {
    pub issuer: String,
    pub subject: String,
}

/// The hash that chains `json` (a record's stored bytes) after `prev`.
pub fn link(prev: &[u8; 32], json: &[u8]) -> [u8; 32] {
    sha256_parts(&[prev, json])
}

/// `path` cut to [`MAX_PATH`] bytes on a character boundary.
pub fn clip(path: &str) -> String {
    if path.len() <= MAX_PATH {
        return path.to_string();
    }
    let mut end = MAX_PATH;
    while !path.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &path[..end])
}

/// A request's path, copied out of its request for the record, clipped as [`clip`] clips.
///
/// Not the request's `Uri`, though cloning that allocates nothing: hyper's `Uri` shares the
/// connection's read buffer, and holding it until the writer runs (a commit later) kept hyper
/// from reusing that buffer: a fresh buffer per request, freed later on the writer's thread.
/// Most paths fit inline; a longer one is one small allocation.
#[derive(Debug, Clone)]
pub enum PathText {
    Inline { len: u8, bytes: [u8; PathText::INLINE] },
    Heap(Box<str>),
}

impl PathText {
    const INLINE: usize = 46;

    pub fn new(path: &str) -> PathText {
        if path.len() <= Self::INLINE {
            let mut bytes = [0; Self::INLINE];
            bytes[..path.len()].copy_from_slice(path.as_bytes());
            return PathText::Inline { len: path.len() as u8, bytes };
        }
        PathText::Heap(clip(path).into_boxed_str())
    }

    pub fn as_str(&self) -> &str {
        match self {
            // Copied from a str, whole: valid UTF-8 (checked rather than assumed).
            PathText::Inline { len, bytes } => bytes.get(..usize::from(*len)).and_then(|b| std::str::from_utf8(b).ok()).unwrap_or(""),
            PathText::Heap(text) => text,
        }
    }
}

/// One anchor as stored: the head it covers, where the log put it, and the log's answer
/// (a Rekor v2 `TransparencyLogEntry`, JSON: the entry, its inclusion proof, the checkpoint).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    pub seq: u64,
    pub head: [u8; 32],
    pub log_index: u64,
    pub entry: String,
}

/// The time a record is stamped with: Unix milliseconds (0 before 1970).
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_kept_inline_or_clipped() {
        for path in ["/", "/api/v2/checkpoint", &"a".repeat(46), &"é".repeat(23), &"b".repeat(47), &"é".repeat(300)] {
            let kept = PathText::new(path);
            assert_eq!(kept.as_str(), clip(path), "{path}");
            assert_eq!(matches!(kept, PathText::Inline { .. }), path.len() <= 46, "{path}");
        }
    }

    #[test]
    fn the_chain_covers_every_byte_and_the_order() {
        let a = br#"{"seq":1}"#;
        let b = br#"{"seq":2}"#;
        let h1 = link(&GENESIS, a);
        assert_ne!(link(&GENESIS, b), h1);
        assert_ne!(link(&h1, b), link(&GENESIS, b), "a hash depends on the one before");
    }

    #[test]
    fn long_paths_are_clipped_on_a_char_boundary() {
        assert_eq!(clip("/api/v2/checkpoint"), "/api/v2/checkpoint");
        let long = "é".repeat(200);
        let c = clip(&long);
        assert!(c.len() <= MAX_PATH + "…".len() && c.ends_with('…'));
    }
}
