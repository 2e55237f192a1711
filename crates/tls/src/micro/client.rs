//! Report 002's client-side costs, measured in signet's client stack: loading the platform
//! trust store, verifying a handshake signature per algorithm (aws-lc-rs, which rustls uses,
//! beside OpenSSL), and sealing and opening one 16-byte record. Report 002 found its client
//! slow in all three: 0.4 / 0.8 ms per ECDSA P-256 / P-384 verify, a trust store loaded per
//! handshake, and 30-50 µs of AES-GCM context setup per record.

use std::hint::black_box;
use std::io::{Read, Write};
use std::sync::Arc;

use aws_lc_rs::signature::{self as lc, UnparsedPublicKey};
use openssl::bn::BigNumContext;
use openssl::ec::{EcGroup, EcKey, PointConversionForm};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{PKey, Private};
use openssl::rsa::{Padding, Rsa};
use openssl::sign::{RsaPssSaltlen, Signer, Verifier};
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
        b("tls/verify_rsa2048/aws-lc-rs", "an RSA-2048 PSS SHA-256 signature over a CertificateVerify-sized message, verified by aws-lc-rs (rustls' provider), key parsed each time as a handshake does", verify_rsa_lc),
        b("tls/verify_rsa2048/openssl", "the same verification with OpenSSL (key parsed once)", verify_rsa_openssl),
        b("tls/verify_p256/aws-lc-rs", "an ECDSA P-256 SHA-256 signature, verified by aws-lc-rs", verify_p256_lc),
        b("tls/verify_p256/openssl", "the same with OpenSSL", verify_p256_openssl),
        b("tls/verify_p384/aws-lc-rs", "an ECDSA P-384 SHA-384 signature, verified by aws-lc-rs", verify_p384_lc),
        b("tls/verify_p384/openssl", "the same with OpenSSL", verify_p384_openssl),
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

/// TLS 1.3's CertificateVerify signs 64 spaces, a 33-byte context string and a transcript hash.
const MESSAGE: [u8; 130] = [0x20; 130];

#[derive(Clone, Copy)]
enum Kind {
    Rsa2048,
    P256,
    P384,
}

/// A key pair of `kind`, its public key as aws-lc-rs reads it, and a signature over MESSAGE.
struct Signed {
    key: PKey<Private>,
    public: Vec<u8>,
    algorithm: &'static dyn lc::VerificationAlgorithm,
    digest: MessageDigest,
    signature: Vec<u8>,
}

fn signed(kind: Kind) -> Signed {
    let ec = |nid: Nid| {
        let group = EcGroup::from_curve_name(nid).expect("a named curve");
        let key = EcKey::generate(&group).expect("an EC key");
        let mut ctx = BigNumContext::new().expect("a BN context");
        let public = key.public_key().to_bytes(&group, PointConversionForm::UNCOMPRESSED, &mut ctx).expect("the point");
        (PKey::from_ec_key(key).expect("a PKey"), public)
    };
    let (key, public, algorithm, digest): (_, _, &'static dyn lc::VerificationAlgorithm, _) = match kind {
        Kind::Rsa2048 => {
            let rsa = Rsa::generate(2048).expect("an RSA key");
            let public = rsa.public_key_to_der_pkcs1().expect("PKCS#1");
            (PKey::from_rsa(rsa).expect("a PKey"), public, &lc::RSA_PSS_2048_8192_SHA256, MessageDigest::sha256())
        }
        Kind::P256 => {
            let (k, p) = ec(Nid::X9_62_PRIME256V1);
            (k, p, &lc::ECDSA_P256_SHA256_ASN1, MessageDigest::sha256())
        }
        Kind::P384 => {
            let (k, p) = ec(Nid::SECP384R1);
            (k, p, &lc::ECDSA_P384_SHA384_ASN1, MessageDigest::sha384())
        }
    };
    let mut signer = Signer::new(digest, &key).expect("a signer");
    if matches!(kind, Kind::Rsa2048) {
        signer.set_rsa_padding(Padding::PKCS1_PSS).expect("PSS");
        signer.set_rsa_pss_saltlen(RsaPssSaltlen::DIGEST_LENGTH).expect("salt length");
    }
    let signature = signer.sign_oneshot_to_vec(&MESSAGE).expect("a signature");
    Signed { key, public, algorithm, digest, signature }
}

fn verify_lc(c: &mut Criterion, bench: &Bench, kind: Kind) {
    let s = signed(kind);
    UnparsedPublicKey::new(s.algorithm, &s.public).verify(&MESSAGE, &s.signature).expect("aws-lc-rs verifies OpenSSL's signature");
    measure(c, bench, Opts::default(), |b| {
        b.iter(|| black_box(UnparsedPublicKey::new(s.algorithm, black_box(&s.public)).verify(&MESSAGE, black_box(&s.signature)).is_ok()))
    });
}

fn verify_openssl(c: &mut Criterion, bench: &Bench, kind: Kind) {
    let s = signed(kind);
    let verify = || {
        let mut v = Verifier::new(s.digest, &s.key).expect("a verifier");
        if matches!(kind, Kind::Rsa2048) {
            v.set_rsa_padding(Padding::PKCS1_PSS).expect("PSS");
            v.set_rsa_pss_saltlen(RsaPssSaltlen::DIGEST_LENGTH).expect("salt length");
        }
        v.verify_oneshot(black_box(&s.signature), &MESSAGE).unwrap_or(false)
    };
    assert!(verify(), "OpenSSL verifies its own signature");
    measure(c, bench, Opts::default(), |b| b.iter(|| black_box(verify())));
}

fn verify_rsa_lc(c: &mut Criterion, bench: &Bench) {
    verify_lc(c, bench, Kind::Rsa2048)
}
fn verify_rsa_openssl(c: &mut Criterion, bench: &Bench) {
    verify_openssl(c, bench, Kind::Rsa2048)
}
fn verify_p256_lc(c: &mut Criterion, bench: &Bench) {
    verify_lc(c, bench, Kind::P256)
}
fn verify_p256_openssl(c: &mut Criterion, bench: &Bench) {
    verify_openssl(c, bench, Kind::P256)
}
fn verify_p384_lc(c: &mut Criterion, bench: &Bench) {
    verify_lc(c, bench, Kind::P384)
}
fn verify_p384_openssl(c: &mut Criterion, bench: &Bench) {
    verify_openssl(c, bench, Kind::P384)
}

/// A rustls client and server with a finished TLS 1.3 handshake between them, in memory.
pub(crate) fn connected_pair() -> (ClientConnection, ServerConnection) {
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
    fn both_libraries_accept_the_signatures_and_refuse_a_changed_one() {
        for kind in [Kind::Rsa2048, Kind::P256, Kind::P384] {
            let s = signed(kind);
            assert!(UnparsedPublicKey::new(s.algorithm, &s.public).verify(&MESSAGE, &s.signature).is_ok());
            let mut bad = s.signature.clone();
            let last = bad.len() - 1;
            bad[last] ^= 1;
            assert!(UnparsedPublicKey::new(s.algorithm, &s.public).verify(&MESSAGE, &bad).is_err());
            let mut v = Verifier::new(s.digest, &s.key).unwrap();
            if matches!(kind, Kind::Rsa2048) {
                v.set_rsa_padding(Padding::PKCS1_PSS).unwrap();
                v.set_rsa_pss_saltlen(RsaPssSaltlen::DIGEST_LENGTH).unwrap();
            }
            assert!(!v.verify_oneshot(&bad, &MESSAGE).unwrap_or(false));
        }
    }

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
