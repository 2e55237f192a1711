//! The measuring client of `signet bench tls`: rustls on aws-lc-rs, the same client for
//! every server, so that differences are the servers'.
//!
//! Handshakes are full handshakes: client-side resumption is off, or every connection after
//! the first would resume and measure something else. A handshake is timed from the first
//! ClientHello byte to the client's handshake completion; the TCP connect is not included.
//! Resumed handshakes are measured apart ([`Client::resumed`]), with a second config that
//! keeps the server's tickets, and each is checked to have resumed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::servers::Method;
use crate::error::BenchError;

/// What a handshake agreed on, as the client saw it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Agreed {
    pub version: String,
    pub cipher: String,
}

pub struct Client {
    connector: tokio_rustls::TlsConnector,
    /// The same config, for connectors that keep session tickets ([`Client::resumer`]).
    resuming: ClientConfig,
    name: ServerName<'static>,
    method: Method,
}

/// Per-message figures of one payload size over one connection.
#[derive(Debug, Clone, Copy)]
pub struct PayloadRun {
    pub messages: usize,
    pub elapsed: Duration,
    pub median_us: f64,
    pub p99_us: f64,
}

impl PayloadRun {
    /// The figures of `latencies` (ns, in any order), measured over `elapsed`.
    fn of(mut latencies: Vec<u64>, elapsed: Duration) -> PayloadRun {
        latencies.sort_unstable();
        PayloadRun {
            messages: latencies.len(),
            elapsed,
            median_us: quantile(&latencies, 0.5) / 1e3,
            p99_us: quantile(&latencies, 0.99) / 1e3,
        }
    }
}

impl Client {
    pub fn new(mut config: ClientConfig, server_name: &str, method: Method) -> Result<Client, BenchError> {
        let mut resuming = config.clone();
        // HTTP/1.1 for GETs (both signet's server and nginx speak it; one request at a time
        // is what per-message latency means); no ALPN for the echo.
        config.alpn_protocols = match method {
            Method::Get => vec![b"http/1.1".to_vec()],
            Method::Echo => Vec::new(),
        };
        let name = ServerName::try_from(server_name.to_string())
            .map_err(|e| BenchError::Usage(format!("--server-name {server_name:?}: {e}")))?;
        resuming.alpn_protocols = config.alpn_protocols.clone();
        config.resumption = rustls::client::Resumption::disabled();
        Ok(Client {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
            resuming,
            name,
            method,
        })
    }

    /// A connector that keeps the tickets it is given, in a cache of its own: one per server,
    /// since they all answer to the same name, and one server's ticket means nothing to another.
    pub fn resumer(&self) -> tokio_rustls::TlsConnector {
        let mut config = self.resuming.clone();
        config.resumption = rustls::client::Resumption::in_memory_sessions(64);
        tokio_rustls::TlsConnector::from(Arc::new(config))
    }

    /// One new connection through `resumer` that resumes the session of an earlier one from its ticket: the
    /// handshake's duration. Then one 1-byte message, which also takes in the server's new
    /// tickets for the next connection (TLS 1.3 tickets are used once). With `check`, a
    /// handshake that did not resume is an error; the first, which has no ticket, is not checked.
    pub async fn resumed(&self, resumer: &tokio_rustls::TlsConnector, peer: &str, addr: SocketAddr, check: bool) -> Result<Duration, BenchError> {
        let io = |what| move |source| BenchError::Io { peer: peer.into(), what, source };
        let tcp = TcpStream::connect(addr).await.map_err(io("connect"))?;
        tcp.set_nodelay(true).map_err(io("connect"))?;
        let started = Instant::now();
        let mut tls = resumer
            .connect(self.name.clone(), tcp)
            .await
            .map_err(|e| BenchError::Handshake { peer: peer.into(), why: e.to_string() })?;
        let took = started.elapsed();
        if check && tls.get_ref().1.handshake_kind() != Some(rustls::HandshakeKind::Resumed) {
            return Err(BenchError::Protocol { peer: peer.into(), why: "a handshake did not resume: the server's tickets were not accepted".into() });
        }
        Exchange::new(self.method, 1, self.name_str()).once(&mut tls, peer).await?;
        let _ = tls.shutdown().await;
        Ok(took)
    }

    /// One new connection; returns the handshake's duration.
    pub async fn handshake(&self, peer: &str, addr: SocketAddr) -> Result<(Duration, TlsStream<TcpStream>), BenchError> {
        let tcp = TcpStream::connect(addr).await.map_err(|e| BenchError::Io { peer: peer.into(), what: "connect", source: e })?;
        tcp.set_nodelay(true).map_err(|e| BenchError::Io { peer: peer.into(), what: "connect", source: e })?;
        let started = Instant::now();
        let tls = self
            .connector
            .connect(self.name.clone(), tcp)
            .await
            .map_err(|e| BenchError::Handshake { peer: peer.into(), why: e.to_string() })?;
        Ok((started.elapsed(), tls))
    }

    pub fn agreed(tls: &TlsStream<TcpStream>) -> Agreed {
        let conn = tls.get_ref().1;
        Agreed {
            version: match conn.protocol_version() {
                Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3".into(),
                Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2".into(),
                other => format!("{other:?}"),
            },
            cipher: conn.negotiated_cipher_suite().map_or("unknown".into(), |c| signet_tls::acceptor::iana_name(c.suite())),
        }
    }

    /// Messages of `size` bytes over one connection, one at a time, for about `budget`
    /// (at most `max_messages`), after a short warm-up.
    pub async fn payload(
        &self,
        peer: &str,
        addr: SocketAddr,
        size: usize,
        budget: Duration,
        max_messages: usize,
    ) -> Result<PayloadRun, BenchError> {
        let (_, mut tls) = self.handshake(peer, addr).await?;
        let mut exchange = Exchange::new(self.method, size, self.name_str());
        for _ in 0..16 {
            exchange.once(&mut tls, peer).await?;
        }
        let mut latencies = Vec::with_capacity(max_messages.min(1 << 16));
        let started = Instant::now();
        while latencies.len() < max_messages && (started.elapsed() < budget || latencies.len() < 20) {
            let t = Instant::now();
            exchange.once(&mut tls, peer).await?;
            latencies.push(t.elapsed().as_nanos() as u64);
        }
        Ok(PayloadRun::of(latencies, started.elapsed()))
    }

    /// `connections` connections at once, each with one message of `size` bytes in flight, for
    /// about `budget`: the messages of all of them, and the latency of each message.
    pub async fn payload_concurrent(
        &self,
        peer: &str,
        addr: SocketAddr,
        size: usize,
        budget: Duration,
        max_messages: usize,
        connections: usize,
    ) -> Result<PayloadRun, BenchError> {
        let mut tasks = tokio::task::JoinSet::new();
        let per_connection = (max_messages / connections).max(20);
        for _ in 0..connections {
            let (_, mut tls) = self.handshake(peer, addr).await?;
            let mut exchange = Exchange::new(self.method, size, self.name_str());
            let peer = peer.to_string();
            tasks.spawn(async move {
                for _ in 0..4 {
                    exchange.once(&mut tls, &peer).await?;
                }
                Ok::<_, BenchError>((tls, exchange, peer))
            });
        }
        // Every connection warmed up before the clock starts, then all of them at once.
        let mut ready = Vec::with_capacity(connections);
        while let Some(joined) = tasks.join_next().await {
            ready.push(joined.map_err(|e| BenchError::Setup(e.to_string()))??);
        }
        let started = Instant::now();
        let mut measured = tokio::task::JoinSet::new();
        for (mut tls, mut exchange, peer) in ready {
            measured.spawn(async move {
                let mut latencies = Vec::new();
                while latencies.len() < per_connection && started.elapsed() < budget {
                    let t = Instant::now();
                    exchange.once(&mut tls, &peer).await?;
                    latencies.push(t.elapsed().as_nanos() as u64);
                }
                Ok::<_, BenchError>(latencies)
            });
        }
        let mut latencies = Vec::new();
        while let Some(joined) = measured.join_next().await {
            latencies.extend(joined.map_err(|e| BenchError::Setup(e.to_string()))??);
        }
        Ok(PayloadRun::of(latencies, started.elapsed()))
    }

    fn name_str(&self) -> String {
        match &self.name {
            ServerName::DnsName(d) => d.as_ref().to_string(),
            ServerName::IpAddress(ip) => std::net::IpAddr::from(*ip).to_string(),
            _ => "localhost".into(),
        }
    }
}

/// A nearest-rank quantile of sorted values.
pub fn quantile(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1] as f64
}

/// One message: an echo of `size` bytes, or a GET of a `size`-byte body.
struct Exchange {
    request: Vec<u8>,
    buf: Vec<u8>,
    method: Method,
    size: usize,
}

impl Exchange {
    fn new(method: Method, size: usize, host: String) -> Exchange {
        let request = match method {
            Method::Echo => vec![0x5a; size],
            Method::Get => format!("GET /bytes/{size} HTTP/1.1\r\nHost: {host}\r\n\r\n").into_bytes(),
        };
        Exchange { request, buf: vec![0; size.max(16 * 1024) + 1024], method, size }
    }

    async fn once(&mut self, tls: &mut TlsStream<TcpStream>, peer: &str) -> Result<(), BenchError> {
        let io = |what| move |source| BenchError::Io { peer: peer.into(), what, source };
        tls.write_all(&self.request).await.map_err(io("write"))?;
        tls.flush().await.map_err(io("write"))?;
        match self.method {
            Method::Echo => {
                tls.read_exact(&mut self.buf[..self.size]).await.map_err(io("read"))?;
            }
            Method::Get => {
                let mut have = 0;
                let (head_end, body_len) = loop {
                    let n = tls.read(&mut self.buf[have..]).await.map_err(io("read"))?;
                    if n == 0 {
                        return Err(BenchError::Protocol { peer: peer.into(), why: "connection closed mid-response".into() });
                    }
                    have += n;
                    if let Some(end) = self.buf[..have].windows(4).position(|w| w == b"\r\n\r\n") {
                        break (end + 4, response_length(&self.buf[..end], peer)?);
                    }
                    if have == self.buf.len() {
                        return Err(BenchError::Protocol { peer: peer.into(), why: "response head too large".into() });
                    }
                };
                if body_len != self.size {
                    return Err(BenchError::Protocol {
                        peer: peer.into(),
                        why: format!("GET /bytes/{} answered {body_len} bytes", self.size),
                    });
                }
                let mut remaining = (head_end + body_len).saturating_sub(have);
                let cap = self.buf.len();
                while remaining > 0 {
                    let n = tls.read(&mut self.buf[..remaining.min(cap)]).await.map_err(io("read"))?;
                    if n == 0 {
                        return Err(BenchError::Protocol { peer: peer.into(), why: "connection closed mid-body".into() });
                    }
                    remaining -= n;
                }
            }
        }
        Ok(())
    }
}

/// The Content-Length of a 200 response head; anything else is an error naming the status.
fn response_length(head: &[u8], peer: &str) -> Result<usize, BenchError> {
    let text = String::from_utf8_lossy(head);
    let protocol = |why: String| BenchError::Protocol { peer: peer.into(), why };
    let status = text.split_whitespace().nth(1).unwrap_or("");
    if status != "200" {
        return Err(protocol(format!("answered HTTP {status:?}; expected 200 (does it serve /bytes/N files?)")));
    }
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .ok_or_else(|| protocol("no Content-Length (chunked responses are not supported)".into()))
}
