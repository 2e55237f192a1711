//! TLS for signet: rustls (aws-lc-rs) on the client side; rustls or OpenSSL on the server side.
//!
//! Client side:
//! - [`client`]: which servers a client trusts (platform roots or a PEM bundle), as a rustls `ClientConfig`.
//! - [`fetch`]: a small blocking HTTP(S) client: JSON GETs and single requests (OTLP export), with a
//!   timeout and a size limit.
//!
//! Server side:
//! - [`backend`]: the TLS libraries a server can terminate with, chosen at runtime.
//! - [`certified`]: a certificate chain and key, parsed and checked once for every backend.
//! - [`acceptor`]: the backend-neutral acceptor (TCP in, TLS stream out) and its stream.
//! - [`client_auth`]: mTLS: which client certificates a listener asks for, and the names a
//!   verified one gives.
//! - `rustls_acceptor`, `openssl_acceptor`: the two backends (`openssl_pair`: a pair as OpenSSL's objects); each reads the current
//!   certificate with one atomic load per handshake, or asks a per-handshake source.
//! - [`file_source`]: certificates from PEM files, read and checked.
//! - [`reloader`]: the files re-read on a timer or on an inotify event, for hot rotation.
//! - [`issued`]: a certificate from the instance's own CA, issued in memory and renewed at
//!   half its lifetime (`--dev` without a certificate).
//! - [`per_handshake`]: certificates looked up at each handshake (`reload`, `cached`), report
//!   000's two modes.
//! - [`source`]: which source a server uses, and the counters all of them keep.
//!
//! Both:
//! - [`loopback`]: a server on a loopback port with a thread and a runtime of its own, stopped
//!   when dropped (the test server's and `signet bench tls`'s).
//!
//! For tests (feature `testing`):
//! - [`testing`]: a throwaway CA and a loopback HTTP(S) server that serves fixed documents.
//!
//! For the lab (feature `micro`):
//! - [`micro`]: the criterion suite, handshakes and 16 KiB records through both acceptors.

pub mod acceptor;
pub mod backend;
pub mod certified;
pub mod client;
pub mod client_auth;
pub mod fetch;
pub mod file_source;
pub mod issued;
pub mod loopback;
#[cfg(feature = "micro")]
pub mod micro;
mod openssl_acceptor;
mod openssl_pair;
pub mod per_handshake;
pub mod reloader;
mod rustls_acceptor;
pub mod source;
#[cfg(feature = "testing")]
pub mod testing;

pub use acceptor::{Acceptor, Negotiated, ServerStream};
pub use backend::{Backend, UnknownBackend};
pub use certified::{CertError, CertifiedPair};
pub use client::{client_config, Trust, TrustError};
pub use client_auth::{subject_alt_names, ClientAuth, ClientAuthMode};
pub use fetch::{is_loopback_host, FetchError, Failure, Fetcher};
pub use file_source::FileSource;
pub use reloader::Reloader;
pub use source::{Freshness, SourceKind, Trigger};
