//! What the audit key and anchoring the audit chain fail with.

use std::path::PathBuf;

use signet_keys::KeyError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AnchorError {
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error("{}: {source}", .path.display())]
    KeyDir { path: PathBuf, source: std::io::Error },
    #[error("{} does not exist: without the instance's audit key, name its chain with --chain", .path.display())]
    NoAuditKey { path: PathBuf },
    #[error("signing the anchor: {0}")]
    Sign(#[source] KeyError),
    #[error("the anchor entry is not valid (a bug): {0}")]
    Entry(#[source] signet_log::rekor::EntryError),
    #[error("appending the anchor to the Rekor v2 log: {0}")]
    Append(#[source] signet_log::AppendError),
    #[error("the anchor's inclusion proof: {0}")]
    Proof(#[source] signet_log::merkle::ProofError),
    #[error("storing the anchor: {0}")]
    Store(#[source] signet_guard::StoreError),
    #[error("cutting an audit segment: {0}")]
    Cut(#[source] signet_guard::StoreError),
    /// The blocking task that stores or cuts (`what`: "storing the anchor", "cutting an audit segment").
    #[error("{what}: {source}")]
    Task { what: &'static str, source: tokio::task::JoinError },
}
