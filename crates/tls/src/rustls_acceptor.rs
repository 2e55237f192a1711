//! The rustls backend: one `ServerConfig` for the life of the listener, whose certificate
//! resolver reads the current certificate with one atomic load per handshake.
//!
//! Rotation therefore never rebuilds the config: [`RustlsAcceptor::install`] swaps the
//! pointer, the next ClientHello sees the new certificate, and connections already
//! established keep the keys they negotiated.

use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::server::TlsStream;

use crate::certified::{CertError, CertifiedPair};

/// The certificate every handshake presents, until the next `install`.
#[derive(Debug)]
struct Current(ArcSwap<CertifiedKey>);

impl ResolvesServerCert for Current {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.load_full())
    }
}

pub(crate) struct RustlsAcceptor {
    acceptor: tokio_rustls::TlsAcceptor,
    current: Arc<Current>,
}

impl RustlsAcceptor {
    pub(crate) fn new(pair: &CertifiedPair, alpn: &[&[u8]]) -> Result<RustlsAcceptor, CertError> {
        let current = Arc::new(Current(ArcSwap::new(pair.rustls_key())));
        let mut config = ServerConfig::builder_with_provider(crate::client::provider())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| CertError::Backend { backend: "rustls", why: e.to_string() })?
            .with_no_client_auth()
            .with_cert_resolver(current.clone());
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(RustlsAcceptor { acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)), current })
    }

    /// New handshakes present `pair` from now on.
    pub(crate) fn install(&self, pair: &CertifiedPair) {
        self.current.0.store(pair.rustls_key());
    }

    /// The server side of a handshake on `io`: TCP in service, an in-memory pipe in the benches.
    pub(crate) async fn accept<S: AsyncRead + AsyncWrite + Unpin>(&self, io: S) -> std::io::Result<TlsStream<S>> {
        self.acceptor.accept(io).await
    }
}
