//! Offline verification of Sigstore bundles, the client side of signet: no network, only a
//! trusted root, a bundle, the artifact (or its digest) and a policy.
//!
//! ```no_run
//! # fn main() -> Result<(), signet_verify::VerifyError> {
//! use signet_verify::{Artifact, Policy, Verifier};
//! let verifier = Verifier::new(&std::fs::read("trusted_root.json").unwrap())?; // parse once
//! let policy = Policy::Identity { identity: "me@example.com".into(), issuer: "https://issuer".into() };
//! let bundle = std::fs::read("a.txt.sigstore.json").unwrap();
//! verifier.verify_json(&bundle, Artifact::Bytes(b"artifact"), &policy)?;
//! # Ok(()) }
//! ```
//!
//! Modules, in the order [`Verifier::verify`] uses them (docs/verify.md lists every check):
//! - [`bundle`]: the bundle JSON (v0.1–v0.3) into typed, decoded values.
//! - [`trust_root`]: the trusted root: logs, CAs, CT logs, TSAs and their validity windows.
//! - [`signature`] / [`dsse`]: the artifact signature, or the DSSE envelope and in-toto subjects.
//! - [`body`]: the log entry must record this bundle's signature, digest and key.
//! - [`tlog`]: trusted log, inclusion proof under a signed checkpoint, and the SET.
//! - [`timestamp`]: RFC 3161 timestamps from a trusted TSA.
//! - [`chain`] / [`sct`] / [`policy`]: the certificate at the signing time, its SCT, and who signed.
//! - [`witnesses`]: witness policies (k of n cosignatures) a checkpoint must satisfy, on request.
//! - [`cert`] and [`time`]: X.509 and time helpers; [`error`]: the one error type.

// Nothing derived from a request may panic (issue 17): no unwrap/expect outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod body;
pub mod bundle;
pub mod cert;
pub mod chain;
pub mod dsse;
pub mod error;
pub mod policy;
pub mod sct;
pub mod signature;
pub mod time;
pub mod timestamp;
pub mod tlog;
pub mod trust_root;
pub mod witnesses;
mod verifier;

pub use bundle::Bundle;
pub use error::VerifyError;
pub use policy::Policy;
pub use signature::Artifact;
pub use trust_root::TrustedRoot;
pub use verifier::{Verified, Verifier};
