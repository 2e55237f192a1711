//! Trust distribution: what clients need to know to verify signet's signatures.
//!
//! - [`root`]: the TrustedRoot (v0.1), the SigningConfig (v0.2) and the ClientTrustConfig
//!   that sigstore clients read, built from the public parts of an instance.
//!
//! The TUF repository that publishes them comes later.

pub mod root;
