//! Opening a connection to the target: TCP, then TLS for an `https://` target.
//!
//! The dialer times each setup (TCP connect, TLS handshake) so that new-connection runs can
//! report connection setup beside request latency, and it keeps what the first TLS handshake
//! negotiated (version, cipher suite, ALPN) for the result. TLS is rustls with the aws-lc-rs
//! provider; trust is a CA file or the platform's roots, never "accept anything".

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;

use http::Uri;
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use serde::{Deserialize, Serialize};
use signet_tls::{Trust, TrustError};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::error::ConnError;

/// Why a dialer for a target cannot be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DialError {
    #[error("target {target} must be an http:// or https:// URL")]
    Scheme { target: Uri },
    #[error("target {target} has no host")]
    NoHost { target: Uri },
    #[error("target host {host:?} is not a DNS name or IP address: {source}")]
    ServerName { host: String, source: rustls::pki_types::InvalidDnsNameError },
    /// The CA file given with `--ca-file` is unusable.
    #[error("--ca-file: {0}")]
    CaFile(#[source] TrustError),
    /// The platform's roots are unusable, and no CA file was given.
    #[error("{0}; or give the target's CA with --ca-file PEM")]
    PlatformRoots(#[source] TrustError),
}

/// What a TLS handshake negotiated, as the result JSON records it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TlsInfo {
    /// `TLSv1.3` or `TLSv1.2`.
    pub version: String,
    /// The IANA name as rustls spells it, e.g. `TLS13_AES_256_GCM_SHA384`.
    pub cipher: String,
    /// The application protocol agreed by ALPN (`h2`, `http/1.1`), if any.
    pub alpn: Option<String>,
}

/// How long one connection took to set up, in µs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setup {
    /// From the start of the TCP connect until the connection can carry a request.
    pub total_us: u64,
    /// The TLS handshake alone (https only).
    pub tls_us: Option<u64>,
}

/// One connection, plain or TLS. An enum rather than a boxed trait object: the plain arm is
/// the default path and stays a direct call.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }
    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }
}

/// The TLS side of a dialer.
struct TlsSide {
    connector: TlsConnector,
    name: ServerName<'static>,
    /// Where trust came from, for error messages: `--ca-file PATH` or the platform's roots.
    trust: String,
    /// The ALPN protocol the caller needs the server to agree to (`h2`), if any.
    require_alpn: Option<&'static [u8]>,
    /// The offered ALPN protocols, for error messages.
    offered: String,
}

/// Opens connections to one target.
pub struct Dialer {
    /// `host:port`, with the scheme's default port filled in.
    addr: String,
    tls: Option<TlsSide>,
    negotiated: OnceLock<TlsInfo>,
}

/// The trust and ALPN of a TLS dialer.
pub struct TlsSpec<'a> {
    pub ca_file: Option<&'a Path>,
    /// Offered in this order; when `require` is set, the server must pick it.
    pub alpn: &'static [&'static [u8]],
    pub require: Option<&'static [u8]>,
}

impl Dialer {
    /// A dialer for a plain `http://` target.
    pub fn plain(target: &Uri) -> Dialer {
        Dialer { addr: socket_addr(target, 80), tls: None, negotiated: OnceLock::new() }
    }

    /// A dialer for `target`: plain for `http://`, TLS for `https://` (then `tls` is used).
    pub fn new(target: &Uri, tls: &TlsSpec<'_>) -> Result<Dialer, DialError> {
        match target.scheme_str() {
            Some("http") => Ok(Dialer::plain(target)),
            Some("https") => {
                let host = target.host().ok_or_else(|| DialError::NoHost { target: target.clone() })?;
                let host = host.trim_start_matches('[').trim_end_matches(']');
                let name = ServerName::try_from(host.to_string())
                    .map_err(|source| DialError::ServerName { host: host.to_string(), source })?;
                let mut config = client_config(tls.ca_file)?;
                config.alpn_protocols = tls.alpn.iter().map(|p| p.to_vec()).collect();
                let trust = match tls.ca_file {
                    Some(p) => format!("--ca-file {}", p.display()),
                    None => "the platform's root certificates".to_string(),
                };
                let offered = tls.alpn.iter().map(|p| String::from_utf8_lossy(p)).collect::<Vec<_>>().join(", ");
                let side =
                    TlsSide { connector: TlsConnector::from(Arc::new(config)), name, trust, require_alpn: tls.require, offered };
                Ok(Dialer { addr: socket_addr(target, 443), tls: Some(side), negotiated: OnceLock::new() })
            }
            _ => Err(DialError::Scheme { target: target.clone() }),
        }
    }

    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// What the first TLS handshake negotiated; `None` for plain HTTP.
    pub fn tls_info(&self) -> Option<TlsInfo> {
        self.negotiated.get().cloned()
    }

    /// Opens one connection: TCP (no Nagle: requests are small and latency is what we
    /// measure), then the TLS handshake for https.
    pub async fn connect(&self) -> Result<(Stream, Setup), ConnError> {
        let started = Instant::now();
        let tcp = TcpStream::connect(&self.addr).await.map_err(ConnError::Connect)?;
        tcp.set_nodelay(true).map_err(ConnError::Connect)?;
        let Some(tls) = &self.tls else {
            return Ok((Stream::Plain(tcp), Setup { total_us: micros(started), tls_us: None }));
        };
        let handshake = Instant::now();
        let stream = tls.connector.connect(tls.name.clone(), tcp).await.map_err(|e| self.handshake_error(e))?;
        let tls_us = micros(handshake);
        let (_, session) = stream.get_ref();
        let alpn = session.alpn_protocol();
        if let Some(required) = tls.require_alpn {
            if alpn != Some(required) {
                return Err(ConnError::Tls(format!(
                    "the server at {} did not agree to {} by ALPN (it chose {}); it may not speak HTTP/2 over TLS, try --http 1.1",
                    self.addr,
                    String::from_utf8_lossy(required),
                    alpn.map_or("nothing".into(), |a| format!("{:?}", String::from_utf8_lossy(a))),
                )));
            }
        }
        if self.negotiated.get().is_none() {
            let info = TlsInfo {
                version: session.protocol_version().map_or("unknown".into(), |v| version_name(v).to_string()),
                cipher: session.negotiated_cipher_suite().map_or("unknown".into(), |c| format!("{:?}", c.suite())),
                alpn: alpn.map(|a| String::from_utf8_lossy(a).into_owned()),
            };
            let _ = self.negotiated.set(info);
        }
        Ok((Stream::Tls(Box::new(stream)), Setup { total_us: micros(started), tls_us: Some(tls_us) }))
    }

    /// A handshake failure, saying plainly when the server's certificate was not trusted.
    fn handshake_error(&self, e: io::Error) -> ConnError {
        let tls = self.tls.as_ref().expect("TLS dialer");
        let rustls_error = e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>());
        match rustls_error {
            Some(rustls::Error::InvalidCertificate(why)) => ConnError::Tls(format!(
                "TLS certificate verification failed for {} ({why:?}): the server's certificate is not trusted by {}",
                self.addr, tls.trust
            )),
            Some(rustls::Error::AlertReceived(rustls::AlertDescription::NoApplicationProtocol)) => ConnError::Tls(format!(
                "the server at {} refused the offered ALPN protocols ({}){}",
                self.addr,
                tls.offered,
                if tls.require_alpn.is_some() { "; it may not speak HTTP/2 over TLS, try --http 1.1" } else { "" }
            )),
            Some(other) => ConnError::Tls(format!("TLS handshake with {} failed: {other}", self.addr)),
            None => ConnError::Tls(format!("TLS handshake with {} failed: {e}", self.addr)),
        }
    }
}

fn micros(since: Instant) -> u64 {
    since.elapsed().as_micros().max(1) as u64
}

fn version_name(v: rustls::ProtocolVersion) -> &'static str {
    match v {
        rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3",
        rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2",
        _ => "other",
    }
}

/// `host:port` of a URL, with `default_port` when it names none.
fn socket_addr(target: &Uri, default_port: u16) -> String {
    let host = target.host().unwrap_or("");
    format!("{host}:{}", target.port_u16().unwrap_or(default_port))
}

/// A rustls client configuration on aws-lc-rs (`signet-tls`) trusting `ca_file`, or the
/// platform's roots.
pub fn client_config(ca_file: Option<&Path>) -> Result<ClientConfig, DialError> {
    let trust = ca_file.map_or(Trust::Platform, |p| Trust::PemFile(p.to_path_buf()));
    let config = signet_tls::client_config(&trust).map_err(|e| match ca_file {
        Some(_) => DialError::CaFile(e),
        None => DialError::PlatformRoots(e),
    })?;
    // A copy, to set this dialer's ALPN protocols on it.
    Ok(ClientConfig::clone(&config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_ports_follow_the_scheme() {
        assert_eq!(socket_addr(&"http://example.test/x".parse().unwrap(), 80), "example.test:80");
        assert_eq!(socket_addr(&"https://127.0.0.1:8443/".parse().unwrap(), 443), "127.0.0.1:8443");
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused_with_what_was_expected() {
        let dir = std::env::temp_dir().join(format!("signet-dial-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("empty.pem");
        std::fs::write(&path, "not a certificate\n").unwrap();
        let err = client_config(Some(&path)).unwrap_err().to_string();
        assert!(err.starts_with("--ca-file: CA bundle ") && err.ends_with("holds no CERTIFICATE block; expected PEM CA certificates"), "{err}");
        let missing = client_config(Some(&dir.join("absent.pem"))).unwrap_err().to_string();
        assert!(missing.contains("absent.pem"), "{missing}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn other_schemes_are_refused() {
        let spec = TlsSpec { ca_file: None, alpn: &[], require: None };
        let err = Dialer::new(&"ftp://127.0.0.1/".parse().unwrap(), &spec).err().unwrap().to_string();
        assert!(err.contains("must be an http:// or https:// URL"), "{err}");
    }
}
