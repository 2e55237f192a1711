//! What KMS, or the way to it, failed with: [`KmsError`]. A leaf: the signer raises it, and
//! [`crate::HsmError`] wraps it, without either reaching back.

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_kms::types::{KeySpec, KeyUsageType};

/// What KMS, or the way to it, failed with. The SDK's own errors are kept as its words (with
/// KMS's error code), not its types: each KMS operation has an error type of its own.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KmsError {
    #[error("starting the KMS client's thread: {0}")]
    Thread(#[source] Arc<std::io::Error>),
    #[error("KMS did not answer within {0:?}")]
    Timeout(Duration),
    /// KMS answered with an error.
    #[error("KMS refused: {message}")]
    Refused { message: String },
    /// KMS was not reached, or its answer not read.
    #[error("reaching KMS: {message}")]
    Unreachable { message: String },
    #[error("its key usage is {0:?}, not SIGN_VERIFY")]
    KeyUsage(Option<KeyUsageType>),
    #[error("KMS gave no key spec")]
    NoKeySpec,
    #[error("its key spec is {0}; signet signs with ECC_NIST_P256 or ECC_NIST_P384 keys in KMS")]
    KeySpec(KeySpec),
    #[error("KMS gave no public key")]
    NoPublicKey,
    #[error("a key to make needs a name: awskms:///alias/NAME")]
    NoAlias,
    #[error("signet makes no Ed25519 keys in KMS")]
    Ed25519,
    #[error("KMS made a key but gave no id")]
    NoKeyId,
}
