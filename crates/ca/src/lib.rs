//! Keyless signing's certificate side: OIDC identity, the CA, its CT log, and the TSA.
//!
//! - [`oidc`]: verifying identity tokens, and the built-in development issuer.
//! - [`x509`]: assembling and signing certificates.
//! - [`authority`]: the CA's root and intermediate, and the Fulcio leaf profile.
//!
//! The Fulcio-compatible CA, the RFC 6962 CT log with embedded SCTs, and the RFC 3161
//! timestamp authority follow (see the issue "CA, CT log and timestamp authority").

pub mod authority;
pub mod oidc;
pub mod x509;
