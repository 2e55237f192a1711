//! A small blocking HTTP client: GETs of JSON documents (OIDC discovery documents and key
//! sets, remote trust roots) and single requests such as an OTLP trace export.
//!
//! One client for all of them, and for the life of the process: connections are kept alive and
//! reused per host (HTTP/2 when the server offers it by ALPN, else HTTP/1.1 keep-alive), the
//! trust store is whatever [`crate::client`] loaded once, and the connections live on one
//! background runtime (`signet-fetch`), so callers may be plain synchronous code, even inside a
//! tokio worker: a call hands its request to that runtime and waits for the answer. The whole
//! exchange has one deadline, and the body one size limit. Redirects are not followed: a 3xx is
//! reported as the status it is.
//!
//! Plain `http://` is accepted only towards loopback hosts, for tests and local issuers.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use serde_json::Value;
use tokio::net::TcpStream;

/// What went wrong with one GET; shown after the URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    #[error("not a usable URL: {0}")]
    Url(String),
    #[error("plain http is allowed only to loopback hosts (127.0.0.0/8, ::1, localhost); use https")]
    PlainHttp,
    #[error("DNS lookup failed: {0}")]
    Resolve(String),
    #[error("connection failed: {0}")]
    Connect(String),
    #[error("TLS verification of the server's certificate failed: {0}")]
    TlsVerification(String),
    #[error("TLS handshake failed: {0}")]
    Tls(String),
    #[error("HTTP exchange failed: {0}")]
    Http(String),
    #[error("answered HTTP {0}; expected 200")]
    Status(u16),
    #[error("response is larger than {0} bytes")]
    TooLarge(usize),
    #[error("response is not JSON: {0}")]
    NotJson(String),
    #[error("no complete response within {0:?}")]
    Timeout(Duration),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{method} {url}: {failure}")]
pub struct FetchError {
    pub method: String,
    pub url: String,
    pub failure: Failure,
}

/// Sends requests with one TLS client config, over connections it keeps. Cheap to clone:
/// clones share the connections.
#[derive(Clone)]
pub struct Fetcher {
    client: Client<Connector, Full<Bytes>>,
    timeout: Duration,
    max_bytes: usize,
}

/// How long an unused connection is kept.
const IDLE: Duration = Duration::from_secs(60);

impl Fetcher {
    /// A fetcher with a 10 s deadline and a 1 MiB limit: discovery documents and key sets
    /// are a few kilobytes. It offers HTTP/2 and HTTP/1.1 by ALPN, whatever `tls` says.
    pub fn new(tls: Arc<ClientConfig>) -> Fetcher {
        let mut config = (*tls).clone();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let connector = Connector { tls: tokio_rustls::TlsConnector::from(Arc::new(config)) };
        let client = Client::builder(TokioExecutor::new()).pool_idle_timeout(IDLE).pool_max_idle_per_host(8).build(connector);
        Fetcher { client, timeout: Duration::from_secs(10), max_bytes: 1 << 20 }
    }

    pub fn with_timeout(mut self, timeout: Duration) -> Fetcher {
        self.timeout = timeout;
        self
    }

    pub fn with_max_bytes(mut self, max_bytes: usize) -> Fetcher {
        self.max_bytes = max_bytes;
        self
    }

    /// GETs `url` and parses the body as JSON. Blocks the calling thread.
    pub fn get_json(&self, url: &str) -> Result<Value, FetchError> {
        let fail = |failure| FetchError { method: "GET".into(), url: url.to_string(), failure };
        let request = http::Request::get(url)
            .header(http::header::ACCEPT, "application/json")
            .body(Bytes::new())
            .map_err(|e| fail(Failure::Url(e.to_string())))?;
        let response = self.send(url, request)?;
        if response.status() != http::StatusCode::OK {
            return Err(fail(Failure::Status(response.status().as_u16())));
        }
        serde_json::from_slice(response.body()).map_err(|e| fail(Failure::NotJson(e.to_string())))
    }

    /// Sends `request` (its method, headers and body; the URI is `url`'s) and returns the
    /// whole response, whatever its status. Blocks the calling thread.
    pub fn send(&self, url: &str, request: http::Request<Bytes>) -> Result<http::Response<Bytes>, FetchError> {
        let method = request.method().to_string();
        let fail = |failure| FetchError { method: method.clone(), url: url.to_string(), failure };
        let target = Target::parse(url).map_err(fail)?;
        let rt = runtime().map_err(fail)?;
        let (answer, answered) = std::sync::mpsc::sync_channel(1);
        let (client, timeout, max_bytes) = (self.client.clone(), self.timeout, self.max_bytes);
        rt.spawn(async move {
            let outcome = tokio::time::timeout(timeout, exchange(client, target, request, max_bytes))
                .await
                .unwrap_or(Err(Failure::Timeout(timeout)));
            let _ = answer.send(outcome);
        });
        answered.recv().unwrap_or_else(|_| Err(Failure::Http("the fetch task ended without an answer".into()))).map_err(fail)
    }
}

/// The runtime every fetcher's connections live on, started at the first request.
fn runtime() -> Result<&'static tokio::runtime::Runtime, Failure> {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("signet-fetch")
        .enable_all()
        .build()
        .map_err(|e| Failure::Http(format!("starting the client runtime: {e}")))?;
    // Two first calls at once: one runtime is kept, the other dropped unused.
    Ok(RUNTIME.get_or_init(|| rt))
}

async fn exchange(
    client: Client<Connector, Full<Bytes>>,
    target: Target,
    request: http::Request<Bytes>,
    max_bytes: usize,
) -> Result<http::Response<Bytes>, Failure> {
    let (mut parts, body) = request.into_parts();
    parts.uri = target.uri;
    parts.headers.entry(http::header::USER_AGENT).or_insert(http::HeaderValue::from_static(concat!("signet/", env!("CARGO_PKG_VERSION"))));
    let response = client.request(http::Request::from_parts(parts, Full::new(body))).await.map_err(|e| failure_of(&e))?;
    let (parts, body) = response.into_parts();
    let body = Limited::new(body, max_bytes).collect().await.map_err(|e| {
        if e.is::<http_body_util::LengthLimitError>() {
            Failure::TooLarge(max_bytes)
        } else {
            Failure::Http(e.to_string())
        }
    })?;
    Ok(http::Response::from_parts(parts, body.to_bytes()))
}

/// The connector's own [`Failure`] when it is behind `e`, else `e` as an HTTP failure.
fn failure_of(e: &hyper_util::client::legacy::Error) -> Failure {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(err) = source {
        if let Some(failure) = err.downcast_ref::<Failure>() {
            return failure.clone();
        }
        source = err.source();
    }
    Failure::Http(e.to_string())
}

/// Opens connections for the client: TCP, then TLS for `https`.
#[derive(Clone)]
struct Connector {
    tls: tokio_rustls::TlsConnector,
}

impl tower_service::Service<http::Uri> for Connector {
    type Response = Stream;
    type Error = Failure;
    type Future = Pin<Box<dyn Future<Output = Result<Stream, Failure>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Failure>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let tls = self.tls.clone();
        Box::pin(async move {
            let target = Target::parse(&uri.to_string())?;
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((target.host.as_str(), target.port))
                .await
                .map_err(|e| Failure::Resolve(format!("{}: {e}", target.host)))?
                .collect();
            let tcp = TcpStream::connect(&addrs[..])
                .await
                .map_err(|e| Failure::Connect(format!("{}:{}: {e}", target.host, target.port)))?;
            let _ = tcp.set_nodelay(true);
            if !target.tls {
                return Ok(Stream::Plain(TokioIo::new(tcp)));
            }
            let name = ServerName::try_from(target.host.clone()).map_err(|e| Failure::Url(format!("host {:?}: {e}", target.host)))?;
            let stream = tls.connect(name, tcp).await.map_err(tls_failure)?;
            Ok(Stream::Tls(TokioIo::new(stream)))
        })
    }
}

/// A connection: plain (loopback only) or TLS.
enum Stream {
    Plain(TokioIo<TcpStream>),
    Tls(TokioIo<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Connection for Stream {
    fn connected(&self) -> Connected {
        match self {
            Stream::Tls(s) if s.inner().get_ref().1.alpn_protocol() == Some(b"h2") => Connected::new().negotiated_h2(),
            _ => Connected::new(),
        }
    }
}

impl hyper::rt::Read for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: hyper::rt::ReadBufCursor<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl hyper::rt::Write for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// A failed handshake is a verification failure when rustls refused the certificate.
fn tls_failure(e: std::io::Error) -> Failure {
    match e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
        Some(refused @ rustls::Error::InvalidCertificate(_)) => Failure::TlsVerification(refused.to_string()),
        Some(other) => Failure::Tls(other.to_string()),
        None => Failure::Tls(e.to_string()),
    }
}

/// 127.0.0.0/8, ::1 and `localhost`: hosts whose traffic never leaves the machine.
pub fn is_loopback_host(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost") || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

struct Target {
    tls: bool,
    /// Without brackets, for DNS and SNI.
    host: String,
    port: u16,
    /// The whole URL, as the client routes it (its connections are pooled by scheme and authority).
    uri: http::Uri,
}

impl Target {
    fn parse(url: &str) -> Result<Target, Failure> {
        let uri: http::Uri = url.parse().map_err(|e| Failure::Url(format!("{e}")))?;
        let tls = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(Failure::Url("expected an https:// URL".into())),
        };
        let authority = uri.authority().ok_or_else(|| Failure::Url("no host".into()))?;
        if authority.as_str().contains('@') {
            return Err(Failure::Url("user info is not allowed".into()));
        }
        let host = authority.host().trim_start_matches('[').trim_end_matches(']').to_string();
        if !tls && !is_loopback_host(&host) {
            return Err(Failure::PlainHttp);
        }
        let port = authority.port_u16().unwrap_or(if tls { 443 } else { 80 });
        Ok(Target { tls, port, host, uri })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for h in ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost", "LocalHost"] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in ["10.0.0.1", "example.com", "localhost.example.com", "::2", "128.0.0.1"] {
            assert!(!is_loopback_host(h), "{h}");
        }
    }

    #[test]
    fn urls() {
        let t = Target::parse("https://idp.example:8443/a/b?c=d").unwrap();
        assert_eq!((t.tls, t.host.as_str(), t.port), (true, "idp.example", 8443));
        assert_eq!(t.uri.path_and_query().unwrap().as_str(), "/a/b?c=d");
        let t = Target::parse("http://[::1]/x").unwrap();
        assert_eq!((t.tls, t.host.as_str(), t.port, t.uri.authority().unwrap().as_str()), (false, "::1", 80, "[::1]"));
        assert_eq!(Target::parse("https://idp.example").unwrap().uri.path(), "/");
        assert_eq!(Target::parse("http://idp.example/").err(), Some(Failure::PlainHttp));
        assert!(matches!(Target::parse("ftp://idp.example/"), Err(Failure::Url(_))));
        assert!(matches!(Target::parse("https://u@idp.example/"), Err(Failure::Url(_))));
        assert!(matches!(Target::parse("not a url"), Err(Failure::Url(_))));
    }
}
