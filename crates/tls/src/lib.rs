//! TLS for signet, on rustls with the aws-lc-rs provider.
//!
//! Client side:
//! - [`client`]: which servers a client trusts (platform roots or a PEM bundle), as a rustls `ClientConfig`.
//! - [`fetch`]: a small blocking GET of a JSON document over HTTPS, with a timeout and a size limit.
//!
//! For tests (feature `testing`):
//! - [`testing`]: a throwaway CA and a loopback HTTP(S) server that serves fixed documents.
//!
//! The server side (backends behind one trait, certificate sources and hot rotation) joins
//! this crate with the TLS listener.

pub mod client;
pub mod fetch;
#[cfg(feature = "testing")]
pub mod testing;

pub use client::{client_config, Trust, TrustError};
pub use fetch::{is_loopback_host, FetchError, Failure, Fetcher};
