//! X.509 certificates as the verifier needs them: the exact signed bytes, the validity
//! window, the key, and signature checks by an issuer. Decoding is x509-cert's; signatures
//! go through `signet_core::pubkey` (aws-lc-rs).

use der::asn1::ObjectIdentifier;
use der::{Decode, Header, Reader, SliceReader, Tag};
use signet_core::pubkey::{HashAlg, PublicKey};
use x509_cert::ext::pkix::BasicConstraints;
use x509_cert::ext::Extension;
use x509_cert::Certificate;

use crate::time::Window;

pub const OID_BASIC_CONSTRAINTS: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.19");
pub const OID_KEY_USAGE: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.15");
pub const OID_EXT_KEY_USAGE: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.37");
pub const OID_SUBJECT_ALT_NAME: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.17");

/// Why a certificate could not be read or checked. Each message says what was wrong; the
/// verifier's checks wrap it in their own [`crate::VerifyError`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CertError {
    #[error("not a DER X.509 certificate: {0}")]
    NotDer(String),
    /// Its public key cannot be used (the key parser's reason).
    #[error("{0}")]
    Key(String),
    #[error("certificate is not a DER SEQUENCE")]
    NotASequence,
    #[error("certificate has no tbsCertificate")]
    NoTbs,
    #[error("issuer {issuer} is not the subject {ca} of the CA certificate")]
    IssuerMismatch { issuer: String, ca: String },
    #[error("certificate signature has unused bits")]
    UnusedBits,
    #[error("signature by {0} does not verify")]
    BadSignature(String),
    #[error("digest algorithm {0} is not supported (expected SHA-256, SHA-384 or SHA-512)")]
    UnsupportedDigest(ObjectIdentifier),
    #[error("signature algorithm {0} names no hash")]
    NoHash(ObjectIdentifier),
    #[error("signature algorithm {0} is not supported")]
    UnsupportedSignature(ObjectIdentifier),
}

/// A parsed certificate that keeps its DER, so that signed bytes are checked exactly as sent.
#[derive(Debug, Clone)]
pub struct Cert {
    pub der: Vec<u8>,
    pub x509: Certificate,
    pub key: PublicKey,
    pub validity: Window,
}

impl Cert {
    pub fn parse(der: &[u8]) -> Result<Cert, CertError> {
        let x509 = Certificate::from_der(der).map_err(|e| CertError::NotDer(e.to_string()))?;
        let key = PublicKey::from_certificate(der).map_err(|e| CertError::Key(e.to_string()))?;
        let v = &x509.tbs_certificate.validity;
        let validity = Window {
            start: v.not_before.to_unix_duration().as_secs() as i64,
            end: Some(v.not_after.to_unix_duration().as_secs() as i64),
        };
        Ok(Cert { der: der.to_vec(), x509, key, validity })
    }

    /// The DER of `tbsCertificate` exactly as it appears in the certificate.
    pub fn tbs_der(&self) -> Result<&[u8], CertError> {
        let outer = next_tlv(&self.der).ok_or(CertError::NotASequence)?;
        Ok(next_tlv(outer.value).ok_or(CertError::NoTbs)?.whole)
    }

    pub fn extension(&self, oid: ObjectIdentifier) -> Option<&Extension> {
        self.x509.tbs_certificate.extensions.as_deref()?.iter().find(|e| e.extn_id == oid)
    }

    pub fn is_ca(&self) -> bool {
        self.extension(OID_BASIC_CONSTRAINTS)
            .and_then(|e| BasicConstraints::from_der(e.extn_value.as_bytes()).ok())
            .is_some_and(|bc| bc.ca)
    }

    /// Subject equals issuer: a root (or another self-issued certificate).
    pub fn is_self_issued(&self) -> bool {
        self.x509.tbs_certificate.subject == self.x509.tbs_certificate.issuer
    }

    /// Checks that `issuer` issued this certificate: names chain and the signature verifies.
    pub fn check_issued_by(&self, issuer: &Cert) -> Result<(), CertError> {
        if self.x509.tbs_certificate.issuer != issuer.x509.tbs_certificate.subject {
            return Err(CertError::IssuerMismatch {
                issuer: self.x509.tbs_certificate.issuer.to_string(),
                ca: issuer.x509.tbs_certificate.subject.to_string(),
            });
        }
        let sig = self.x509.signature.as_bytes().ok_or(CertError::UnusedBits)?;
        let alg = &self.x509.signature_algorithm;
        let hash = signature_hash(alg.oid, None)?;
        issuer
            .key
            .verify_with_hash(hash, self.tbs_der()?, sig)
            .map_err(|_| CertError::BadSignature(issuer.x509.tbs_certificate.subject.to_string()))
    }
}

const ECDSA_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.2");
const ECDSA_SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.3");
const ECDSA_SHA512: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.4");
const RSA_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.11");
const RSA_SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.12");
const RSA_SHA512: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.13");
const ED25519: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.112");
const EC_PUBLIC_KEY: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
const RSA_ENCRYPTION: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");
pub const SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.1");
pub const SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.2");
pub const SHA512: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.3");

/// The hash that a digest-algorithm OID names.
pub fn digest_alg(oid: ObjectIdentifier) -> Result<HashAlg, CertError> {
    match oid {
        o if o == SHA256 => Ok(HashAlg::Sha256),
        o if o == SHA384 => Ok(HashAlg::Sha384),
        o if o == SHA512 => Ok(HashAlg::Sha512),
        o => Err(CertError::UnsupportedDigest(o)),
    }
}

/// The hash a signature algorithm OID implies. CMS may name only the key type
/// (id-ecPublicKey, rsaEncryption), and then the digest algorithm says which hash.
pub fn signature_hash(oid: ObjectIdentifier, digest: Option<ObjectIdentifier>) -> Result<HashAlg, CertError> {
    match oid {
        o if o == ECDSA_SHA256 || o == RSA_SHA256 => Ok(HashAlg::Sha256),
        o if o == ECDSA_SHA384 || o == RSA_SHA384 => Ok(HashAlg::Sha384),
        o if o == ECDSA_SHA512 || o == RSA_SHA512 => Ok(HashAlg::Sha512),
        // Ed25519 hashes internally; the value is unused for it.
        o if o == ED25519 => Ok(HashAlg::Sha512),
        o if o == EC_PUBLIC_KEY || o == RSA_ENCRYPTION => match digest {
            Some(d) => digest_alg(d),
            None => Err(CertError::NoHash(o)),
        },
        o => Err(CertError::UnsupportedSignature(o)),
    }
}

/// One DER element and what follows it.
pub struct Tlv<'a> {
    pub tag: Tag,
    pub value: &'a [u8],
    /// The whole element: header and value.
    pub whole: &'a [u8],
    pub rest: &'a [u8],
}

/// Splits the first DER TLV off `input`.
pub fn next_tlv(input: &[u8]) -> Option<Tlv<'_>> {
    let mut r = SliceReader::new(input).ok()?;
    let header = Header::decode(&mut r).ok()?;
    let hlen = usize::try_from(r.position()).ok()?;
    let end = hlen.checked_add(usize::try_from(header.length).ok()?)?;
    if end > input.len() {
        return None;
    }
    Some(Tlv { tag: header.tag, value: &input[hlen..end], whole: &input[..end], rest: &input[end..] })
}
