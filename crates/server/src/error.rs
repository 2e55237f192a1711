//! What starting an instance fails with: each cause names the setting, file or service, and
//! what to do about it.

use signet_ca::authority::CaError;
use signet_ca::oidc::dev::DevIssuerError;
use signet_ca::tsa::TsaError;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("data dir {path}: {source}")]
    DataDir { path: String, source: std::io::Error },
    #[error("key {path} does not exist; {hint}")]
    MissingKey { path: String, hint: String },
    #[error("{data_dir} has no {missing}; {hint}")]
    NotInitialised { data_dir: String, missing: String, hint: String },
    #[error(transparent)]
    Key(#[from] signet_keys::KeyError),
    #[error(transparent)]
    Storage(#[from] signet_log::storage::StorageError),
    #[error(transparent)]
    Log(#[from] signet_log::OpenError),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error(transparent)]
    DevIssuer(#[from] DevIssuerError),
    #[error(transparent)]
    Ca(#[from] CaError),
    #[error(transparent)]
    Tsa(#[from] TsaError),
    #[error("the TUF repository: {0}")]
    Tuf(#[from] signet_trust::tuf::TufError),
    #[error("writing the log's genesis entry: {0}")]
    GenesisEntry(#[source] signet_log::rekor::EntryError),
    #[error("writing the log's genesis entry: {0}")]
    Genesis(#[source] signet_log::AppendError),
    #[error("log shards: {0}")]
    Shards(#[from] crate::shards::ShardError),
    /// The data dir is a backup not restored yet, and its mark does not read.
    #[error("log shards: {0}")]
    Backup(#[from] crate::restore::RestoreError),
    #[error("log shards: {0}")]
    Watermarks(#[from] crate::watermark::WatermarkError),
    #[error("trust documents: {0}")]
    Trust(#[from] crate::trust::TrustError),
    #[error("trust documents: {0}")]
    AuditKey(#[source] crate::anchor::AnchorError),
    #[error("a key rotation: {0}")]
    Rotation(#[from] crate::rotate::RotateError),
    #[error("TLS: {0}")]
    Tls(#[from] signet_tls::CertError),
    #[error(transparent)]
    Guard(#[from] signet_guard::StoreError),
    #[error(transparent)]
    Lock(#[from] crate::datadir::LockError),
    #[error("{what} failed unexpectedly (a bug; please report it): {why}")]
    Panicked { what: &'static str, why: String },
}
