//! Report 002's client-side costs inside signet's TLS client: loading the platform trust store,
//! and sealing and opening one 16-byte record through real rustls connections (report 002
//! found 30-50 µs of AES-GCM context setup per record; here keys are set up once per
//! direction). Signature verification per algorithm, beside OpenSSL, is `signet bench crypto`'s.

use std::hint::black_box;
use std::io::{Read, Write};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};
use signet_core::micro::criterion::{Criterion, Throughput};
use signet_core::micro::{measure, Bench, Opts};

use crate::client::{client_config, provider, Trust};
use crate::testing::TestPki;

pub fn benches() -> Vec<Bench> {
    let b = |id, about, run| Bench { id, about, run };
    vec![
        b("tls/trust_store/load", "reading and parsing the platform's CA certificates (rustls-native-certs), as a client that loads them per connection would", trust_store_load),
        b("tls/trust_store/cached", "a client config over the platform's roots once they are loaded: what signet's client pays after the first", trust_store_cached),
        b("tls/record_16b/rustls", "one 16-byte TLS 1.3 record (AES-256-GCM) sealed by a rustls client and opened by a rustls server, in memory: the per-record cost once keys are set up", record_16b),
    ]
}

fn trust_store_load(c: &mut Criterion, bench: &Bench) {
    measure(c, bench, Opts { slow: true, ..Opts::default() }, |b| {
        b.iter(|| {
            let mut store = RootCertStore::empty();
            let (added, _) = store.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
            black_box(added)
        })
    });
}

fn trust_store_cached(c: &mut Criterion, bench: &Bench) {
    client_config(&Trust::Platform).expect("the platform's CA certificates");
    measure(c, bench, Opts::default(), |b| b.iter(|| black_box(client_config(&Trust::Platform).expect("cached roots"))));
}

/// A rustls client and server with a finished TLS 1.3 handshake between them, in memory.
fn connected_pair() -> (ClientConnection, ServerConnection) {
    let pki = TestPki::new();
    let pem = pki.server_pem();
    let chain = CertificateDer::pem_slice_iter(pem.chain.as_bytes()).collect::<Result<Vec<_>, _>>().expect("the chain");
    let key = PrivateKeyDer::from_pem_slice(pem.key.as_bytes()).expect("the key");
    let server = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("the server config");
    let mut roots = RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(pki.ca_pem.as_bytes()).expect("the CA")).expect("the CA");
    let client = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from("localhost").expect("a name");
    let mut c = ClientConnection::new(Arc::new(client), name).expect("a client");
    let mut s = ServerConnection::new(Arc::new(server)).expect("a server");
    while c.is_handshaking() || s.is_handshaking() {
        pump(&mut c, &mut s);
    }
    pump(&mut c, &mut s); // the session tickets
    (c, s)
}

/// Moves whatever each side has to send to the other.
fn pump(c: &mut ClientConnection, s: &mut ServerConnection) {
    let mut wire = Vec::new();
    while c.wants_write() {
        c.write_tls(&mut wire).expect("client writes");
    }
    let mut input = &wire[..];
    while !input.is_empty() {
        s.read_tls(&mut input).expect("server reads");
    }
    s.process_new_packets().expect("server processes");
    wire.clear();
    while s.wants_write() {
        s.write_tls(&mut wire).expect("server writes");
    }
    let mut input = &wire[..];
    while !input.is_empty() {
        c.read_tls(&mut input).expect("client reads");
    }
    c.process_new_packets().expect("client processes");
}

fn record_16b(c: &mut Criterion, bench: &Bench) {
    let (mut client, mut server) = connected_pair();
    let data = [0x5a_u8; 16];
    let mut wire = Vec::with_capacity(64);
    let mut got = [0_u8; 16];
    let opts = Opts { throughput: Some(Throughput::Bytes(16)), ..Opts::default() };
    measure(c, bench, opts, |b| {
        b.iter(|| {
            client.writer().write_all(black_box(&data)).expect("plaintext in");
            wire.clear();
            client.write_tls(&mut wire).expect("one record out");
            server.read_tls(&mut &wire[..]).expect("the record in");
            server.process_new_packets().expect("opened");
            server.reader().read_exact(&mut got).expect("plaintext out");
        })
    });
    assert_eq!(got, data, "the record arrives intact");
    assert_eq!(wire.len(), 5 + 16 + 1 + 16, "one record: header, data, content type, tag");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sixteen_bytes_travel_as_one_record_and_the_platform_roots_load_once() {
        let (mut client, mut server) = connected_pair();
        client.writer().write_all(b"0123456789abcdef").unwrap();
        let mut wire = Vec::new();
        client.write_tls(&mut wire).unwrap();
        assert_eq!(wire.len(), 38);
        server.read_tls(&mut &wire[..]).unwrap();
        server.process_new_packets().unwrap();
        let mut got = [0; 16];
        server.reader().read_exact(&mut got).unwrap();
        assert_eq!(&got, b"0123456789abcdef");
        // Once the platform's roots loaded, later configs do not read them again.
        if client_config(&Trust::Platform).is_ok() {
            let loads = crate::client::platform_loads();
            client_config(&Trust::Platform).unwrap();
            client_config(&Trust::Platform).unwrap();
            assert_eq!(crate::client::platform_loads(), loads);
            assert!(loads >= 1);
        }
    }
}
