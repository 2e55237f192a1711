//! How the generator talks to the target: HTTP/1.1 or HTTP/2, plain or TLS (by the target's
//! scheme), keep-alive or a new connection per request. It makes the clients that the
//! load workers and the transactions send through.

use std::path::PathBuf;
use std::sync::Arc;

use http::Uri;
use tokio::io::AsyncWriteExt;

use crate::conn::{Conn, ConnError, Reply};
use crate::dial::{DialError, Dialer, Setup, TlsSpec};
use crate::h2::{H2Client, Shared};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpVersion {
    Http1,
    Http2,
}

impl std::str::FromStr for HttpVersion {
    type Err = UnknownHttpVersion;
    fn from_str(s: &str) -> Result<Self, UnknownHttpVersion> {
        match s {
            "1.1" => Ok(HttpVersion::Http1),
            "2" => Ok(HttpVersion::Http2),
            other => Err(UnknownHttpVersion(other.to_string())),
        }
    }
}

/// `--http` names no version the generator speaks; the name given.
#[derive(Debug, thiserror::Error)]
#[error("unknown HTTP version {0:?}; expected 1.1 or 2")]
pub struct UnknownHttpVersion(pub String);

/// A transport that cannot work against the target, or with the connection count.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    #[error(transparent)]
    Dial(#[from] DialError),
    #[error("--ca-file {} needs an https:// target, got {target}", .ca_file.display())]
    CaFileNeedsHttps { ca_file: PathBuf, target: Uri },
    #[error("streams must be 1..={MAX_STREAMS}, got {0}")]
    Streams(usize),
    #[error("connections × streams must be at most {MAX_IN_FLIGHT}, got {connections} × {streams}")]
    InFlight { connections: usize, streams: usize },
}

impl HttpVersion {
    pub fn name(self) -> &'static str {
        match self {
            HttpVersion::Http1 => "1.1",
            HttpVersion::Http2 => "2",
        }
    }
}

/// The most HTTP/2 streams one connection may carry at once (`--streams`).
pub const MAX_STREAMS: usize = 1000;
/// The most concurrent requests (connections × streams) of one run.
pub const MAX_IN_FLIGHT: usize = 65_536;

#[derive(Debug, Clone)]
pub struct Transport {
    pub http: HttpVersion,
    /// HTTP/2 keep-alive: concurrent streams per connection.
    pub streams: usize,
    /// Open a new connection for every request and close it after.
    pub new_connection: bool,
    /// PEM CA certificates to trust for an `https://` target, instead of the platform's roots.
    pub ca_file: Option<PathBuf>,
}

impl Default for Transport {
    fn default() -> Transport {
        Transport { http: HttpVersion::Http1, streams: 100, new_connection: false, ca_file: None }
    }
}

/// Dialers for a run: the workers', and an HTTP/1.1 one for the requests made before the
/// clock starts (seeding, reading the tree size), which go through the cheap client.
pub struct Dialers {
    pub workers: Arc<Dialer>,
    pub setup: Arc<Dialer>,
}

impl Transport {
    /// Checks the transport against the target and connection count; the message says
    /// what was wrong and what was expected.
    pub fn check(&self, target: &Uri, connections: usize) -> Result<(), TransportError> {
        let tls = match target.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(DialError::Scheme { target: target.clone() }.into()),
        };
        if target.authority().is_none() {
            return Err(DialError::NoHost { target: target.clone() }.into());
        }
        if let (Some(ca), false) = (&self.ca_file, tls) {
            return Err(TransportError::CaFileNeedsHttps { ca_file: ca.clone(), target: target.clone() });
        }
        if self.http == HttpVersion::Http2 && !self.new_connection {
            if !(1..=MAX_STREAMS).contains(&self.streams) {
                return Err(TransportError::Streams(self.streams));
            }
            if connections.saturating_mul(self.streams) > MAX_IN_FLIGHT {
                return Err(TransportError::InFlight { connections, streams: self.streams });
            }
        }
        Ok(())
    }

    pub fn dialers(&self, target: &Uri) -> Result<Dialers, TransportError> {
        let ca_file = self.ca_file.as_deref();
        let h1 = TlsSpec { ca_file, alpn: &[b"http/1.1"], require: None };
        let setup = Arc::new(Dialer::new(target, &h1)?);
        let workers = match self.http {
            HttpVersion::Http1 => setup.clone(),
            HttpVersion::Http2 => Arc::new(Dialer::new(target, &TlsSpec { ca_file, alpn: &[b"h2"], require: Some(b"h2") })?),
        };
        Ok(Dialers { workers, setup })
    }

    /// The workers' clients, connected before the clock starts. Keep-alive: one per
    /// connection (HTTP/1.1), or `streams` per connection (HTTP/2). New-connection: one per
    /// connection slot, after one probe connection that checks the target (and TLS) early.
    pub async fn clients(&self, dialer: &Arc<Dialer>, connections: usize) -> Result<Vec<Client>, ConnError> {
        let mut clients = Vec::new();
        if self.new_connection {
            let (mut probe, _) = dialer.connect().await?;
            let _ = probe.shutdown().await;
            for _ in 0..connections {
                clients.push(match self.http {
                    HttpVersion::Http1 => Client::H1(Conn::fresh(dialer)),
                    HttpVersion::Http2 => Client::H2(H2Client::fresh(dialer)),
                });
            }
            return Ok(clients);
        }
        match self.http {
            HttpVersion::Http1 => {
                for _ in 0..connections {
                    let mut c = Conn::new(dialer);
                    c.warm_up().await?;
                    clients.push(Client::H1(c));
                }
            }
            HttpVersion::Http2 => {
                let slots: Vec<Arc<Shared>> = (0..connections).map(|_| Shared::new(dialer)).collect();
                for slot in &slots {
                    H2Client::shared(slot).warm_up().await?;
                }
                // Client j streams on connection j mod C, so arrivals spread over connections.
                for j in 0..connections * self.streams {
                    clients.push(Client::H2(H2Client::shared(&slots[j % connections])));
                }
            }
        }
        for c in &mut clients {
            c.drain_setups().for_each(drop);
        }
        Ok(clients)
    }
}

/// One client of a worker: sends one request at a time.
pub enum Client {
    H1(Conn),
    H2(H2Client),
}

impl Client {
    /// Sends one serialized request and reads the whole response, dropping the body.
    pub async fn send(&mut self, request: &[u8]) -> Result<Reply, ConnError> {
        match self {
            Client::H1(c) => c.send(request).await,
            Client::H2(c) => c.send(request).await,
        }
    }

    /// Sends one request and returns the status and the body.
    pub async fn fetch(&mut self, request: &[u8]) -> Result<(u16, Vec<u8>), ConnError> {
        match self {
            Client::H1(c) => c.fetch(request).await,
            Client::H2(c) => c.fetch(request).await,
        }
    }

    /// After a timeout: HTTP/1.1 drops its connection, whose state is unknown; HTTP/2 has
    /// already reset the stream.
    pub fn reset(&mut self) {
        match self {
            Client::H1(c) => c.reset(),
            Client::H2(c) => c.reset(),
        }
    }

    /// The setups of the connections this client opened since the last call.
    pub fn drain_setups(&mut self) -> std::vec::Drain<'_, Setup> {
        match self {
            Client::H1(c) => c.drain_setups(),
            Client::H2(c) => c.drain_setups(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combinations_that_cannot_work_are_refused() {
        let http: Uri = "http://127.0.0.1:1/".parse().unwrap();
        let https: Uri = "https://127.0.0.1:1/".parse().unwrap();
        let with_ca = Transport { ca_file: Some("ca.pem".into()), ..Transport::default() };
        assert_eq!(with_ca.check(&http, 1).unwrap_err().to_string(), "--ca-file ca.pem needs an https:// target, got http://127.0.0.1:1/");
        assert!(with_ca.check(&https, 1).is_ok());
        let h2 = Transport { http: HttpVersion::Http2, streams: 0, ..Transport::default() };
        assert!(h2.check(&http, 1).unwrap_err().to_string().contains("streams must be 1..=1000"));
        let wide = Transport { http: HttpVersion::Http2, streams: 1000, ..Transport::default() };
        assert!(wide.check(&http, 100).unwrap_err().to_string().contains("at most 65536, got 100 × 1000"));
        let ftp: Uri = "ftp://127.0.0.1/".parse().unwrap();
        assert!(Transport::default().check(&ftp, 1).unwrap_err().to_string().contains("must be an http:// or https:// URL"));
        assert_eq!("3".parse::<HttpVersion>().unwrap_err().to_string(), "unknown HTTP version \"3\"; expected 1.1 or 2");
    }
}
