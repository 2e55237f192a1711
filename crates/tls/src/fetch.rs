//! A small blocking HTTP client: GETs of JSON documents (OIDC discovery documents and key
//! sets), and single requests such as an OTLP trace export.
//!
//! Each call opens one connection (HTTP/1.1 over rustls) on its own thread with its own
//! small runtime, so callers may be plain synchronous code, even inside a tokio worker.
//! The whole exchange has one deadline, and the body one size limit. Redirects are not
//! followed: a 3xx is reported as the status it is.
//!
//! Plain `http://` is accepted only towards loopback hosts, for tests and local issuers.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
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

/// GETs JSON documents with one TLS client config.
#[derive(Clone)]
pub struct Fetcher {
    tls: Arc<ClientConfig>,
    timeout: Duration,
    max_bytes: usize,
}

impl Fetcher {
    /// A fetcher with a 10 s deadline and a 1 MiB limit: discovery documents and key sets
    /// are a few kilobytes.
    pub fn new(tls: Arc<ClientConfig>) -> Fetcher {
        Fetcher { tls, timeout: Duration::from_secs(10), max_bytes: 1 << 20 }
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
        let outcome = std::thread::scope(|s| {
            s.spawn(|| {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| Failure::Http(format!("starting the client runtime: {e}")))?;
                rt.block_on(async {
                    tokio::time::timeout(self.timeout, self.exchange(&target, request))
                        .await
                        .map_err(|_| Failure::Timeout(self.timeout))?
                })
            })
            .join()
            .unwrap_or_else(|_| Err(Failure::Http("the fetch thread panicked".into())))
        });
        outcome.map_err(fail)
    }

    async fn exchange(&self, target: &Target, request: http::Request<Bytes>) -> Result<http::Response<Bytes>, Failure> {
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((target.host.as_str(), target.port))
            .await
            .map_err(|e| Failure::Resolve(format!("{}: {e}", target.host)))?
            .collect();
        let tcp = TcpStream::connect(&addrs[..])
            .await
            .map_err(|e| Failure::Connect(format!("{}:{}: {e}", target.host, target.port)))?;
        let _ = tcp.set_nodelay(true);
        if !target.tls {
            return self.request(tcp, target, request).await;
        }
        let name = ServerName::try_from(target.host.clone()).map_err(|e| Failure::Url(format!("host {:?}: {e}", target.host)))?;
        let tls = tokio_rustls::TlsConnector::from(self.tls.clone()).connect(name, tcp).await.map_err(tls_failure)?;
        self.request(tls, target, request).await
    }

    async fn request<S>(&self, stream: S, target: &Target, request: http::Request<Bytes>) -> Result<http::Response<Bytes>, Failure>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let http = |e: hyper::Error| Failure::Http(e.to_string());
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(http)?;
        tokio::spawn(connection);
        // The request line carries only the path: the target decides where it goes.
        let (mut parts, body) = request.into_parts();
        parts.uri = target.path.parse().map_err(|e: http::uri::InvalidUri| Failure::Url(e.to_string()))?;
        let host = http::HeaderValue::from_str(&target.authority).map_err(|e| Failure::Url(e.to_string()))?;
        parts.headers.insert(http::header::HOST, host);
        parts.headers.entry(http::header::USER_AGENT).or_insert(http::HeaderValue::from_static(concat!("signet/", env!("CARGO_PKG_VERSION"))));
        let response = sender.send_request(http::Request::from_parts(parts, Full::new(body))).await.map_err(http)?;
        let (parts, body) = response.into_parts();
        let body = Limited::new(body, self.max_bytes).collect().await.map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                Failure::TooLarge(self.max_bytes)
            } else {
                Failure::Http(e.to_string())
            }
        })?;
        Ok(http::Response::from_parts(parts, body.to_bytes()))
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
    /// `host[:port]` as written, for the Host header.
    authority: String,
    path: String,
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
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
        Ok(Target { tls, port: authority.port_u16().unwrap_or(if tls { 443 } else { 80 }), host, authority: authority.to_string(), path })
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
        assert_eq!((t.tls, t.host.as_str(), t.port, t.path.as_str()), (true, "idp.example", 8443, "/a/b?c=d"));
        let t = Target::parse("http://[::1]/x").unwrap();
        assert_eq!((t.tls, t.host.as_str(), t.port, t.authority.as_str()), (false, "::1", 80, "[::1]"));
        assert_eq!(Target::parse("https://idp.example").unwrap().path, "/");
        assert_eq!(Target::parse("http://idp.example/").err(), Some(Failure::PlainHttp));
        assert!(matches!(Target::parse("ftp://idp.example/"), Err(Failure::Url(_))));
        assert!(matches!(Target::parse("https://u@idp.example/"), Err(Failure::Url(_))));
        assert!(matches!(Target::parse("not a url"), Err(Failure::Url(_))));
    }
}
