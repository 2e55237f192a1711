//! What can go wrong with a key: reading it, its kind, or a token that will not sign.

use crate::Algorithm;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    #[error("reading key {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("writing key {path}: {source}")]
    Write { path: String, source: std::io::Error },
    #[error("key {path} is not usable: {why}")]
    Invalid { path: String, why: String },
    /// The key is sound, but not of the kind its use needs (a P-384 key where a log needs P-256).
    #[error("key {key} is {found}, but this key must be {expected}")]
    WrongAlgorithm { key: String, expected: String, found: String },
    #[error("signing failed")]
    Sign,
    /// The key on a token cannot be used as configured (at start, or when made).
    #[error("key {key}: {why}")]
    Hsm { key: String, why: String },
    /// The token did not sign now (unplugged, busy, restarting); a later try may succeed.
    #[error("key {key} cannot sign now: {why}")]
    Unavailable { key: String, why: String },
}

impl KeyError {
    /// Whether the key may sign again later without anyone changing anything: the request is
    /// answered 503 with Retry-After, not 500.
    pub fn is_transient(&self) -> bool {
        matches!(self, KeyError::Unavailable { .. })
    }

    pub(crate) fn wrong(key: impl ToString, expected: &[Algorithm], found: Algorithm) -> KeyError {
        let expected = expected.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(" or ");
        KeyError::WrongAlgorithm { key: key.to_string(), expected, found: found.to_string() }
    }
}
