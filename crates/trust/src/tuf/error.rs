//! What the TUF repository, its keys and its ceremonies fail with.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum TufError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {msg}")]
    Key { path: PathBuf, msg: String },
    #[error("the TUF {role} key is needed and is not at {path}; put it back (it may be kept offline between signings)")]
    MissingKey { role: &'static str, path: PathBuf },
    #[error("{path}: not valid TUF metadata: {msg}")]
    Corrupt { path: PathBuf, msg: String },
    #[error("TUF: {0}")]
    Tough(String),
    /// Metadata brought to the repository that it does not take up, and why.
    #[error("{name} is refused: {why}")]
    Refused { name: String, why: super::refusal::Refusal },
    /// Metadata that checks out but cannot be taken up alone (it waits for what it needs).
    #[error("{name} cannot be published yet: {why}")]
    NotYet { name: String, why: String },
}
