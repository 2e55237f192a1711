//! Test fixtures: a throwaway CA with a server certificate for the loopback names, and a
//! loopback HTTP(S) server that serves fixed documents and counts the requests per path and
//! the connections (HTTP/2 when the client offers it by ALPN, else HTTP/1.1).
//!
//! Only for tests (feature `testing`): real TLS and real HTTP, with nothing mocked.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::ServerConfig;

use crate::loopback::LoopbackServer;

/// A CA and a server certificate it issued for `localhost`, `127.0.0.1` and `::1`.
pub struct TestPki {
    /// The CA certificate, PEM: what a client's `ca_file` holds.
    pub ca_pem: String,
    ca: Issuer<'static, KeyPair>,
    ca_der: CertificateDer<'static>,
    server_chain: Vec<CertificateDer<'static>>,
    server_key: Vec<u8>,
    server_chain_pem: String,
}

/// A certificate chain and its key, in PEM, as an operator's files hold them (a server's, or
/// a client's for mTLS).
pub struct ServerPem {
    /// The server certificate, then the CA certificate.
    pub chain: String,
    /// PKCS#8.
    pub key: String,
    /// The server certificate in DER, to recognise it on the client side.
    pub leaf_der: Vec<u8>,
}

impl TestPki {
    pub fn new() -> TestPki {
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        // A name of its own: two test CAs in one bundle must not look like one issuer.
        static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        ca.distinguished_name.push(DnType::CommonName, format!("signet test CA {} {n}", std::process::id()));
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let ca_cert = ca.self_signed(&ca_key).expect("CA certificate");
        let issuer = Issuer::new(ca, ca_key);
        let mut pki = TestPki {
            ca_pem: ca_cert.pem(),
            ca: issuer,
            ca_der: ca_cert.der().clone(),
            server_chain: Vec::new(),
            server_key: Vec::new(),
            server_chain_pem: String::new(),
        };
        let (chain, key, chain_pem) = pki.issue(None);
        pki.server_chain = chain;
        pki.server_key = key.serialize_der();
        pki.server_chain_pem = chain_pem;
        pki
    }

    /// A fresh server key and certificate for the loopback names, valid now, or until
    /// `not_after` when given (a date in the past makes an expired certificate).
    fn issue(&self, not_after: Option<(i32, u8, u8)>) -> (Vec<CertificateDer<'static>>, KeyPair, String) {
        let key = KeyPair::generate().expect("server key");
        let names = vec!["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
        let mut params = CertificateParams::new(names).expect("server params");
        params.distinguished_name.push(DnType::CommonName, "localhost");
        if let Some((y, m, d)) = not_after {
            params.not_before = rcgen::date_time_ymd(y - 1, m, d);
            params.not_after = rcgen::date_time_ymd(y, m, d);
        }
        let cert = params.signed_by(&key, &self.ca).expect("server certificate");
        let chain_pem = format!("{}{}", cert.pem(), self.ca_pem);
        (vec![cert.der().clone(), self.ca_der.clone()], key, chain_pem)
    }

    /// The server certificate (the one [`TestPki::server_config`] presents) as PEM files hold it.
    pub fn server_pem(&self) -> ServerPem {
        let key = PrivatePkcs8KeyDer::from(self.server_key.clone());
        let key = KeyPair::try_from(&key).expect("our own key parses");
        pem_of(&self.server_chain, &key, &self.server_chain_pem)
    }

    /// Another server certificate from the same CA, with a new key: a rotation.
    pub fn issue_server(&self) -> ServerPem {
        let (chain, key, chain_pem) = self.issue(None);
        pem_of(&chain, &key, &chain_pem)
    }

    /// A server certificate from the same CA that expired on `year`-01-01.
    pub fn issue_expired(&self, year: i32) -> ServerPem {
        let (chain, key, chain_pem) = self.issue(Some((year, 1, 1)));
        pem_of(&chain, &key, &chain_pem)
    }

    /// A client certificate from this CA for mTLS, naming `san` (a URI such as
    /// `spiffe://…`, an email address, or a DNS name) in its subject alternative names.
    pub fn issue_client(&self, san: &str) -> ServerPem {
        let key = KeyPair::generate().expect("client key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("client params");
        params.distinguished_name.push(DnType::CommonName, "signet test client");
        params.subject_alt_names = vec![match san {
            s if s.contains("://") => rcgen::SanType::URI(s.try_into().expect("a URI SAN")),
            s if s.contains('@') => rcgen::SanType::Rfc822Name(s.try_into().expect("an email SAN")),
            s => rcgen::SanType::DnsName(s.try_into().expect("a DNS SAN")),
        }];
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &self.ca).expect("client certificate");
        let chain_pem = format!("{}{}", cert.pem(), self.ca_pem);
        pem_of(&[cert.der().clone(), self.ca_der.clone()], &key, &chain_pem)
    }

    /// A rustls server config presenting the server certificate, offering h2 and http/1.1.
    pub fn server_config(&self) -> Arc<ServerConfig> {
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.server_key.clone()));
        let config = ServerConfig::builder_with_provider(crate::client::provider())
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_no_client_auth()
            .with_single_cert(self.server_chain.clone(), key)
            .expect("server certificate and key");
        let mut config = config;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Arc::new(config)
    }
}

fn pem_of(chain: &[CertificateDer<'static>], key: &KeyPair, chain_pem: &str) -> ServerPem {
    ServerPem { chain: chain_pem.to_string(), key: key.serialize_pem(), leaf_der: chain[0].to_vec() }
}

impl Default for TestPki {
    fn default() -> Self {
        TestPki::new()
    }
}

#[derive(Default)]
struct Routes {
    /// Path → (status, body).
    documents: HashMap<String, (u16, String)>,
    hits: HashMap<String, usize>,
    /// The protocol of each connection accepted, in order: `h2` or `http/1.1`.
    connections: Vec<&'static str>,
}

/// A server on 127.0.0.1 with a free port, serving what [`TestServer::set`] put at each
/// path (404 elsewhere). It stops when dropped.
pub struct TestServer {
    /// `https://127.0.0.1:PORT` (or `http://` without TLS), without a trailing slash.
    pub url: String,
    pub addr: SocketAddr,
    routes: Arc<Mutex<Routes>>,
    /// Stops the server when dropped.
    _server: LoopbackServer,
}

impl TestServer {
    /// An HTTPS server presenting `pki`'s server certificate.
    pub fn https(pki: &TestPki) -> TestServer {
        Self::start(Some(pki.server_config()))
    }

    /// A plain HTTP server.
    pub fn http() -> TestServer {
        Self::start(None)
    }

    fn start(tls: Option<Arc<ServerConfig>>) -> TestServer {
        let routes = Arc::new(Mutex::new(Routes::default()));
        let scheme = if tls.is_some() { "https" } else { "http" };
        let served = routes.clone();
        let server = LoopbackServer::start("test-server".into(), move |listener| serve(listener, tls, served)).expect("a loopback test server");
        TestServer { url: format!("{scheme}://{}", server.addr), addr: server.addr, routes, _server: server }
    }

    /// Serves `body` with `status` at `path` from now on.
    pub fn set(&self, path: &str, status: u16, body: impl Into<String>) {
        self.routes.lock().unwrap().documents.insert(path.to_string(), (status, body.into()));
    }

    /// The protocol of each connection accepted so far (`h2` or `http/1.1`), in order.
    pub fn connections(&self) -> Vec<&'static str> {
        self.routes.lock().unwrap().connections.clone()
    }

    /// How many requests reached `path`.
    pub fn hits(&self, path: &str) -> usize {
        self.routes.lock().unwrap().hits.get(path).copied().unwrap_or(0)
    }
}

async fn serve(listener: tokio::net::TcpListener, tls: Option<Arc<ServerConfig>>, routes: Arc<Mutex<Routes>>) {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    loop {
        let Ok((tcp, _)) = listener.accept().await else { continue };
        let routes = routes.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let counted = routes.clone();
            let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let routes = routes.clone();
                async move { Ok::<_, Infallible>(answer(&routes, req.uri().path())) }
            });
            let http = hyper::server::conn::http1::Builder::new();
            match acceptor {
                // A client that refuses the certificate ends the handshake; nothing to serve.
                Some(acceptor) => {
                    if let Ok(stream) = acceptor.accept(tcp).await {
                        let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
                        counted.lock().unwrap().connections.push(if h2 { "h2" } else { "http/1.1" });
                        if h2 {
                            let h2 = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new());
                            let _ = h2.serve_connection(TokioIo::new(stream), service).await;
                        } else {
                            let _ = http.serve_connection(TokioIo::new(stream), service).await;
                        }
                    }
                }
                None => {
                    counted.lock().unwrap().connections.push("http/1.1");
                    let _ = http.serve_connection(TokioIo::new(tcp), service).await;
                }
            }
        });
    }
}

fn answer(routes: &Mutex<Routes>, path: &str) -> hyper::Response<Full<Bytes>> {
    let mut routes = routes.lock().unwrap();
    *routes.hits.entry(path.to_string()).or_default() += 1;
    let (status, body) = routes.documents.get(path).cloned().unwrap_or((404, "not found".into()));
    hyper::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .expect("a valid response")
}
