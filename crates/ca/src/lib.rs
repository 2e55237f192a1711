//! Keyless signing's certificate side: OIDC identity, the CA, its CT log, and the TSA.
//!
//! - [`oidc`]: verifying identity tokens, and the built-in development issuer.
//!
//! The Fulcio-compatible CA, the RFC 6962 CT log with embedded SCTs, and the RFC 3161
//! timestamp authority follow (see the issue "CA, CT log and timestamp authority").

pub mod oidc;
