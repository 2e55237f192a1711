//! Rekor's entry formats on top of the generic log engine.
//!
//! - [`v1`]: Rekor v1 `hashedrekord` 0.0.1 entries, their canonical bodies and SETs.
//! - [`dsse`]: Rekor v1 `dsse` 0.0.1 entries (DSSE envelopes, recorded by their hashes).
//! - [`intoto`]: Rekor v1 `intoto` 0.0.2 entries (DSSE envelopes with a key per signature).
//! - [`intoto_v001`]: Rekor v1 `intoto` 0.0.1 entries (an envelope and the one key that signed it).
//! - [`v2`]: Rekor v2 `hashedRekordRequestV002` entries and `TransparencyLogEntry` replies.
//! - [`genesis`]: the log's own first entry, so no client entry sits at index 0.
//! - [`copy`]: another Rekor's entries as its API serves them, checked for `signet import rekor`.
//! - [`identity`]: the signing identity (certificate SAN) and the signer's key that v1 entries
//!   are searchable by.
//!
//! Signer keys and signature checks are `signet_core::pubkey`.

pub mod copy;
pub mod dsse;
pub mod genesis;
pub mod identity;
pub mod intoto;
pub mod intoto_v001;
pub mod v1;
pub mod v2;

pub use crate::storage::Attestation;
pub use identity::{certificate_identity, email_key, identity_key, public_key_index, public_key_index_of_pem, stored_keys, StoredKeys};

/// A Rekor v1 entry of any kind, verified and ready to append.
#[derive(Debug, Clone)]
pub struct VerifiedEntry {
    /// The canonical body (the leaf data).
    pub body: Vec<u8>,
    /// `<algorithm>:<hex>`: the key of the artifact-digest index (a DSSE envelope's first
    /// in-toto subject with a SHA-256 digest, else its payload's).
    pub digest_key: String,
    /// The key of the identity index ([`identity`]), for an entry signed with a certificate
    /// (an envelope's first); `None` for a bare key.
    pub identity: Option<String>,
    /// The key of the signer's key index ([`public_key_index`]): of the key or certificate a
    /// hashedrekord names, of an envelope's first.
    pub public_key: String,
    /// An intoto entry's attestation: its envelope's decoded payload (the in-toto statement),
    /// which the body leaves out. As with Rekor's optional attestation storage, it is kept
    /// beside the log and served with the entry as `attestation.data`.
    pub attestation: Option<Attestation>,
}

/// Why an entry was refused. Every variant names the offending field by its JSON path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    /// The request is malformed: bad JSON, a missing or unknown field, a wrong type, bad
    /// base64/hex/PEM, wrong lengths.
    #[error("{field}: {why}")]
    Malformed { field: String, why: String },
    /// Well-formed, but refused: the signature does not verify, or the key is unsupported.
    #[error("{field}: {why}")]
    Rejected { field: String, why: String },
}

impl EntryError {
    /// The JSON path of the field the error is about.
    pub fn field(&self) -> &str {
        match self {
            EntryError::Malformed { field, .. } | EntryError::Rejected { field, .. } => field,
        }
    }

    /// The same error, for an entry that sits at `prefix` in a larger document.
    pub fn within(self, prefix: &str) -> Self {
        match self {
            EntryError::Malformed { field, why } => EntryError::Malformed { field: signet_core::wire::join(prefix, &field), why },
            EntryError::Rejected { field, why } => EntryError::Rejected { field: signet_core::wire::join(prefix, &field), why },
        }
    }
}

impl From<signet_core::wire::InputError> for EntryError {
    fn from(e: signet_core::wire::InputError) -> Self {
        EntryError::Malformed { field: e.path, why: e.why }
    }
}

pub(crate) fn malformed(field: impl Into<String>, why: impl Into<String>) -> EntryError {
    EntryError::Malformed { field: field.into(), why: why.into() }
}

pub(crate) fn rejected(field: impl Into<String>, why: impl std::fmt::Display) -> EntryError {
    EntryError::Rejected { field: field.into(), why: why.to_string() }
}

/// A key or certificate sent as base64 of its PEM text (Rekor v1's way): the block, or an
/// error at `field`.
pub(crate) fn pem_key(pem_text: &[u8], field: &str) -> Result<(signet_core::pem::Block, signet_core::pubkey::PublicKey), EntryError> {
    use signet_core::pubkey::PublicKey;
    let block = signet_core::pem::decode_first(pem_text).map_err(|e| malformed(field, e.to_string()))?;
    let key = match block.label.as_str() {
        "CERTIFICATE" => PublicKey::from_certificate(&block.der),
        "PUBLIC KEY" => PublicKey::from_spki(&block.der),
        other => return Err(malformed(field, format!("PEM block {other:?}; expected CERTIFICATE or PUBLIC KEY"))),
    }
    .map_err(|e| rejected(field, e))?;
    Ok((block, key))
}
