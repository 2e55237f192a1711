//! signet's signing keys, every one behind a [`Signer`], wherever it is kept.
//!
//! - [`algorithm`]: ECDSA P-256, ECDSA P-384 and Ed25519, and what each signs.
//! - [`signer`]: [`Signer`], one private key and its public half; signing off the runtime.
//! - [`source`]: where a key is kept, as configured: a file path, a PKCS#11 URI, an AWS KMS key.
//! - [`file`]: keys in PKCS#8 PEM files (mode 0600), read or made on first start.
//! - [`pkcs11`]: keys on a token, signed with through a pool of sessions.
//! - [`awskms`]: keys in AWS KMS, signed with by the SDK on a thread of its own.
//! - [`home`]: [`KeyHome`], where `signet init --keys` makes every key: a token, or KMS.
//! - [`note`]: [`NoteSigner`], an Ed25519 signer of C2SP signed notes (cosignatures).
//! - [`error`]: [`KeyError`], and which failures are transient (503, not 500).

pub mod algorithm;
pub mod awskms;
pub mod error;
pub mod file;
pub mod home;
pub mod note;
pub mod pkcs11;
pub mod signer;
pub mod source;

pub use algorithm::Algorithm;
pub use error::{HsmError, KeyError};
pub use home::KeyHome;
pub use note::NoteSigner;
pub use signer::{signatures_made, Signer, Spread};
pub use source::{AwsKmsUri, KeySource, Pkcs11Settings, Pkcs11Uri, SourceError};
