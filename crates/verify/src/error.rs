//! The one error type of the verifier. Each variant is a check, and its message starts with
//! the check's name, so that a failure printed on one line says what was wrong.

/// Why a bundle was rejected (or why the trusted root could not be used).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The bundle does not parse, or breaks the shape its media type requires.
    #[error("bundle: {0}")]
    Bundle(String),
    /// The trusted root does not parse, or one of its entries is malformed.
    #[error("trusted root: {0}")]
    TrustedRoot(String),
    /// The signing certificate does not chain to a trusted CA at the signing time.
    #[error("certificate chain: {0}")]
    Chain(String),
    /// The certificate carries no SCT that verifies against a trusted CT log.
    #[error("SCT: {0}")]
    Sct(String),
    /// An RFC 3161 timestamp does not verify against a trusted TSA.
    #[error("timestamp: {0}")]
    Timestamp(String),
    /// There is no trusted time (no verified timestamp, no SET-backed integrated time).
    #[error("signing time: {0}")]
    SigningTime(String),
    /// A tlog entry is not from a trusted log, or its metadata is unacceptable.
    #[error("transparency log entry: {0}")]
    Tlog(String),
    /// A tlog entry's canonicalized body does not describe this bundle.
    #[error("tlog entry does not match the bundle: {0}")]
    EntryMismatch(String),
    /// The Merkle inclusion proof does not lead to the checkpoint's root.
    #[error("inclusion proof: {0}")]
    InclusionProof(String),
    /// The checkpoint is malformed or not signed by the log.
    #[error("checkpoint: {0}")]
    Checkpoint(String),
    /// The signed entry timestamp (inclusion promise) does not verify.
    #[error("signed entry timestamp: {0}")]
    Set(String),
    /// The artifact signature (messageSignature) does not verify, or the artifact differs.
    #[error("artifact signature: {0}")]
    Signature(String),
    /// The DSSE envelope's signature or its in-toto statement does not verify.
    #[error("DSSE envelope: {0}")]
    Dsse(String),
    /// The certificate identity, issuer, key usage or managed key is not what was asked for.
    #[error("policy: {0}")]
    Policy(String),
}

pub type Result<T> = std::result::Result<T, VerifyError>;
