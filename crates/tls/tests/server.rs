//! The server side over real loopback sockets: both backends, against a rustls client (the
//! project's own `client_config`) and an OpenSSL client; ALPN; hot rotation from files.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use openssl::ssl::{SslConnector, SslMethod};
use rustls::pki_types::ServerName;
use signet_tls::testing::{ServerPem, TestPki};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use signet_tls::{Acceptor, Backend, CertError, CertifiedPair, ClientAuth, ClientAuthMode, FileSource, Negotiated, Trust};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// An echo server on 127.0.0.1 that reports what each handshake negotiated.
struct Echo {
    addr: std::net::SocketAddr,
    negotiated: mpsc::UnboundedReceiver<Negotiated>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn echo_server(acceptor: Acceptor) -> Echo {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, negotiated) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                let _ = tx.send(tls.negotiated());
                let mut buf = vec![0u8; 16 * 1024];
                while let Ok(n) = tls.read(&mut buf).await {
                    if n == 0 || tls.write_all(&buf[..n]).await.is_err() || tls.flush().await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    Echo { addr, negotiated, task }
}

fn write_ca(dir: &Path, pki: &TestPki) -> PathBuf {
    let path = dir.join("ca.pem");
    std::fs::write(&path, &pki.ca_pem).unwrap();
    path
}

fn pair_of(pem: &ServerPem) -> CertifiedPair {
    CertifiedPair::from_pem(pem.chain.as_bytes(), pem.key.as_bytes(), "chain.pem", "key.pem").unwrap()
}

/// A rustls client connection; returns the stream and the leaf certificate the server showed.
async fn rustls_connect(
    addr: std::net::SocketAddr,
    ca: &Path,
    alpn: &[&[u8]],
) -> (tokio_rustls::client::TlsStream<TcpStream>, Vec<u8>) {
    let mut config = rustls::ClientConfig::clone(&signet_tls::client_config(&Trust::PemFile(ca.to_path_buf())).unwrap());
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    // Every connection a full handshake, so that each one asks the server for its certificate.
    config.resumption = rustls::client::Resumption::disabled();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .expect("rustls client handshake");
    let leaf = tls.get_ref().1.peer_certificates().unwrap()[0].to_vec();
    (tls, leaf)
}

async fn openssl_connect(addr: std::net::SocketAddr, ca: &Path) -> tokio_openssl::SslStream<TcpStream> {
    let mut builder = SslConnector::builder(SslMethod::tls_client()).unwrap();
    builder.set_ca_file(ca).unwrap();
    builder.set_alpn_protos(b"\x08http/1.1\x02h2").unwrap();
    let ssl = builder.build().configure().unwrap().into_ssl("localhost").unwrap();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut tls = tokio_openssl::SslStream::new(ssl, tcp).unwrap();
    Pin::new(&mut tls).connect().await.expect("OpenSSL client handshake");
    tls
}

async fn round_trip<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S, message: &[u8]) {
    stream.write_all(message).await.unwrap();
    stream.flush().await.unwrap();
    let mut back = vec![0u8; message.len()];
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut back)).await.expect("echo in time").unwrap();
    assert_eq!(back, message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_backends_serve_a_rustls_client_and_an_openssl_client_with_h2_by_alpn() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let ca = write_ca(dir.path(), &pki);
    for backend in Backend::ALL {
        let acceptor = Acceptor::new(backend, &pair_of(&pki.server_pem())).unwrap();
        assert_eq!(acceptor.backend(), backend);
        let mut server = echo_server(acceptor).await;

        let (mut tls, _) = rustls_connect(server.addr, &ca, &[b"h2", b"http/1.1"]).await;
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]), "{backend}");
        round_trip(&mut tls, b"hello from rustls").await;
        let seen = server.negotiated.recv().await.unwrap();
        assert_eq!((seen.version.as_str(), seen.alpn.as_deref()), ("TLSv1.3", Some(&b"h2"[..])), "{backend}");
        assert!(seen.cipher.starts_with("TLS_AES_") || seen.cipher.starts_with("TLS_CHACHA20"), "{backend}: {}", seen.cipher);

        // The OpenSSL client prefers http/1.1 but the server's preference (h2) wins.
        let mut tls = openssl_connect(server.addr, &ca).await;
        assert_eq!(tls.ssl().selected_alpn_protocol(), Some(&b"h2"[..]), "{backend}");
        round_trip(&mut tls, b"hello from openssl").await;
        assert_eq!(server.negotiated.recv().await.unwrap().version, "TLSv1.3");

        // A client that speaks only HTTP/1.1 gets it.
        let (mut tls, _) = rustls_connect(server.addr, &ca, &[b"http/1.1"]).await;
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]), "{backend}");
        round_trip(&mut tls, b"x").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_backends_speak_tls_1_2_to_a_client_that_offers_only_that() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let ca = write_ca(dir.path(), &pki);
    for backend in Backend::ALL {
        let mut server = echo_server(Acceptor::new(backend, &pair_of(&pki.server_pem())).unwrap()).await;
        let mut builder = SslConnector::builder(SslMethod::tls_client()).unwrap();
        builder.set_ca_file(&ca).unwrap();
        builder.set_max_proto_version(Some(openssl::ssl::SslVersion::TLS1_2)).unwrap();
        let ssl = builder.build().configure().unwrap().into_ssl("localhost").unwrap();
        let mut tls = tokio_openssl::SslStream::new(ssl, TcpStream::connect(server.addr).await.unwrap()).unwrap();
        Pin::new(&mut tls).connect().await.expect("TLS 1.2 handshake");
        round_trip(&mut tls, b"twelve").await;
        let seen = server.negotiated.recv().await.unwrap();
        assert_eq!(seen.version, "TLSv1.2", "{backend}");
        assert!(seen.cipher.contains("ECDHE"), "{backend}: forward-secret suites only, got {}", seen.cipher);
    }
}

/// A Kubernetes-style secret mount: `tls.crt -> ..data/tls.crt`, with `..data` a symlink to
/// a versioned directory, swapped atomically by renaming a new link over it.
struct Mount {
    dir: PathBuf,
    version: usize,
}

impl Mount {
    fn new(dir: &Path, first: &ServerPem) -> Mount {
        let mut mount = Mount { dir: dir.to_path_buf(), version: 0 };
        mount.publish(first);
        std::os::unix::fs::symlink("..data/tls.crt", dir.join("tls.crt")).unwrap();
        std::os::unix::fs::symlink("..data/tls.key", dir.join("tls.key")).unwrap();
        mount
    }

    fn publish(&mut self, pem: &ServerPem) {
        self.version += 1;
        let name = format!("..v{}", self.version);
        std::fs::create_dir(self.dir.join(&name)).unwrap();
        std::fs::write(self.dir.join(&name).join("tls.crt"), &pem.chain).unwrap();
        std::fs::write(self.dir.join(&name).join("tls.key"), &pem.key).unwrap();
        let tmp = self.dir.join("..data_tmp");
        std::os::unix::fs::symlink(&name, &tmp).unwrap();
        std::fs::rename(&tmp, self.dir.join("..data")).unwrap();
    }

    fn source(&self) -> FileSource {
        FileSource::new(self.dir.join("tls.crt"), self.dir.join("tls.key"))
    }
}

/// Connects until the server shows `leaf`, for at most 5 s.
async fn wait_for_leaf(addr: std::net::SocketAddr, ca: &Path, leaf: &[u8]) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if rustls_connect(addr, ca, &[]).await.1 == leaf {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_certificate_reaches_new_connections_while_open_ones_keep_working() {
    let pki = TestPki::new();
    for backend in Backend::ALL {
        let dir = tempfile::tempdir().unwrap();
        let ca = write_ca(dir.path(), &pki);
        let (first, second) = (pki.server_pem(), pki.issue_server());
        let mut mount = Mount::new(&dir.path().join("secret").tap_mkdir(), &first);
        let source = mount.source();
        let acceptor = Acceptor::new(backend, &source.load().unwrap()).unwrap();
        let _reloader = source.watch(acceptor.clone(), Duration::from_millis(50), signet_tls::Trigger::Timer);
        let server = echo_server(acceptor).await;

        let (mut open, shown) = rustls_connect(server.addr, &ca, &[]).await;
        assert_eq!(shown, first.leaf_der, "{backend}");
        round_trip(&mut open, b"before").await;

        mount.publish(&second);
        assert!(wait_for_leaf(server.addr, &ca, &second.leaf_der).await, "{backend}: the new certificate was not picked up");
        round_trip(&mut open, b"after: the open connection is untouched").await;
        let mut ossl = openssl_connect(server.addr, &ca).await;
        assert_eq!(ossl.ssl().peer_certificate().unwrap().to_der().unwrap(), second.leaf_der, "{backend}");
        round_trip(&mut ossl, b"openssl sees it too").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_reload_keeps_serving_the_previous_certificate() {
    let pki = TestPki::new();
    for backend in Backend::ALL {
        let dir = tempfile::tempdir().unwrap();
        let ca = write_ca(dir.path(), &pki);
        let (first, second, third) = (pki.server_pem(), pki.issue_server(), pki.issue_server());
        let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        std::fs::write(&cert, &first.chain).unwrap();
        std::fs::write(&key, &first.key).unwrap();
        let source = FileSource::new(&cert, &key);
        let acceptor = Acceptor::new(backend, &source.load().unwrap()).unwrap();
        let _reloader = source.watch(acceptor.clone(), Duration::from_millis(30), signet_tls::Trigger::Timer);
        let server = echo_server(acceptor).await;

        // A new certificate whose key has not been written yet: a mismatch, for now.
        std::fs::write(&cert, &second.chain).unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(rustls_connect(server.addr, &ca, &[]).await.1, first.leaf_der, "{backend}");
        // Garbage in place of the key: still the first certificate.
        std::fs::write(&key, "not a key\n").unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(rustls_connect(server.addr, &ca, &[]).await.1, first.leaf_der, "{backend}");
        // The matching key arrives: the pair is complete and goes live.
        std::fs::write(&key, &second.key).unwrap();
        assert!(wait_for_leaf(server.addr, &ca, &second.leaf_der).await, "{backend}");
        // A file replaced by rename (the usual atomic write) is picked up as well.
        let tmp = dir.path().join("tmp.pem");
        std::fs::write(&tmp, &third.chain).unwrap();
        std::fs::write(&key, &third.key).unwrap();
        std::fs::rename(&tmp, &cert).unwrap();
        assert!(wait_for_leaf(server.addr, &ca, &third.leaf_der).await, "{backend}");
    }
}

#[test]
fn bad_inputs_are_refused_with_what_was_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let (good, other) = (pki.server_pem(), pki.issue_server());
    let file = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let (cert, key, other_key) = (file("cert.pem", &good.chain), file("key.pem", &good.key), file("other.pem", &other.key));
    let err = |c: &Path, k: &Path| match CertifiedPair::from_files(c, k) {
        Ok(_) => panic!("{} + {} was accepted", c.display(), k.display()),
        Err(e) => (e.to_string(), e),
    };

    let (msg, e) = err(&cert, &other_key);
    assert!(matches!(e, CertError::KeyMismatch { .. }), "{msg}");
    assert!(msg.contains("does not match certificate") && msg.contains("other.pem"), "{msg}");

    let (msg, _) = err(&dir.path().join("absent.pem"), &key);
    assert!(msg.starts_with("cannot read certificate ") && msg.contains("absent.pem"), "{msg}");

    let (msg, _) = err(&file("text.pem", "hello\n"), &key);
    assert!(msg.contains("holds no CERTIFICATE block"), "{msg}");

    let (msg, _) = err(&cert, &file("certs-only.pem", &good.chain));
    assert!(msg.contains("holds no private key"), "{msg}");

    let (msg, _) = err(&file("broken.pem", "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n"), &key);
    assert!(msg.contains("is not PEM") || msg.contains("not valid X.509"), "{msg}");

    // Both backends accept what the check accepted.
    let pair = CertifiedPair::from_files(&cert, &key).unwrap();
    assert!(pair.validity_warning(std::time::SystemTime::now()).is_none());
    for backend in Backend::ALL {
        Acceptor::new(backend, &pair).unwrap();
    }
}

#[test]
fn an_expired_certificate_is_served_with_a_warning() {
    let pki = TestPki::new();
    let expired = pki.issue_expired(2020);
    let pair = pair_of(&expired);
    let warning = pair.validity_warning(std::time::SystemTime::now()).expect("a warning");
    assert!(warning.contains("expired") && warning.contains("chain.pem"), "{warning}");
    for backend in Backend::ALL {
        Acceptor::new(backend, &pair).unwrap();
    }
}

trait TapMkdir {
    fn tap_mkdir(self) -> Self;
}

impl TapMkdir for PathBuf {
    fn tap_mkdir(self) -> Self {
        std::fs::create_dir_all(&self).unwrap();
        self
    }
}

/// A client presenting `client` (chain and key, PEM) through rustls, or none; a round trip
/// through the echo server, or the error that ended it.
async fn rustls_connect_as(addr: std::net::SocketAddr, ca: &Path, client: Option<&ServerPem>) -> std::io::Result<()> {
    let mut roots = rustls::RootCertStore::empty();
    for der in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(der.unwrap()).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(signet_tls::client::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match client {
        None => builder.with_no_client_auth(),
        Some(pem) => {
            let chain = CertificateDer::pem_slice_iter(pem.chain.as_bytes()).map(Result::unwrap).collect();
            builder.with_client_auth_cert(chain, PrivateKeyDer::from_pem_slice(pem.key.as_bytes()).unwrap()).unwrap()
        }
    };
    let tcp = TcpStream::connect(addr).await?;
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config)).connect(ServerName::try_from("localhost").unwrap(), tcp).await?;
    // TLS 1.3 sends the client's certificate after the server's Finished: a refusal arrives
    // with the first read.
    round_trip_result(&mut tls).await
}

/// The same through an OpenSSL client.
async fn openssl_connect_as(addr: std::net::SocketAddr, ca: &Path, client: Option<&ServerPem>) -> std::io::Result<()> {
    let mut builder = SslConnector::builder(SslMethod::tls_client()).unwrap();
    builder.set_ca_file(ca).unwrap();
    if let Some(pem) = client {
        let mut chain = openssl::x509::X509::stack_from_pem(pem.chain.as_bytes()).unwrap().into_iter();
        builder.set_certificate(&chain.next().unwrap()).unwrap();
        for extra in chain {
            builder.add_extra_chain_cert(extra).unwrap();
        }
        builder.set_private_key(&openssl::pkey::PKey::private_key_from_pem(pem.key.as_bytes()).unwrap()).unwrap();
    }
    let ssl = builder.build().configure().unwrap().into_ssl("localhost").unwrap();
    let mut tls = tokio_openssl::SslStream::new(ssl, TcpStream::connect(addr).await?).unwrap();
    Pin::new(&mut tls).connect().await.map_err(std::io::Error::other)?;
    round_trip_result(&mut tls).await
}

async fn round_trip_result<S: AsyncRead + AsyncWrite + Unpin>(tls: &mut S) -> std::io::Result<()> {
    tls.write_all(b"ping").await?;
    tls.flush().await?;
    let mut back = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(5), tls.read_exact(&mut back)).await.map_err(std::io::Error::other)??;
    Ok(())
}

/// An echo server that reports the subject alternative names of each client's verified
/// certificate (none: the client sent none).
async fn mtls_echo(acceptor: Acceptor) -> (std::net::SocketAddr, mpsc::UnboundedReceiver<Option<Vec<String>>>, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, seen) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                let _ = tx.send(tls.peer_certificate().map(|der| signet_tls::subject_alt_names(&der)));
                let mut buf = [0u8; 4];
                if tls.read_exact(&mut buf).await.is_ok() {
                    let _ = tls.write_all(&buf).await;
                    let _ = tls.flush().await;
                }
            });
        }
    });
    (addr, seen, task)
}

/// mTLS on both backends, with rustls and OpenSSL clients: a required client certificate
/// from the client CA is verified and its SAN read; none, or one from another CA, is refused;
/// optional mode lets a client without one in; a new CA bundle takes effect at the next
/// handshake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_backends_verify_client_certificates_and_name_their_san() {
    let dir = tempfile::tempdir().unwrap();
    let (pki, clients, strangers) = (TestPki::new(), TestPki::new(), TestPki::new());
    let ca = write_ca(dir.path(), &pki);
    let ci = clients.issue_client("spiffe://example.org/ci");
    let ops = clients.issue_client("ops@example.org");
    let stranger = strangers.issue_client("spiffe://example.org/ci");
    for backend in Backend::ALL {
        let required = ClientAuth::from_pem(ClientAuthMode::Required, clients.ca_pem.as_bytes(), "clients.pem").unwrap();
        let acceptor = Acceptor::with_client_auth(backend, &pair_of(&pki.server_pem()), &[], Some(&required)).unwrap();
        let (addr, mut seen, task) = mtls_echo(acceptor.clone()).await;
        rustls_connect_as(addr, &ca, Some(&ci)).await.unwrap_or_else(|e| panic!("{backend}: {e}"));
        assert_eq!(seen.recv().await.unwrap(), Some(vec!["spiffe://example.org/ci".to_string()]), "{backend}");
        openssl_connect_as(addr, &ca, Some(&ops)).await.unwrap_or_else(|e| panic!("{backend}: {e}"));
        assert_eq!(seen.recv().await.unwrap(), Some(vec!["ops@example.org".to_string()]), "{backend}");
        assert!(rustls_connect_as(addr, &ca, None).await.is_err(), "{backend}: no certificate, required");
        assert!(openssl_connect_as(addr, &ca, None).await.is_err(), "{backend}: no certificate, required");
        assert!(rustls_connect_as(addr, &ca, Some(&stranger)).await.is_err(), "{backend}: another CA's certificate");
        assert!(openssl_connect_as(addr, &ca, Some(&stranger)).await.is_err(), "{backend}: another CA's certificate");

        // The strangers' CA added to the bundle: their certificate passes from the next handshake.
        let both = format!("{}{}", clients.ca_pem, strangers.ca_pem);
        acceptor.install_client_auth(&ClientAuth::from_pem(ClientAuthMode::Required, both.as_bytes(), "both.pem").unwrap()).unwrap();
        while seen.try_recv().is_ok() {}
        rustls_connect_as(addr, &ca, Some(&stranger)).await.unwrap_or_else(|e| panic!("{backend}: {e}"));
        assert_eq!(seen.recv().await.unwrap(), Some(vec!["spiffe://example.org/ci".to_string()]), "{backend}");
        task.abort();

        let optional = ClientAuth::from_pem(ClientAuthMode::Optional, clients.ca_pem.as_bytes(), "clients.pem").unwrap();
        let acceptor = Acceptor::with_client_auth(backend, &pair_of(&pki.server_pem()), &[], Some(&optional)).unwrap();
        let (addr, mut seen, task) = mtls_echo(acceptor).await;
        rustls_connect_as(addr, &ca, None).await.unwrap_or_else(|e| panic!("{backend}: {e}"));
        assert_eq!(seen.recv().await.unwrap(), None, "{backend}: optional, and none sent");
        openssl_connect_as(addr, &ca, Some(&ci)).await.unwrap_or_else(|e| panic!("{backend}: {e}"));
        assert_eq!(seen.recv().await.unwrap(), Some(vec!["spiffe://example.org/ci".to_string()]), "{backend}");
        assert!(rustls_connect_as(addr, &ca, Some(&stranger)).await.is_err(), "{backend}: optional still verifies what is sent");
        task.abort();
    }
}

#[test]
fn a_client_ca_bundle_without_certificates_is_refused_by_name() {
    let e = ClientAuth::from_pem(ClientAuthMode::Required, b"", "empty.pem").unwrap_err().to_string();
    assert!(e.contains("empty.pem") && e.contains("no CERTIFICATE"), "{e}");
    let e = ClientAuth::from_pem(ClientAuthMode::Required, b"-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n", "bad.pem").unwrap_err().to_string();
    assert!(e.contains("bad.pem"), "{e}");
    assert!("sometimes".parse::<ClientAuthMode>().unwrap_err().to_string().contains("expected optional or required"));
}
