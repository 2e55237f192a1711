//! What rotating an authority's key fails with, offline or scheduled: each message names the
//! file, record or authority at fault.

use std::path::PathBuf;

use signet_keys::{KeyError, KeySource};

use super::record::{Authority, RecordError};
use crate::datadir::LockError;
use crate::shards::sealed::SealError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RotateError {
    /// The rotation record and the files beside it.
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error("the root key is not an ECDSA P-384 key (what `signet init` makes)")]
    RootCurve,
    #[error("the root key given is not the key of ca/root.pem")]
    NotTheRoot,
    #[error("{0}; stop the server first for an offline rotation, or schedule one on the running instance with --at TIME")]
    InUse(#[source] LockError),
    #[error("a rotation of the {} is scheduled for {from}; start the server to finish it before rotating again", .authority.title())]
    Scheduled { authority: Authority, from: String },
    #[error("a rotation of the {} is already scheduled for {from}; schedule the next after it", .authority.title())]
    AlreadyScheduled { authority: Authority, from: String },
    #[error("--at {at} is less than {lead_secs} s away: every instance must publish the new key before it signs; give a later time")]
    TooSoon { at: String, lead_secs: u64 },
    #[error("a new file key was not made (a bug)")]
    NoFileKey,
    /// `file` under `ca/`.
    #[error("ca/{file}: {source}")]
    Curve { file: &'static str, source: CurveError },
    #[error(transparent)]
    NewCurve(#[from] CurveError),
    #[error("generating the new {} key: {error}", .authority.name())]
    Generate { authority: Authority, #[source] error: KeyError },
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error(transparent)]
    CaKey(#[from] signet_ca::x509::X509Error),
    #[error(transparent)]
    Ca(#[from] signet_ca::authority::CaError),
    #[error(transparent)]
    Tsa(#[from] signet_ca::tsa::TsaError),
    #[error("the new TSA key {key}: {error}")]
    NewTsaKey { key: KeySource, #[source] error: KeyError },
    #[error("the new intermediate key {key}: {error}")]
    NewIntermediateKey { key: KeySource, #[source] error: signet_ca::x509::X509Error },
    #[error("destroying the retired key {}: {source}", .path.display())]
    Destroy { path: PathBuf, source: std::io::Error },
    #[error("{} to {}: {source}", .from.display(), .to.display())]
    Move { from: PathBuf, to: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Storage(#[from] signet_log::storage::StorageError),
    #[error(transparent)]
    Seal(#[from] SealError),
    #[error("the database's {name}: {source}")]
    StoredJson { name: String, source: serde_json::Error },
    #[error("the database's {name}: {source}")]
    StoredPem { name: String, source: signet_core::pem::PemError },
    #[error("this instance cannot hand the new key to the others: its keys/shard-seal.key is missing or is not the one the database's instances share (its start-up log says which)")]
    CannotHand,
    #[error("the database already holds rotation {number} of the {}, scheduled through another instance for {theirs}: this data dir's, for {ours}, cannot be handed on; remove it (ca/rotations.json's \"next\") and let this instance take the database's", .authority.title())]
    OtherScheduled { number: usize, authority: Authority, theirs: String, ours: String },
    #[error("the database holds rotation {number} of the {}, which follows another certificate than this data dir's ca/{}: this data dir missed an earlier rotation; copy ca/ and keys/ from an instance that has it", .authority.title(), .authority.files().0)]
    MissedRotation { number: usize, authority: Authority },
    #[error("the {}'s new key is sealed in the database, but this data dir's keys/shard-seal.key is missing or is not the one its instances share: copy theirs here", .authority.title())]
    SealedWithoutSealKey { authority: Authority },
    /// A blocking task that panicked or was cancelled.
    #[error(transparent)]
    Task(#[from] tokio::task::JoinError),
}

/// Why the curve of the key a CA certificate certifies is not known.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CurveError {
    #[error(transparent)]
    Der(#[from] der::Error),
    #[error(transparent)]
    Key(#[from] signet_core::pubkey::KeyError),
    #[error("it certifies a {0:?} key, not a P-256 or P-384 one")]
    Unsupported(signet_core::pubkey::KeyKind),
}
