//! The OpenSSL backend: an `SslAcceptor` (Mozilla's "intermediate" profile: TLS 1.2 and 1.3)
//! per certificate (and client-CA bundle), behind an atomic pointer.
//!
//! OpenSSL binds the certificate to the `SSL_CTX`, so rotation builds a new context and
//! swaps it in; each handshake takes the current context with one atomic load when it
//! creates its `SSL`. A connection keeps a reference to the context it started with, so
//! open connections are untouched by a swap.
//!
//! With a per-handshake source (`reload`, `cached`) the context holds no certificate: its
//! servername callback, which OpenSSL calls for every ClientHello (with or without SNI),
//! looks the pair up and sets it on that connection's `SSL`.

use std::pin::Pin;
use std::sync::Arc;

use arc_swap::ArcSwap;
use openssl::ssl::{AlpnError, SniError, Ssl, SslAcceptor, SslAlert, SslMethod, SslRef, SslVerifyMode};
use openssl::x509::X509;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_openssl::SslStream;

use crate::certified::{CertError, CertifiedPair};
use crate::client_auth::{ClientAuth, ClientAuthMode};
use crate::openssl_pair::OpensslPair;
use crate::per_handshake::PerHandshake;

pub(crate) struct OpensslAcceptor {
    current: ArcSwap<SslAcceptor>,
    /// ALPN in wire format (length-prefixed names), the form OpenSSL selects from.
    alpn_wire: Arc<Vec<u8>>,
    /// What the context is built from, for a rebuild when either the certificate or the
    /// client CAs change (OpenSSL binds both to the context).
    inputs: parking_lot::Mutex<Inputs>,
    /// The per-handshake source, if any (also in the context's callback), for [`Self::lookup`].
    per_handshake: Option<Arc<PerHandshake>>,
}

struct Inputs {
    certificate: Certificate,
    client: Option<ClientAuth>,
}

/// Where a handshake's certificate comes from.
#[derive(Clone)]
enum Certificate {
    /// Bound to the context (`file`, `watch`): installing another builds a new context.
    Installed(Arc<OpensslPair>),
    /// Looked up by the servername callback at each handshake (`reload`, `cached`).
    PerHandshake(Arc<PerHandshake>),
}

impl OpensslAcceptor {
    pub(crate) fn new(pair: &CertifiedPair, alpn: &[&[u8]], client: Option<&ClientAuth>) -> Result<OpensslAcceptor, CertError> {
        Self::with(Certificate::Installed(Arc::new(OpensslPair::new(pair)?)), alpn, client)
    }

    /// An acceptor whose handshakes look their certificate up in `source`.
    pub(crate) fn per_handshake(source: Arc<PerHandshake>, alpn: &[&[u8]], client: Option<&ClientAuth>) -> Result<OpensslAcceptor, CertError> {
        Self::with(Certificate::PerHandshake(source), alpn, client)
    }

    fn with(certificate: Certificate, alpn: &[&[u8]], client: Option<&ClientAuth>) -> Result<OpensslAcceptor, CertError> {
        let mut alpn_wire = Vec::new();
        for p in alpn {
            alpn_wire.push(p.len() as u8);
            alpn_wire.extend_from_slice(p);
        }
        let alpn_wire = Arc::new(alpn_wire);
        let per_handshake = match &certificate {
            Certificate::PerHandshake(source) => Some(source.clone()),
            Certificate::Installed(_) => None,
        };
        let inputs = Inputs { certificate, client: client.cloned() };
        let first = build(&inputs, &alpn_wire)?;
        Ok(OpensslAcceptor { current: ArcSwap::from_pointee(first), alpn_wire, inputs: parking_lot::Mutex::new(inputs), per_handshake })
    }

    pub(crate) fn install(&self, pair: &CertifiedPair) -> Result<(), CertError> {
        let mut inputs = self.inputs.lock();
        if let Certificate::PerHandshake(_) = inputs.certificate {
            return Err(crate::per_handshake::install_refused("openssl"));
        }
        let next = Inputs { certificate: Certificate::Installed(Arc::new(OpensslPair::new(pair)?)), client: inputs.client.clone() };
        self.current.store(Arc::new(build(&next, &self.alpn_wire)?));
        *inputs = next;
        Ok(())
    }

    pub(crate) fn install_client_auth(&self, client: &ClientAuth) -> Result<(), CertError> {
        let mut inputs = self.inputs.lock();
        let next = Inputs { certificate: inputs.certificate.clone(), client: Some(client.clone()) };
        self.current.store(Arc::new(build(&next, &self.alpn_wire)?));
        *inputs = next;
        Ok(())
    }

    /// What a handshake does to obtain its certificate, without the handshake (the lookup
    /// benchmark): the current context, or the per-handshake source's pair.
    pub(crate) fn lookup(&self) {
        match &self.per_handshake {
            Some(source) => source.lookup(|loaded| {
                std::hint::black_box(loaded);
            }),
            None => {
                std::hint::black_box(&*self.current.load());
            }
        }
    }

    /// The server side of a handshake on `io`: TCP in service, an in-memory pipe in the benches.
    pub(crate) async fn accept<S: AsyncRead + AsyncWrite + Unpin>(&self, io: S) -> std::io::Result<SslStream<S>> {
        // The guard is dropped before the handshake awaits: only the `SSL` keeps the context.
        let ssl = Ssl::new(self.current.load().context()).map_err(std::io::Error::other)?;
        let mut stream = SslStream::new(ssl, io).map_err(std::io::Error::other)?;
        Pin::new(&mut stream).accept().await.map_err(|e| match e.into_io_error() {
            Ok(io) => io,
            Err(ssl) => std::io::Error::new(std::io::ErrorKind::InvalidData, ssl.to_string()),
        })?;
        Ok(stream)
    }
}

/// A context presenting the inputs' certificate, refusing anything older than TLS 1.2, and
/// verifying client certificates against their CAs when they name some.
fn build(inputs: &Inputs, alpn_wire: &Arc<Vec<u8>>) -> Result<SslAcceptor, CertError> {
    let refused = |e: openssl::error::ErrorStack| CertError::Backend { backend: "openssl", why: e.to_string() };
    let mut builder = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server()).map_err(refused)?;
    match &inputs.certificate {
        Certificate::Installed(pair) => {
            builder.set_certificate(&pair.leaf).map_err(refused)?;
            for extra in &pair.chain {
                builder.add_extra_chain_cert(extra.clone()).map_err(refused)?;
            }
            builder.set_private_key(&pair.key).map_err(refused)?;
            builder.check_private_key().map_err(refused)?;
        }
        // No certificate on the context: each connection gets the one its lookup returns,
        // so that no other key type's slot is left behind to be chosen instead.
        Certificate::PerHandshake(source) => {
            let source = source.clone();
            builder.set_servername_callback(move |ssl: &mut SslRef, alert: &mut SslAlert| {
                // A second ClientHello (after a HelloRetryRequest) finds its pair set already;
                // setting it again would repeat the chain.
                if ssl.certificate().is_some() {
                    return Ok(());
                }
                source.lookup(|loaded| match &loaded.openssl {
                    Some(pair) => pair.apply(ssl).map_err(|e| {
                        tracing::warn!("OpenSSL refused the looked-up certificate {}: {e}", loaded.pair.origin());
                        *alert = SslAlert::INTERNAL_ERROR;
                        SniError::ALERT_FATAL
                    }),
                    None => {
                        *alert = SslAlert::INTERNAL_ERROR;
                        Err(SniError::ALERT_FATAL)
                    }
                })
            });
        }
    }
    if let Some(client) = &inputs.client {
        let mut names = openssl::stack::Stack::new().map_err(refused)?;
        for ca in client.cas() {
            let ca = X509::from_der(ca).map_err(refused)?;
            names.push(ca.subject_name().to_owned().map_err(refused)?).map_err(refused)?;
            builder.cert_store_mut().add_cert(ca).map_err(refused)?;
        }
        // The CertificateRequest names the CAs, as rustls's does.
        builder.set_client_ca_list(names);
        let mode = match client.mode {
            ClientAuthMode::Optional => SslVerifyMode::PEER,
            ClientAuthMode::Required => SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT,
        };
        builder.set_verify(mode);
        // Resumed sessions keep the verified peer; OpenSSL refuses to resume without a context id.
        builder.set_session_id_context(b"signet").map_err(refused)?;
    }
    let ours = alpn_wire.clone();
    builder.set_alpn_select_callback(move |_, offered| select_alpn(&ours, offered));
    Ok(builder.build())
}

/// As rustls does: the first of our protocols that the client offered (server preference),
/// and a fatal no_application_protocol alert when the client offered only others. Both lists
/// are in wire format; the answer must borrow from the client's.
fn select_alpn<'a>(ours: &[u8], offered: &'a [u8]) -> Result<&'a [u8], AlpnError> {
    let client: Vec<&'a [u8]> = wire_names(offered).collect();
    wire_names(ours)
        .find_map(|want| client.iter().find(|name| **name == want).copied())
        .ok_or(AlpnError::ALERT_FATAL)
}

/// The names of a length-prefixed ALPN list; a truncated tail is ignored.
fn wire_names(mut wire: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        let (&len, rest) = wire.split_first()?;
        let name = rest.get(..len as usize)?;
        wire = &rest[len as usize..];
        Some(name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alpn_prefers_the_servers_order_and_refuses_strangers() {
        let ours = b"\x02h2\x08http/1.1";
        assert_eq!(select_alpn(ours, b"\x08http/1.1\x02h2").unwrap(), b"h2");
        assert_eq!(select_alpn(ours, b"\x06spdy/3\x08http/1.1").unwrap(), b"http/1.1");
        assert!(select_alpn(ours, b"\x06spdy/3").is_err());
        assert!(select_alpn(ours, b"\x09http/1.1").is_err(), "a truncated list matches nothing");
    }
}
