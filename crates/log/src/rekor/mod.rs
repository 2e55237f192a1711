//! Rekor's entry formats on top of the generic log engine.
//!
//! - [`v1`]: Rekor v1 `hashedrekord` 0.0.1 entries, their canonical bodies and SETs.
//! - [`dsse`]: Rekor v1 `dsse` 0.0.1 entries (DSSE envelopes, recorded by their hashes).
//! - [`v2`]: Rekor v2 `hashedRekordRequestV002` entries and `TransparencyLogEntry` replies.
//! - [`genesis`]: the log's own first entry, so no client entry sits at index 0.
//!
//! Signer keys and signature checks are `signet_core::pubkey`.

pub mod dsse;
pub mod genesis;
pub mod v1;
pub mod v2;

/// Why an entry was refused. Every variant names the offending field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    /// The request is malformed: bad JSON, a missing field, bad base64/hex, wrong lengths.
    #[error("{field}: {why}")]
    Malformed { field: &'static str, why: String },
    /// Well-formed, but refused: the signature does not verify, or the key is unsupported.
    #[error("{field}: {why}")]
    Rejected { field: &'static str, why: String },
}

pub(crate) fn malformed(field: &'static str, why: impl Into<String>) -> EntryError {
    EntryError::Malformed { field, why: why.into() }
}

pub(crate) fn rejected(field: &'static str, why: impl std::fmt::Display) -> EntryError {
    EntryError::Rejected { field, why: why.to_string() }
}

/// Reads a required string field at a JSON path, naming the path when it is absent.
pub(crate) fn req_str<'a>(v: &'a serde_json::Value, path: &[&str], field: &'static str) -> Result<&'a str, EntryError> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p).ok_or_else(|| malformed(field, "required field is missing"))?;
    }
    cur.as_str().ok_or_else(|| malformed(field, "must be a string"))
}

/// Refuses unknown keys in a JSON object, as strict protojson and swagger readers do.
pub(crate) fn only_keys(v: &serde_json::Value, allowed: &[&str], field: &'static str) -> Result<(), EntryError> {
    let obj = v.as_object().ok_or_else(|| malformed(field, "must be a JSON object"))?;
    for k in obj.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(malformed(field, format!("unknown field {k:?} (expected one of {allowed:?})")));
        }
    }
    Ok(())
}
