//! The load generator's transports against a real server on 127.0.0.1: TLS 1.3 with HTTP/2
//! and with HTTP/1.1 (rcgen CA and certificate, tokio-rustls and hyper serving), a new
//! connection per request, and the errors of a wrong CA and of a server without HTTP/2.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use signet_lab::load::LoadError;
use signet_lab::transport::{HttpVersion, Transport};
use signet_lab::{LoadResult, LoadSpec, Workload};
use tokio::net::TcpListener;

/// What the server saw.
#[derive(Default)]
struct Seen {
    accepted: AtomicU64,
    http2: AtomicU64,
    http11: AtomicU64,
}

struct TestServer {
    addr: SocketAddr,
    seen: Arc<Seen>,
}

/// A CA, and a server certificate for 127.0.0.1 that it issued.
struct Pki {
    ca_pem: String,
    cert_der: Vec<u8>,
    key_der: Vec<u8>,
}

fn pki() -> Pki {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap().signed_by(&key, &ca).unwrap();
    Pki { ca_pem: ca.pem(), cert_der: cert.der().to_vec(), key_der: key.serialize_der() }
}

fn write_ca(dir: &Path, name: &str, pem: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, pem).unwrap();
    path
}

/// Serves 200 "ok" to every request, over TLS 1.3 only (when `pki` is given) offering `alpn`,
/// HTTP/1.1 or HTTP/2 as the client speaks.
async fn serve(pki: Option<&Pki>, alpn: &[&[u8]]) -> TestServer {
    let acceptor = pki.map(|p| {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![p.cert_der.clone().into()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(p.key_der.clone())),
            )
            .unwrap();
        config.alpn_protocols = alpn.iter().map(|a| a.to_vec()).collect();
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let counters = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { return };
            counters.accepted.fetch_add(1, Ordering::SeqCst);
            let (acceptor, counters) = (acceptor.clone(), counters.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let counter = if req.version() == hyper::Version::HTTP_2 { &counters.http2 } else { &counters.http11 };
                    counter.fetch_add(1, Ordering::SeqCst);
                    async { Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from_static(b"ok")))) }
                });
                let server = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                let _ = match acceptor {
                    Some(acceptor) => match acceptor.accept(tcp).await {
                        Ok(tls) => server.serve_connection(TokioIo::new(tls), service).await,
                        Err(_) => return,
                    },
                    None => server.serve_connection(TokioIo::new(tcp), service).await,
                };
            });
        }
    });
    TestServer { addr, seen }
}

fn spec(target: String, connections: usize, transport: Transport) -> LoadSpec {
    LoadSpec {
        target: target.parse().unwrap(),
        workload: Workload::Custom,
        rate: 40.0,
        duration: Duration::from_secs(1),
        connections,
        method: http::Method::GET,
        body: Bytes::new(),
        headers: Vec::new(),
        timeout: Duration::from_secs(10),
        progress: false,
        token: None,
        rekor_version: 1,
        seed_entries: 0,
        rng_seed: 1,
        soak: None,
        server_pid: None,
        disk_probe: None,
        warmup: Duration::ZERO,
        transport,
    }
}

fn all_ok(r: &LoadResult) {
    assert_eq!(r.scheduled, 40);
    assert_eq!((r.ok, r.error_count(), r.dropped), (40, 0, 0), "errors: {:?}", r.errors);
}

#[tokio::test]
async fn tls13_with_h2_multiplexes_streams_and_records_what_was_negotiated() {
    let (dir, pki) = (tempfile::tempdir().unwrap(), pki());
    let ca = write_ca(dir.path(), "ca.pem", &pki.ca_pem);
    let server = serve(Some(&pki), &[b"h2", b"http/1.1"]).await;
    let transport = Transport { http: HttpVersion::Http2, streams: 4, new_connection: false, ca_file: Some(ca) };
    let r = signet_lab::run(spec(format!("https://127.0.0.1:{}/x", server.addr.port()), 2, transport)).await.unwrap();
    all_ok(&r);
    let tls = r.tls.as_ref().expect("tls block");
    assert_eq!(tls.version, "TLSv1.3");
    assert!(tls.cipher.starts_with("TLS13_"), "{}", tls.cipher);
    assert_eq!(tls.alpn.as_deref(), Some("h2"));
    assert_eq!((r.http.as_str(), r.streams, r.new_connection), ("2", Some(4), false));
    // Eight clients shared the two connections opened before the clock started.
    assert_eq!(server.seen.accepted.load(Ordering::SeqCst), 2);
    assert_eq!((server.seen.http2.load(Ordering::SeqCst), server.seen.http11.load(Ordering::SeqCst)), (40, 0));
    assert_eq!((r.connects, r.connect_ms.is_none()), (0, true), "keep-alive opened nothing during the run");
}

#[tokio::test]
async fn tls13_with_http11_uses_the_cheap_client_over_tls() {
    let (dir, pki) = (tempfile::tempdir().unwrap(), pki());
    let ca = write_ca(dir.path(), "ca.pem", &pki.ca_pem);
    let server = serve(Some(&pki), &[b"h2", b"http/1.1"]).await;
    let transport = Transport { ca_file: Some(ca), ..Transport::default() };
    let r = signet_lab::run(spec(format!("https://127.0.0.1:{}/", server.addr.port()), 3, transport)).await.unwrap();
    all_ok(&r);
    let tls = r.tls.as_ref().expect("tls block");
    assert_eq!((tls.version.as_str(), tls.alpn.as_deref()), ("TLSv1.3", Some("http/1.1")));
    assert_eq!(server.seen.accepted.load(Ordering::SeqCst), 3);
    assert_eq!((server.seen.http2.load(Ordering::SeqCst), server.seen.http11.load(Ordering::SeqCst)), (0, 40));
}

#[tokio::test]
async fn new_connection_mode_opens_one_connection_per_request() {
    // Plain HTTP/1.1.
    let server = serve(None, &[]).await;
    let transport = Transport { new_connection: true, ..Transport::default() };
    let r = signet_lab::run(spec(format!("http://{}/", server.addr), 4, transport)).await.unwrap();
    all_ok(&r);
    // One probe connection checks the target before the clock starts, then one per request.
    assert_eq!(server.seen.accepted.load(Ordering::SeqCst), 41);
    assert_eq!(r.connects, 40);
    let connect = r.connect_ms.as_ref().expect("connect_ms");
    assert!(connect.p50 > 0.0 && connect.max >= connect.p50);
    assert!(r.tls_handshake_ms.is_none() && r.tls.is_none());
    assert!(r.table().contains("a new connection per request") && r.table().contains("connection setup (40 opened)"));

    // HTTP/2 over TLS: each request its own TCP connection, TLS handshake and HTTP/2 preface.
    let (dir, pki) = (tempfile::tempdir().unwrap(), pki());
    let ca = write_ca(dir.path(), "ca.pem", &pki.ca_pem);
    let server = serve(Some(&pki), &[b"h2"]).await;
    let transport = Transport { http: HttpVersion::Http2, new_connection: true, ca_file: Some(ca), ..Transport::default() };
    let r = signet_lab::run(spec(format!("https://127.0.0.1:{}/", server.addr.port()), 4, transport)).await.unwrap();
    all_ok(&r);
    assert_eq!(server.seen.accepted.load(Ordering::SeqCst), 41);
    assert_eq!(server.seen.http2.load(Ordering::SeqCst), 40);
    assert_eq!((r.connects, r.streams), (40, None));
    let (connect, handshake) = (r.connect_ms.as_ref().unwrap(), r.tls_handshake_ms.as_ref().expect("tls_handshake_ms"));
    assert!(handshake.p50 > 0.0 && connect.max >= handshake.max, "setup includes the handshake: {connect:?} {handshake:?}");
}

#[tokio::test]
async fn a_certificate_from_another_ca_is_a_tls_verification_error() {
    let (dir, pki, other) = (tempfile::tempdir().unwrap(), pki(), pki());
    let wrong = write_ca(dir.path(), "other-ca.pem", &other.ca_pem);
    let server = serve(Some(&pki), &[b"http/1.1"]).await;
    let transport = Transport { ca_file: Some(wrong.clone()), ..Transport::default() };
    let err = signet_lab::run(spec(format!("https://127.0.0.1:{}/", server.addr.port()), 1, transport)).await.unwrap_err();
    assert!(matches!(err, LoadError::Target { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("TLS certificate verification failed"), "{text}");
    assert!(text.contains(&format!("not trusted by --ca-file {}", wrong.display())), "{text}");
}

#[tokio::test]
async fn http2_needs_the_server_to_agree_to_h2() {
    let (dir, pki) = (tempfile::tempdir().unwrap(), pki());
    let ca = write_ca(dir.path(), "ca.pem", &pki.ca_pem);
    let transport = Transport { http: HttpVersion::Http2, ca_file: Some(ca), ..Transport::default() };
    // A server that offers only HTTP/1.1 refuses the handshake.
    let server = serve(Some(&pki), &[b"http/1.1"]).await;
    let err = signet_lab::run(spec(format!("https://127.0.0.1:{}/", server.addr.port()), 1, transport.clone())).await.unwrap_err();
    assert!(err.to_string().contains("refused the offered ALPN protocols (h2); it may not speak HTTP/2 over TLS, try --http 1.1"), "{err}");
    // A server without ALPN completes it, choosing nothing.
    let server = serve(Some(&pki), &[]).await;
    let err = signet_lab::run(spec(format!("https://127.0.0.1:{}/", server.addr.port()), 1, transport)).await.unwrap_err();
    assert!(err.to_string().contains("did not agree to h2 by ALPN (it chose nothing)"), "{err}");
}
