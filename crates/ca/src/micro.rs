//! The CA's criterion suite (feature `micro`): `signet bench micro ca`, `cargo bench -p signet-ca`.
//!
//! The CPU work of a `signingCert` request after the token is verified, split where the
//! request path waits on the CT log: sign the SCT, then build and sign the final leaf.
//! Plus the TSA's whole reply. The CA (P-384 root; P-256 intermediate, the default, or P-384,
//! Fulcio's) and the TSA are created in a temporary data dir, as `serve --dev` creates them.

use std::hint::black_box;
use std::time::{SystemTime, UNIX_EPOCH};

use der::asn1::{Int, ObjectIdentifier, OctetString};
use der::{Decode, Encode};
use signet_keys::Signer;
use signet_core::micro::criterion::Criterion;
use signet_core::micro::fixture::SignedArtifact;
use signet_core::micro::{measure, Bench, Opts, Suite};
use spki::SubjectPublicKeyInfoOwned;
use x509_tsp::{MessageImprint, TimeStampReq, TspVersion};

use crate::authority::{Authority, CaKeys};
use crate::ct::{self, Sct};
use crate::oidc::{Identity, SanKind};
use crate::tsa::Tsa;
use crate::x509::{self, CaCurve};

pub fn suite() -> Suite {
    let b = |id, about, run| Bench { id, about, run };
    Suite {
        name: "ca",
        about: "certificate authority: leaf issuance, SCTs, RFC 3161 timestamps",
        benches: vec![
            b("ca/issue/leaf_p256", "build the Fulcio leaf TBS for a P-256 key (SAN, issuer extensions, embedded SCT) and sign it with a P-256 intermediate (the default)", issue_leaf),
            b("ca/issue/leaf_p256_by_p384", "the same leaf, signed with a P-384 intermediate (ca.intermediate_key = \"p384\", as Fulcio's)", issue_leaf_by_p384),
            b("ca/ct/sct_sign", "RFC 6962 precert entry of a leaf TBS and its SCT signature (ECDSA P-256)", sct_sign),
            b("ca/tsa/timestamp", "RFC 3161: parse a DER TimeStampReq and build the signed TimeStampResp (CMS, ECDSA P-256)", timestamp),
        ],
    }
}

/// The CA in a temporary data dir, which lives as long as it.
struct Ca {
    authority: Authority,
    dir: tempfile::TempDir,
}

fn ca() -> Ca {
    ca_with(CaCurve::P256)
}

fn ca_with(intermediate: CaCurve) -> Ca {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let authority = Authority::open(dir.path(), &CaKeys::curve(Some(intermediate))).expect("the CA opens");
    Ca { authority, dir }
}

fn identity() -> Identity {
    Identity {
        issuer: "https://oauth2.sigstore.dev/auth".into(),
        subject: "micro@example.com".into(),
        kind: SanKind::Email,
        token_subject: "bench-subject".into(),
        extensions: Vec::new(),
        claims: Default::default(),
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The client's P-256 key, and the TBS an SCT is signed over (the precertificate's, unpoisoned).
fn leaf_inputs(ca: &Ca) -> (SubjectPublicKeyInfoOwned, Vec<u8>) {
    let spki = SubjectPublicKeyInfoOwned::from_der(&SignedArtifact::new(b"key").spki_der).expect("SPKI");
    let serial = x509::random_serial().expect("serial");
    let tbs = ca.authority.leaf_tbs(&identity(), spki.clone(), serial, SystemTime::now(), None).expect("TBS");
    (spki, tbs.to_der().expect("DER"))
}

fn issue_leaf(c: &mut Criterion, bench: &Bench) {
    issue_leaf_with(c, bench, CaCurve::P256)
}

fn issue_leaf_by_p384(c: &mut Criterion, bench: &Bench) {
    issue_leaf_with(c, bench, CaCurve::P384)
}

fn issue_leaf_with(c: &mut Criterion, bench: &Bench, intermediate: CaCurve) {
    let ca = ca_with(intermediate);
    let (spki, tbs) = leaf_inputs(&ca);
    let ct_key = Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).expect("P-256 key");
    let ikh = signet_core::hash::sha256(ca.authority.issuer_spki_der());
    let leaf = ct::precert_leaf(now_ms(), &ikh, &tbs).expect("precert entry");
    let sct = Sct { log_id: *ct_key.key_id(), timestamp_ms: now_ms(), signature: ct_key.sign(&leaf).expect("signs") };
    let identity = identity();
    measure(c, bench, Opts::default(), |b| {
        b.iter(|| {
            let ext = ct::sct_list_extension(std::slice::from_ref(&sct)).expect("SCT list");
            let serial = x509::random_serial().expect("serial");
            let tbs = ca.authority.leaf_tbs(&identity, spki.clone(), serial, SystemTime::now(), Some(ext)).expect("TBS");
            ca.authority.sign(tbs).expect("signs")
        })
    });
}

fn sct_sign(c: &mut Criterion, bench: &Bench) {
    let ca = ca();
    let (_, tbs) = leaf_inputs(&ca);
    let key = Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).expect("P-256 key");
    let ikh = signet_core::hash::sha256(ca.authority.issuer_spki_der());
    measure(c, bench, Opts::default(), |b| {
        b.iter(|| {
            let ts = now_ms();
            let leaf = ct::precert_leaf(ts, &ikh, black_box(&tbs)).expect("precert entry");
            Sct { log_id: *key.key_id(), timestamp_ms: ts, signature: key.sign(&leaf).expect("signs") }
        })
    });
}

/// A `TimeStampReq` as sigstore clients send it: SHA-256 imprint, a nonce, certReq.
fn timestamp_request() -> Vec<u8> {
    const SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.1");
    TimeStampReq {
        version: TspVersion::V1,
        message_imprint: MessageImprint {
            hash_algorithm: spki::AlgorithmIdentifier { oid: SHA256, parameters: None },
            hashed_message: OctetString::new(signet_core::hash::sha256(b"signature").to_vec()).expect("octets"),
        },
        req_policy: None,
        nonce: Some(Int::new(&[0x41, 2, 3, 4, 5, 6, 7, 8]).expect("nonce")),
        cert_req: true,
        extensions: None,
    }
    .to_der()
    .expect("DER")
}

fn timestamp(c: &mut Criterion, bench: &Bench) {
    let ca = ca();
    let key = signet_keys::Signer::load_or_generate(&ca.dir.path().join("keys").join("tsa.pem"), signet_keys::Algorithm::EcdsaP256Sha256).expect("TSA key");
    let root_key = || CaKeys::default().root_key(ca.dir.path());
    let tsa = Tsa::open(ca.dir.path(), std::sync::Arc::new(key), root_key, ca.authority.root_der()).expect("the TSA opens");
    let req = timestamp_request();
    measure(c, bench, Opts::default(), |b| {
        b.iter(|| tsa.timestamp(&Tsa::parse_der(black_box(&req)).expect("parses")).expect("grants"))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_what_the_service_accepts() {
        let ca = ca();
        let (spki, tbs) = leaf_inputs(&ca);
        let cert = x509_cert::Certificate::from_der(
            &ca.authority.sign(x509_cert::TbsCertificate::from_der(&tbs).unwrap()).unwrap(),
        )
        .unwrap();
        assert_eq!(cert.tbs_certificate.subject_public_key_info, spki);
        let req = Tsa::parse_der(&timestamp_request()).unwrap();
        assert!(req.cert_req && req.nonce.is_some() && req.digest.len() == 32);
    }
}
