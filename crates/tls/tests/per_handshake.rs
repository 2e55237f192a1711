//! The per-handshake sources (`reload`, `cached`) over real sockets, on both backends: the
//! rustls resolver and OpenSSL's servername callback each present what the source looks up,
//! to clients that send SNI and to one that does not (an IP address).

use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use openssl::ssl::{SslConnector, SslMethod};
use rustls::pki_types::ServerName;
use signet_tls::backend::HTTP_ALPN;
use signet_tls::testing::{ServerPem, TestPki};
use signet_tls::{Acceptor, Backend, FileSource, Freshness, Trust};
use tokio::net::{TcpListener, TcpStream};

/// Accepts connections and completes handshakes until dropped.
struct Server {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(acceptor: Acceptor) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(mut tls) = acceptor.accept(tcp).await {
                    let _ = tokio::io::AsyncWriteExt::shutdown(&mut tls).await;
                }
            });
        }
    });
    Server { addr, task }
}

/// The leaf a new rustls connection is shown (no resumption: every handshake is full).
async fn rustls_leaf(addr: SocketAddr, ca: &Path, name: &str) -> Vec<u8> {
    let mut config = rustls::ClientConfig::clone(&signet_tls::client_config(&Trust::PemFile(ca.to_path_buf())).unwrap());
    config.resumption = rustls::client::Resumption::disabled();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from(name.to_string()).unwrap(), tcp)
        .await
        .unwrap_or_else(|e| panic!("rustls handshake as {name}: {e}"));
    tls.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

async fn openssl_leaf(addr: SocketAddr, ca: &Path) -> Vec<u8> {
    let mut builder = SslConnector::builder(SslMethod::tls_client()).unwrap();
    builder.set_ca_file(ca).unwrap();
    let ssl = builder.build().configure().unwrap().into_ssl("localhost").unwrap();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut tls = tokio_openssl::SslStream::new(ssl, tcp).unwrap();
    Pin::new(&mut tls).connect().await.expect("OpenSSL client handshake");
    tls.ssl().peer_certificate().unwrap().to_der().unwrap()
}

/// What every kind of client is shown now; all must agree.
async fn shown(addr: SocketAddr, ca: &Path) -> Vec<u8> {
    let by_name = rustls_leaf(addr, ca, "localhost").await;
    assert_eq!(rustls_leaf(addr, ca, "127.0.0.1").await, by_name, "without SNI");
    assert_eq!(openssl_leaf(addr, ca).await, by_name, "an OpenSSL client");
    by_name
}

fn write(source: &FileSource, pem: &ServerPem) {
    std::fs::write(&source.cert, &pem.chain).unwrap();
    std::fs::write(&source.key, &pem.key).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_presents_a_rewritten_certificate_at_the_next_handshake_and_survives_a_corrupt_one() {
    let pki = TestPki::new();
    let (a, b) = (pki.server_pem(), pki.issue_server());
    for backend in Backend::ALL {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, &pki.ca_pem).unwrap();
        let source = FileSource::new(dir.path().join("tls.crt"), dir.path().join("tls.key"));
        write(&source, &a);
        let acceptor = Acceptor::per_handshake(backend, &source, Freshness::Reload, HTTP_ALPN, None).unwrap();
        assert!(acceptor.install(&signet_tls::CertifiedPair::from_files(&source.cert, &source.key).unwrap()).is_err(), "{backend}: the files are the authority");
        let server = serve(acceptor).await;
        assert_eq!(shown(server.addr, &ca).await, a.leaf_der, "{backend}");

        write(&source, &b);
        assert_eq!(shown(server.addr, &ca).await, b.leaf_der, "{backend}: no timer, no wait");

        std::fs::write(&source.cert, "-----BEGIN CERTIFICATE-----\ntruncated").unwrap();
        assert_eq!(shown(server.addr, &ca).await, b.leaf_der, "{backend}: the last good pair");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_presents_its_copy_within_the_ttl_and_the_new_certificate_after_it() {
    let pki = TestPki::new();
    let (a, b) = (pki.server_pem(), pki.issue_server());
    let ttl = Duration::from_millis(1500);
    for backend in Backend::ALL {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, &pki.ca_pem).unwrap();
        let source = FileSource::new(dir.path().join("tls.crt"), dir.path().join("tls.key"));
        write(&source, &a);
        let acceptor = Acceptor::per_handshake(backend, &source, Freshness::Cached(ttl), HTTP_ALPN, None).unwrap();
        let server = serve(acceptor).await;
        let started = std::time::Instant::now();
        write(&source, &b);
        assert_eq!(shown(server.addr, &ca).await, a.leaf_der, "{backend}: within the TTL");
        assert!(started.elapsed() < ttl, "{backend}: the check ran within the TTL");
        tokio::time::sleep(ttl.saturating_sub(started.elapsed()) + Duration::from_millis(100)).await;
        assert_eq!(shown(server.addr, &ca).await, b.leaf_der, "{backend}: after it");
    }
}
