//! The rustls backend: a `ServerConfig` whose certificate resolver reads the current
//! certificate with one atomic load per handshake; the config itself is swapped only when the
//! client-CA bundle changes (one more atomic load per handshake).
//!
//! Certificate rotation therefore never rebuilds the config: [`RustlsAcceptor::install`] swaps the
//! pointer, the next ClientHello sees the new certificate, and connections already
//! established keep the keys they negotiated.
//!
//! With a per-handshake source (`reload`, `cached`) the resolver asks the source instead.

use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::server::TlsStream;

use crate::certified::{CertError, CertifiedPair};
use crate::client_auth::ClientAuth;
use crate::per_handshake::PerHandshake;

/// Where every handshake gets its certificate.
enum Current {
    /// Installed (`file`, `watch`): until the next `install`.
    Installed(ArcSwap<CertifiedKey>),
    /// Looked up at each handshake (`reload`, `cached`).
    PerHandshake(Arc<PerHandshake>),
}

impl Current {
    fn certificate(&self) -> Arc<CertifiedKey> {
        match self {
            Current::Installed(key) => key.load_full(),
            Current::PerHandshake(source) => source.lookup(|loaded| loaded.pair.rustls_key()),
        }
    }
}

impl std::fmt::Debug for Current {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Current::Installed(_) => "Current::Installed",
            Current::PerHandshake(_) => "Current::PerHandshake",
        })
    }
}

impl ResolvesServerCert for Current {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.certificate())
    }
}

pub(crate) struct RustlsAcceptor {
    /// Swapped whole only when the client CAs change; the certificate is `current`'s.
    config: ArcSwap<ServerConfig>,
    current: Arc<Current>,
    alpn: Vec<Vec<u8>>,
    /// One ticket key schedule for the acceptor's life (rotated by rustls every 6 h), kept
    /// across config swaps so that a client-CA reload does not void every ticket out there.
    tickets: Arc<dyn rustls::server::ProducesTickets>,
}

impl RustlsAcceptor {
    pub(crate) fn new(pair: &CertifiedPair, alpn: &[&[u8]], client: Option<&ClientAuth>) -> Result<RustlsAcceptor, CertError> {
        Self::with(Current::Installed(ArcSwap::new(pair.rustls_key())), alpn, client)
    }

    /// An acceptor whose handshakes look their certificate up in `source`.
    pub(crate) fn per_handshake(source: Arc<PerHandshake>, alpn: &[&[u8]], client: Option<&ClientAuth>) -> Result<RustlsAcceptor, CertError> {
        Self::with(Current::PerHandshake(source), alpn, client)
    }

    fn with(current: Current, alpn: &[&[u8]], client: Option<&ClientAuth>) -> Result<RustlsAcceptor, CertError> {
        let current = Arc::new(current);
        let alpn: Vec<Vec<u8>> = alpn.iter().map(|p| p.to_vec()).collect();
        let tickets = rustls::crypto::aws_lc_rs::Ticketer::new().map_err(|e| CertError::Backend { backend: "rustls", why: e.to_string() })?;
        let config = build(&current, &alpn, client, &tickets)?;
        Ok(RustlsAcceptor { config: ArcSwap::from_pointee(config), current, alpn, tickets })
    }

    /// New handshakes present `pair` from now on.
    pub(crate) fn install(&self, pair: &CertifiedPair) -> Result<(), CertError> {
        match &*self.current {
            Current::Installed(key) => {
                key.store(pair.rustls_key());
                Ok(())
            }
            Current::PerHandshake(_) => Err(crate::per_handshake::install_refused("rustls")),
        }
    }

    /// What the resolver does for a handshake, without the handshake (the lookup benchmark).
    pub(crate) fn lookup(&self) {
        std::hint::black_box(self.current.certificate());
    }

    /// New handshakes verify client certificates against `client` from now on.
    pub(crate) fn install_client_auth(&self, client: &ClientAuth) -> Result<(), CertError> {
        self.config.store(Arc::new(build(&self.current, &self.alpn, Some(client), &self.tickets)?));
        Ok(())
    }

    /// The server side of a handshake on `io`: TCP in service, an in-memory pipe in the benches.
    pub(crate) async fn accept<S: AsyncRead + AsyncWrite + Unpin>(&self, io: S) -> std::io::Result<TlsStream<S>> {
        tokio_rustls::TlsAcceptor::from(self.config.load_full()).accept(io).await
    }
}

/// Resumption: stateless tickets (TLS 1.3 and 1.2), so that any number of clients resume, not
/// only the last 256 that rustls' session cache would remember.
fn build(current: &Arc<Current>, alpn: &[Vec<u8>], client: Option<&ClientAuth>, tickets: &Arc<dyn rustls::server::ProducesTickets>) -> Result<ServerConfig, CertError> {
    let builder = ServerConfig::builder_with_provider(crate::client::provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| CertError::Backend { backend: "rustls", why: e.to_string() })?;
    let builder = match client {
        None => builder.with_no_client_auth(),
        Some(client) => builder.with_client_cert_verifier(client.rustls_verifier()?),
    };
    let mut config = builder.with_cert_resolver(current.clone());
    config.alpn_protocols = alpn.to_vec();
    config.ticketer = tickets.clone();
    Ok(config)
}
