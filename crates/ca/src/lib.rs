//! Keyless signing's certificate side: OIDC identity, the CA, its CT log, and the TSA.
//!
//! - [`oidc`]: verifying identity tokens, and the built-in development issuer.
//! - [`x509`]: assembling and signing certificates.
//! - [`authority`]: the CA's root and intermediate, and the Fulcio leaf profile.
//! - [`ci`]: Fulcio's CI extensions: each CI provider's claims mapped by templates.
//! - [`identity`]: which identities can be written into a certificate, and why not.
//! - [`ct`]: the RFC 6962 CT log and the SCTs embedded in every certificate.
//! - [`issue`]: the `signingCert` flow that ties token, key proof, CT and CA together.
//! - [`tsa`]: the RFC 3161 timestamp authority.
//! - [`handover`]: a TSA or intermediate key handing over to its successor at a set second.
//! - [`serving`]: a `--dev` instance's TLS CA, and the short-lived serving certificates it issues.
//! - `micro` (feature `micro`): the criterion suite of issuance, SCTs and timestamps.

// `ca → verify` is an arrow DESIGN.md does not draw: the CT log's `add-chain` checks a submitted
// chain with the verifier's certificate type (`ct::submission`) rather than a second copy of it.
// `verify` depends on `core` and `keys` only, so this makes no cycle.

// Nothing derived from a request may panic (issue 17): no unwrap/expect outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod authority;
pub mod ci;
pub mod ct;
pub mod handover;
pub mod identity;
pub mod issue;
#[cfg(feature = "micro")]
pub mod micro;
pub mod oidc;
pub mod serving;
pub mod tsa;
pub mod x509;
