//! What making the trust documents from a data dir fails with: each message names the file or
//! setting at fault.

use std::path::PathBuf;

use crate::config::ConfigError;
use crate::rotate::record::RecordError;
use crate::shards::error::ShardError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrustError {
    #[error("{}: {source}", .path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: {source}", .path.display())]
    Pem { path: PathBuf, source: signet_core::pem::PemError },
    #[error("{} has no public-url; start `signet serve` on this data dir once first", .data_dir.display())]
    NoPublicUrl { data_dir: PathBuf },
    /// Shard 0's key (`key`) and its public half are missing.
    #[error("{} does not exist; start `signet serve` on this data dir first", .key.display())]
    NotServed { key: PathBuf },
    #[error("--url host {got:?} differs from the instance's host {want:?}; its logs are named after {want:?}")]
    OtherHost { got: String, want: String },
    #[error(transparent)]
    Url(#[from] ConfigError),
    #[error(transparent)]
    Shards(#[from] ShardError),
    #[error(transparent)]
    Rotations(#[from] RecordError),
    #[error("log-prepared.json: a key that is not base64")]
    PreparedKey,
    #[error("{}: {source}", .path.display())]
    Included { path: PathBuf, source: IncludedError },
}

/// Why a trusted root from elsewhere is not included (`signet trust include`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IncludedError {
    #[error("not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// `found`: the document's `mediaType`, as JSON.
    #[error("mediaType {found} where a Sigstore trusted root (application/vnd.dev.sigstore.trustedroot+json) was expected")]
    MediaType { found: serde_json::Value },
    #[error(transparent)]
    Unusable(#[from] signet_verify::VerifyError),
}
