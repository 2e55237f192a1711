//! The signing client: keyless signing against Sigstore services, ending in a bundle.
//!
//! Each service module builds requests and reads replies without doing I/O, so the lab can
//! drive the same steps over its own connections; [`sign`] runs the whole flow over HTTP.
//!
//! - [`signing_config`]: which CA, log and TSA a SigningConfig v0.2 selects.
//! - [`token`]: the identity claim a proof of possession signs.
//! - [`fulcio`]: certificate requests and chains (Fulcio v2 API).
//! - [`dsse`]: DSSE envelopes over in-toto statements, and their PAE.
//! - [`rekor`]: hashedrekord and dsse entries for Rekor v1 and v2, as bundle tlog entries.
//! - [`tsa`]: RFC 3161 timestamp requests and replies.
//! - [`bundle`]: Sigstore bundle v0.3 assembly.
//! - [`http`]: a blocking JSON/DER client with connection reuse.
//! - [`sign`]: the flow, from artifact (or in-toto statement) and token to bundle.
//! - [`witnessed`]: the witnesses' cosigned copy of the entry's checkpoint, into the bundle.

pub mod bundle;
pub mod dsse;
pub mod fulcio;
pub mod http;
pub mod rekor;
pub mod sign;
pub mod signing_config;
pub mod token;
pub mod tsa;
pub mod witnessed;

pub use sign::{sign_artifact, sign_payload, Payload, Signer};

/// Why signing failed. Each variant names the service or document at fault.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("signing config: {0}")]
    Config(String),
    #[error("identity token: {0}")]
    Token(String),
    #[error("{service} at {url}: {why}")]
    Service { service: &'static str, url: String, why: String },
    #[error("key: {0}")]
    Key(String),
    #[error("in-toto statement: {0}")]
    Statement(String),
}

pub(crate) fn service_err(service: &'static str, url: &str, why: impl std::fmt::Display) -> ClientError {
    ClientError::Service { service, url: url.to_string(), why: why.to_string() }
}
