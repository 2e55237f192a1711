//! The backend-neutral acceptor: TCP in, an established TLS stream out.
//!
//! The accept loop holds an [`Acceptor`] and never learns which library is behind it; the
//! application reads and writes a [`ServerStream`]. Certificates are swapped with
//! [`Acceptor::install`], which takes effect at the next handshake, or looked up at each
//! handshake from files ([`Acceptor::per_handshake`]: the `reload` and `cached` sources).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::backend::{Backend, HTTP_ALPN};
use crate::certified::{CertError, CertifiedPair};
use crate::client_auth::ClientAuth;
use crate::file_source::FileSource;
use crate::openssl_acceptor::OpensslAcceptor;
use crate::per_handshake::PerHandshake;
use crate::source::Freshness;
use crate::rustls_acceptor::RustlsAcceptor;

/// How long a client may take to complete its handshake before the connection is dropped:
/// a peer that opens TCP and stays silent must not hold a task forever.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Accepts TLS connections with one backend. Cheap to clone; clones share the certificate.
#[derive(Clone)]
pub struct Acceptor {
    inner: Arc<Inner>,
    /// The presented certificate's notAfter (Unix seconds), for `/metrics`.
    not_after: Arc<std::sync::atomic::AtomicI64>,
}

fn unix_seconds(t: std::time::SystemTime) -> i64 {
    t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

enum Inner {
    Rustls(RustlsAcceptor),
    Openssl(OpensslAcceptor),
}

impl Acceptor {
    /// An acceptor presenting `pair`, offering ALPN `h2` then `http/1.1`.
    pub fn new(backend: Backend, pair: &CertifiedPair) -> Result<Acceptor, CertError> {
        Self::with_alpn(backend, pair, HTTP_ALPN)
    }

    /// An acceptor offering these ALPN protocols (most preferred first; empty for none).
    pub fn with_alpn(backend: Backend, pair: &CertifiedPair, alpn: &[&[u8]]) -> Result<Acceptor, CertError> {
        Self::with_client_auth(backend, pair, alpn, None)
    }

    /// An acceptor that also asks for client certificates, as `client` says (mTLS).
    pub fn with_client_auth(backend: Backend, pair: &CertifiedPair, alpn: &[&[u8]], client: Option<&ClientAuth>) -> Result<Acceptor, CertError> {
        let inner = match backend {
            Backend::Rustls => Inner::Rustls(RustlsAcceptor::new(pair, alpn, client)?),
            Backend::Openssl => Inner::Openssl(OpensslAcceptor::new(pair, alpn, client)?),
        };
        Ok(Acceptor { inner: Arc::new(inner), not_after: Arc::new(unix_seconds(pair.not_after()).into()) })
    }

    /// An acceptor whose handshakes read `source`'s certificate and key themselves, as
    /// `freshness` says (`reload`: every handshake; `cached`: once per TTL), keeping the last
    /// good pair when a read fails. The pair is read once now: a bad one is an error.
    /// `source`'s client-CA bundle is not read here; pass it as `client`.
    pub fn per_handshake(backend: Backend, source: &FileSource, freshness: Freshness, alpn: &[&[u8]], client: Option<&ClientAuth>) -> Result<Acceptor, CertError> {
        let not_after = Arc::new(std::sync::atomic::AtomicI64::new(0));
        let lookup = Arc::new(PerHandshake::new(source, freshness, backend, not_after.clone())?);
        let inner = match backend {
            Backend::Rustls => Inner::Rustls(RustlsAcceptor::per_handshake(lookup, alpn, client)?),
            Backend::Openssl => Inner::Openssl(OpensslAcceptor::per_handshake(lookup, alpn, client)?),
        };
        Ok(Acceptor { inner: Arc::new(inner), not_after })
    }

    /// Verifies client certificates against `client` at every handshake from now on.
    pub fn install_client_auth(&self, client: &ClientAuth) -> Result<(), CertError> {
        match &*self.inner {
            Inner::Rustls(a) => a.install_client_auth(client),
            Inner::Openssl(a) => a.install_client_auth(client),
        }
    }

    pub fn backend(&self) -> Backend {
        match *self.inner {
            Inner::Rustls(_) => Backend::Rustls,
            Inner::Openssl(_) => Backend::Openssl,
        }
    }

    /// Presents `pair` to every handshake from now on; open connections are not touched.
    /// Refused by a [`Acceptor::per_handshake`] acceptor, whose files are the authority.
    pub fn install(&self, pair: &CertifiedPair) -> Result<(), CertError> {
        match &*self.inner {
            Inner::Rustls(a) => a.install(pair)?,
            Inner::Openssl(a) => a.install(pair)?,
        }
        self.not_after.store(unix_seconds(pair.not_after()), std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Obtains the certificate the way a handshake does, and drops it: the unit of
    /// `signet bench tls lookup`. One atomic load for an installed pair; for a per-handshake
    /// source, its lookup (a read of the files, or the cached copy).
    pub fn lookup(&self) {
        match &*self.inner {
            Inner::Rustls(a) => a.lookup(),
            Inner::Openssl(a) => a.lookup(),
        }
    }

    /// When the certificate presented now expires (Unix seconds).
    pub fn certificate_not_after(&self) -> i64 {
        self.not_after.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Runs the server side of a handshake on `tcp`, within [`HANDSHAKE_TIMEOUT`].
    pub async fn accept(&self, tcp: TcpStream) -> io::Result<ServerStream> {
        let handshake = async {
            Ok(match &*self.inner {
                Inner::Rustls(a) => ServerStream::Rustls(Box::new(a.accept(tcp).await?)),
                Inner::Openssl(a) => ServerStream::Openssl(Box::new(a.accept(tcp).await?)),
            })
        };
        tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "the client did not complete the TLS handshake in time"))?
    }
}

/// What a handshake agreed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// `TLSv1.3` or `TLSv1.2`.
    pub version: String,
    /// The IANA name, e.g. `TLS_AES_256_GCM_SHA384`, whichever backend negotiated it.
    pub cipher: String,
    /// The ALPN protocol, if one was agreed.
    pub alpn: Option<Vec<u8>>,
}

/// An established server-side TLS connection. An enum rather than a trait object: each
/// read and write is a direct call into the backend's stream.
pub enum ServerStream {
    Rustls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
    Openssl(Box<tokio_openssl::SslStream<TcpStream>>),
}

impl ServerStream {
    pub fn negotiated(&self) -> Negotiated {
        match self {
            ServerStream::Rustls(s) => {
                let (_, conn) = s.get_ref();
                Negotiated {
                    version: match conn.protocol_version() {
                        Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3".into(),
                        Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2".into(),
                        other => format!("{other:?}"),
                    },
                    cipher: conn.negotiated_cipher_suite().map_or("unknown".into(), |c| iana_name(c.suite())),
                    alpn: conn.alpn_protocol().map(<[u8]>::to_vec),
                }
            }
            ServerStream::Openssl(s) => {
                let ssl = s.ssl();
                Negotiated {
                    version: ssl.version_str().to_string(),
                    cipher: ssl
                        .current_cipher()
                        .map_or("unknown".into(), |c| c.standard_name().unwrap_or(c.name()).to_string()),
                    alpn: ssl.selected_alpn_protocol().map(<[u8]>::to_vec),
                }
            }
        }
    }

    /// True for TLS 1.3 (the only other version either backend accepts is 1.2).
    pub fn is_tls13(&self) -> bool {
        match self {
            ServerStream::Rustls(s) => s.get_ref().1.protocol_version() == Some(rustls::ProtocolVersion::TLSv1_3),
            ServerStream::Openssl(s) => s.ssl().version2() == Some(openssl::ssl::SslVersion::TLS1_3),
        }
    }

    /// The client's certificate (its leaf, DER), verified during the handshake; none when the
    /// listener asks for none or the client sent none (optional mode).
    pub fn peer_certificate(&self) -> Option<Vec<u8>> {
        match self {
            ServerStream::Rustls(s) => s.get_ref().1.peer_certificates().and_then(|c| c.first()).map(|c| c.to_vec()),
            ServerStream::Openssl(s) => s.ssl().peer_certificate().and_then(|c| c.to_der().ok()),
        }
    }

    /// The TCP connection underneath.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            ServerStream::Rustls(s) => s.get_ref().0,
            ServerStream::Openssl(s) => s.get_ref(),
        }
    }
}

/// rustls spells suites `TLS13_AES_256_GCM_SHA384`; the IANA (and OpenSSL) name of a
/// TLS 1.3 suite is `TLS_AES_256_GCM_SHA384`. One spelling for both backends.
pub fn iana_name(suite: rustls::CipherSuite) -> String {
    let name = format!("{suite:?}");
    match name.strip_prefix("TLS13_") {
        Some(rest) => format!("TLS_{rest}"),
        None => name,
    }
}

macro_rules! each_stream {
    ($self:ident, $s:ident => $e:expr) => {
        match $self.get_mut() {
            ServerStream::Rustls($s) => {
                let $s = Pin::new($s.as_mut());
                $e
            }
            ServerStream::Openssl($s) => {
                let $s = Pin::new($s.as_mut());
                $e
            }
        }
    };
}

impl AsyncRead for ServerStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        each_stream!(self, s => s.poll_read(cx, buf))
    }
}

impl AsyncWrite for ServerStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        each_stream!(self, s => s.poll_write(cx, buf))
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each_stream!(self, s => s.poll_flush(cx))
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each_stream!(self, s => s.poll_shutdown(cx))
    }
    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        each_stream!(self, s => s.poll_write_vectored(cx, bufs))
    }
    fn is_write_vectored(&self) -> bool {
        match self {
            ServerStream::Rustls(s) => s.is_write_vectored(),
            ServerStream::Openssl(s) => s.is_write_vectored(),
        }
    }
}
