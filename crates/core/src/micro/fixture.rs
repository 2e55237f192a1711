//! Realistic signed inputs for the suites: what a keyless client sends.
//!
//! A fresh ECDSA P-256 key, a certificate for it with an email SAN (self-signed through
//! rcgen: the benchmarks parse and verify it as a leaf, they do not check its chain), and
//! the key's signature over an artifact. The shapes are those of cosign's requests.

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
use serde_json::{json, Value};

use crate::{b64, hash, pem};

pub struct SignedArtifact {
    pub artifact: Vec<u8>,
    pub digest: hash::Hash,
    /// ASN.1 DER ECDSA P-256 signature over the artifact.
    pub signature: Vec<u8>,
    pub spki_der: Vec<u8>,
    /// DER certificate of the signing key.
    pub cert_der: Vec<u8>,
}

impl SignedArtifact {
    pub fn new(artifact: &[u8]) -> SignedArtifact {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).expect("P-256 key");
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref()).expect("P-256 key");
        let signature = pair.sign(&rng, artifact).expect("signing").as_ref().to_vec();
        let spki_der = pair.public_key().as_der().expect("SPKI").as_ref().to_vec();

        let key = rcgen::KeyPair::try_from(pkcs8.as_ref()).expect("rcgen reads a PKCS#8 P-256 key");
        let mut params = rcgen::CertificateParams::default();
        let email = "micro@example.com".try_into().expect("an IA5 string");
        params.subject_alt_names = vec![rcgen::SanType::Rfc822Name(email)];
        let cert_der = params.self_signed(&key).expect("certificate").der().to_vec();
        SignedArtifact { artifact: artifact.to_vec(), digest: hash::sha256(artifact), signature, spki_der, cert_der }
    }

    /// The certificate in PEM, as Rekor v1 requests carry it.
    pub fn cert_pem(&self) -> String {
        pem::encode("CERTIFICATE", &self.cert_der)
    }

    /// A Rekor v1 `hashedrekord` 0.0.1 proposed entry (also the shape of its canonical body).
    pub fn hashedrekord_v1(&self) -> Value {
        json!({
            "apiVersion": "0.0.1",
            "kind": "hashedrekord",
            "spec": {
                "data": {"hash": {"algorithm": "sha256", "value": hex::encode(self.digest)}},
                "signature": {"content": b64::encode(&self.signature), "publicKey": {"content": b64::encode(self.cert_pem())}},
            }
        })
    }

    /// A Rekor v2 `CreateEntryRequest` with a `hashedRekordRequestV002` and the certificate.
    pub fn hashedrekord_v2(&self) -> Value {
        json!({"hashedRekordRequestV002": {
            "digest": b64::encode(self.digest),
            "signature": {"content": b64::encode(&self.signature), "verifier": {
                "x509Certificate": {"rawBytes": b64::encode(&self.cert_der)},
                "keyDetails": "PKIX_ECDSA_P256_SHA_256"}},
        }})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pubkey::{HashAlg, KeyKind, PublicKey};

    #[test]
    fn certificate_holds_the_key_that_signed() {
        let s = SignedArtifact::new(b"a");
        let key = PublicKey::from_certificate(&s.cert_der).unwrap();
        assert_eq!(key.kind, KeyKind::EcdsaP256);
        assert_eq!(key.spki_der, s.spki_der);
        key.verify_digest(HashAlg::Sha256, &s.digest, &s.signature).unwrap();
    }
}
