//! What can go wrong with a key: reading it, its kind, or a token or KMS that will not sign.

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
    /// The key on a token or in KMS cannot be used as configured (at start, or when made).
    #[error("key {key}: {why}")]
    Hsm {
        key: String,
        #[source]
        why: HsmError,
    },
    /// The token or KMS did not sign now (unplugged, busy, restarting); a later try may succeed.
    #[error("key {key} cannot sign now: {why}")]
    Unavailable {
        key: String,
        #[source]
        why: HsmError,
    },
    /// A key held elsewhere whose two halves do not belong together: it would sign what
    /// nobody verifies.
    #[error("key {key}: its private key's signatures do not verify with its public key")]
    Mismatch { key: String },
}

/// What a key kept outside the process (on a PKCS#11 token, in KMS) failed with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HsmError {
    #[error(transparent)]
    Pkcs11(#[from] crate::pkcs11::Pkcs11Error),
    #[error(transparent)]
    Kms(#[from] crate::awskms::KmsError),
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
