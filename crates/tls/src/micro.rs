//! The TLS layer's criterion suite (feature `micro`): `signet bench micro tls`, `cargo bench -p signet-tls`.
//!
//! Report 003 compares TLS libraries by handshake cost and by throughput per payload size.
//! These benches measure both through signet's own acceptors, rustls (aws-lc-rs) and OpenSSL,
//! over an in-memory pipe, so that no socket or scheduler noise enters: what is left is the
//! CPU of both ends. The client is rustls in every case, so the two rows differ only by the
//! server's library. The certificate is ECDSA P-256, from a throwaway CA
//! ([`crate::testing::TestPki`]).

use std::hint::black_box;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use signet_core::micro::criterion::{Criterion, Throughput};
use signet_core::micro::{measure, Bench, Opts, Suite};
use tokio::io::{duplex, AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::runtime::Runtime;

use crate::backend::HTTP_ALPN;
use crate::certified::CertifiedPair;
use crate::client::provider;
use crate::openssl_acceptor::OpensslAcceptor;
use crate::rustls_acceptor::RustlsAcceptor;
use crate::testing::TestPki;

mod client;

/// The largest TLS record's plaintext (RFC 8446 §5.1), report 003's biggest payload.
const RECORD: usize = 16 * 1024;

/// Room in the pipe for a whole flight or record, so neither side waits on the other mid-write.
const PIPE: usize = 64 * 1024;

pub fn suite() -> Suite {
    let b = |id, about, run| Bench { id, about, run };
    Suite {
        name: "tls",
        about: "the TLS layer: handshakes and 16 KiB records through the rustls and OpenSSL acceptors; the client side (report 002): the trust store and a 16 B record",
        benches: vec![
            b("tls/handshake/rustls", "a full TLS 1.3 handshake (X25519, ECDSA P-256 certificate, ALPN) between a rustls client and the rustls acceptor, in memory", handshake_rustls),
            b("tls/handshake/openssl", "the same handshake against the OpenSSL acceptor", handshake_openssl),
            b("tls/record_16k/rustls", "16 KiB of application data from the rustls acceptor's side to the client: one AES-256-GCM record sealed and opened", record_rustls),
            b("tls/record_16k/openssl", "the same record from the OpenSSL acceptor's side", record_openssl),
        ]
        .into_iter()
        .chain(client::benches())
        .collect(),
    }
}

/// A server certificate, the client that trusts it, and a runtime to drive both ends.
struct Fixture {
    pair: CertifiedPair,
    client: tokio_rustls::TlsConnector,
    rt: Runtime,
}

fn fixture() -> Fixture {
    let pki = TestPki::new();
    let pem = pki.server_pem();
    let pair = CertifiedPair::from_pem(pem.chain.as_bytes(), pem.key.as_bytes(), "chain", "key").expect("the test pair");
    let mut roots = RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(pki.ca_pem.as_bytes()).expect("the test CA's PEM")).expect("the test CA");
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    // A bench of full handshakes: resumption would measure something else.
    config.resumption = rustls::client::Resumption::disabled();
    let rt = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
    Fixture { pair, client: tokio_rustls::TlsConnector::from(Arc::new(config)), rt }
}

fn server_name() -> ServerName<'static> {
    ServerName::try_from("localhost").expect("a DNS name")
}

type Client = tokio_rustls::client::TlsStream<DuplexStream>;

/// One server side of signet-tls; both acceptors behind one call, for the benches.
enum Server {
    Rustls(RustlsAcceptor),
    Openssl(OpensslAcceptor),
}

impl Server {
    fn new(openssl: bool, pair: &CertifiedPair) -> Server {
        if openssl {
            Server::Openssl(OpensslAcceptor::new(pair, HTTP_ALPN, None).expect("the OpenSSL acceptor"))
        } else {
            Server::Rustls(RustlsAcceptor::new(pair, HTTP_ALPN, None).expect("the rustls acceptor"))
        }
    }

    /// A handshake over a fresh pipe; the established ends.
    async fn connect(&self, f: &Fixture) -> (Client, Box<dyn Established>) {
        let (c, s) = duplex(PIPE);
        let client = f.client.connect(server_name(), c);
        match self {
            Server::Rustls(a) => {
                let (c, s) = tokio::join!(client, a.accept(s));
                (c.expect("client handshake"), Box::new(s.expect("rustls handshake")))
            }
            Server::Openssl(a) => {
                let (c, s) = tokio::join!(client, a.accept(s));
                (c.expect("client handshake"), Box::new(s.expect("OpenSSL handshake")))
            }
        }
    }
}

/// The server end of an established connection, whichever library holds it.
trait Established: tokio::io::AsyncWrite + Unpin {}
impl<T: tokio::io::AsyncWrite + Unpin> Established for T {}

fn handshake(c: &mut Criterion, bench: &Bench, openssl: bool) {
    let f = fixture();
    let server = Server::new(openssl, &f.pair);
    measure(c, bench, Opts::default(), |b| b.iter(|| black_box(f.rt.block_on(server.connect(&f)))));
}

fn record(c: &mut Criterion, bench: &Bench, openssl: bool) {
    let f = fixture();
    let server = Server::new(openssl, &f.pair);
    let (mut client, mut established) = f.rt.block_on(server.connect(&f));
    let data = vec![0x5a; RECORD];
    let mut got = vec![0; RECORD];
    let opts = Opts { throughput: Some(Throughput::Bytes(RECORD as u64)), ..Opts::default() };
    measure(c, bench, opts, |b| {
        b.iter(|| {
            f.rt.block_on(async {
                established.write_all(black_box(&data)).await.expect("server writes");
                established.flush().await.expect("server flushes");
                client.read_exact(&mut got).await.expect("client reads");
            })
        })
    });
    assert_eq!(got, data, "the record arrives intact");
}

fn handshake_rustls(c: &mut Criterion, bench: &Bench) {
    handshake(c, bench, false)
}

fn handshake_openssl(c: &mut Criterion, bench: &Bench) {
    handshake(c, bench, true)
}

fn record_rustls(c: &mut Criterion, bench: &Bench) {
    record(c, bench, false)
}

fn record_openssl(c: &mut Criterion, bench: &Bench) {
    record(c, bench, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_acceptors_complete_a_handshake_and_carry_a_record() {
        let f = fixture();
        for openssl in [false, true] {
            let server = Server::new(openssl, &f.pair);
            let (mut client, mut established) = f.rt.block_on(server.connect(&f));
            assert_eq!(client.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]), "openssl={openssl}");
            assert_eq!(client.get_ref().1.protocol_version(), Some(rustls::ProtocolVersion::TLSv1_3));
            // Both rows agree on the same groups and suite, so they compare libraries, not choices.
            let conn = client.get_ref().1;
            assert_eq!(conn.negotiated_key_exchange_group().map(|g| g.name()), Some(rustls::NamedGroup::X25519));
            assert_eq!(conn.negotiated_cipher_suite().map(|c| c.suite()), Some(rustls::CipherSuite::TLS13_AES_256_GCM_SHA384));
            let data: Vec<u8> = (0..RECORD).map(|i| i as u8).collect();
            let mut got = vec![0; RECORD];
            f.rt.block_on(async {
                established.write_all(&data).await.unwrap();
                established.flush().await.unwrap();
                client.read_exact(&mut got).await.unwrap();
            });
            assert_eq!(got, data, "openssl={openssl}");
        }
    }
}
