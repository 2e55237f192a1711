//! Trust distribution: what clients need to know to verify signet's signatures.
//!
//! - [`root`]: the TrustedRoot (v0.1), the SigningConfig (v0.2) and the ClientTrustConfig
//!   that sigstore clients read, built from the public parts of an instance.
//! - [`tuf`]: the TUF repository that publishes them, from which clients bootstrap.

pub mod root;
pub mod tuf;
