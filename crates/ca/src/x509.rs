//! Building and signing X.509 certificates from RustCrypto's types, signed with AWS-LC.
//!
//! Certificates are assembled field by field rather than through a builder: the CT
//! precertificate flow needs two TBS certificates that differ in exactly one extension,
//! byte for byte, and that is easiest to guarantee when signet writes every field itself.

use std::time::{Duration, SystemTime};

use der::asn1::{BitString, ObjectIdentifier, OctetString};
use der::{Decode, Encode};
use signet_core::hash::sha256;
use signet_keys::{Algorithm, KeyError, KeySource, Pkcs11Settings, Signer};
use spki::{AlgorithmIdentifierOwned, SubjectPublicKeyInfoOwned};
use x509_cert::certificate::{Certificate, TbsCertificate, Version};
use x509_cert::ext::Extension;
use x509_cert::name::Name;
use x509_cert::serial_number::SerialNumber;
use x509_cert::time::{Time, Validity};

pub const ECDSA_WITH_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.2");
pub const ECDSA_WITH_SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.3");

/// The curve of a CA key, which fixes its hash: P-256 with SHA-256, P-384 with SHA-384.
///
/// Fulcio's own CA is P-384 throughout. signet's root stays P-384, but a new intermediate is
/// P-256 unless configured otherwise: it signs every leaf, a P-384 signature costs about six
/// times a P-256 one (docs/performance.md, report 002), and the leaves, logs and TSA that
/// the chain vouches for are all P-256 already, so P-384 buys no strength the bundle keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaCurve {
    P256,
    P384,
}

impl CaCurve {
    pub fn algorithm(self) -> Algorithm {
        match self {
            CaCurve::P256 => Algorithm::EcdsaP256Sha256,
            CaCurve::P384 => Algorithm::EcdsaP384Sha384,
        }
    }

    fn of(algorithm: Algorithm) -> Option<CaCurve> {
        [CaCurve::P256, CaCurve::P384].into_iter().find(|c| c.algorithm() == algorithm)
    }

    pub fn signature_oid(self) -> ObjectIdentifier {
        match self {
            CaCurve::P256 => ECDSA_WITH_SHA256,
            CaCurve::P384 => ECDSA_WITH_SHA384,
        }
    }

    /// How the configuration spells it (`ca.intermediate_key`).
    pub fn config_name(self) -> &'static str {
        match self {
            CaCurve::P256 => "p256",
            CaCurve::P384 => "p384",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            CaCurve::P256 => "P-256",
            CaCurve::P384 => "P-384",
        }
    }
}

impl std::fmt::Display for CaCurve {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for CaCurve {
    type Err = UnknownCurve;

    fn from_str(s: &str) -> Result<CaCurve, UnknownCurve> {
        match s.to_ascii_lowercase().replace('-', "").as_str() {
            "p256" => Ok(CaCurve::P256),
            "p384" => Ok(CaCurve::P384),
            _ => Err(UnknownCurve(s.to_string())),
        }
    }
}

/// A CA key curve signet does not make keys on: the name given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown CA key curve {0:?}; expected p256 or p384")]
pub struct UnknownCurve(pub String);

#[derive(Debug, thiserror::Error)]
pub enum X509Error {
    #[error("encoding certificate: {0}")]
    Der(#[from] der::Error),
    #[error("signing certificate failed")]
    Sign,
    /// The CA key did not sign: a token that is away answers 503, anything else 500.
    #[error("signing certificate: {0}")]
    Signer(#[from] KeyError),
    #[error("CA key is not a PKCS#8 ECDSA P-256 or P-384 key: {0}")]
    Key(String),
    #[error("the TBS names signature algorithm {tbs}, but the signing key is {key}")]
    AlgorithmMismatch { tbs: String, key: CaCurve },
    #[error("time out of range for a certificate")]
    Time,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_time_until_2049_then_generalized() {
        let at = |secs: u64| time(SystemTime::UNIX_EPOCH + Duration::from_secs(secs)).unwrap();
        assert!(matches!(at(1_800_000_000), Time::UtcTime(_)), "2027");
        assert!(matches!(at(2_524_608_000), Time::GeneralTime(_)), "2050-01-01");
    }

    #[test]
    fn a_ca_key_knows_its_curve_and_signs_with_its_hash() {
        for curve in [CaCurve::P256, CaCurve::P384] {
            let pkcs8 = signet_keys::file::generate_pkcs8(curve.algorithm()).unwrap();
            let key = CaKey::from_pkcs8(&pkcs8).unwrap();
            assert_eq!(key.curve(), curve);
            assert_eq!(key.signature_algorithm().oid, curve.signature_oid());
        }
        assert!(CaKey::from_pkcs8(b"not a key").is_err());
        let ed25519 = signet_keys::file::generate_pkcs8(Algorithm::Ed25519).unwrap();
        assert!(CaKey::from_pkcs8(&ed25519).err().unwrap().to_string().contains("must be ECDSA P-256 or ECDSA P-384"));
        assert_eq!("P-256".parse::<CaCurve>(), Ok(CaCurve::P256));
        assert_eq!("p384".parse::<CaCurve>(), Ok(CaCurve::P384));
        assert!("p521".parse::<CaCurve>().unwrap_err().to_string().contains("expected p256 or p384"));
    }
}

/// A CA signing key: ECDSA on P-256 or P-384, the curve read from the key itself, in a file
/// or on a token.
pub struct CaKey {
    key: Signer,
    curve: CaCurve,
    spki: SubjectPublicKeyInfoOwned,
}

/// What a CA key may be.
const CA_ALGORITHMS: [Algorithm; 2] = [Algorithm::EcdsaP256Sha256, Algorithm::EcdsaP384Sha384];

impl CaKey {
    pub fn new(key: Signer) -> Result<CaKey, X509Error> {
        let curve = CaCurve::of(key.algorithm()).ok_or_else(|| X509Error::Key(format!("a CA key must be ECDSA P-256 or P-384, not {}", key.algorithm())))?;
        let spki = SubjectPublicKeyInfoOwned::from_der(key.spki_der())?;
        Ok(CaKey { key, curve, spki })
    }

    pub fn from_pkcs8(der: &[u8]) -> Result<CaKey, X509Error> {
        CaKey::new(Signer::from_pkcs8(der, "the CA key", &CA_ALGORITHMS).map_err(|e| X509Error::Key(e.to_string()))?)
    }

    /// The key `source` names. A missing file is made on `curve` when `generate` is set; a key
    /// on a token is never made here (`signet init --keys`).
    pub fn open(source: &KeySource, settings: &Pkcs11Settings, curve: CaCurve, generate: bool) -> Result<CaKey, X509Error> {
        let wanted = match curve {
            CaCurve::P256 => [Algorithm::EcdsaP256Sha256, Algorithm::EcdsaP384Sha384],
            CaCurve::P384 => [Algorithm::EcdsaP384Sha384, Algorithm::EcdsaP256Sha256],
        };
        CaKey::new(Signer::open(source, settings, &wanted, generate)?)
    }

    pub fn curve(&self) -> CaCurve {
        self.curve
    }

    /// Whether the private key is on a token.
    pub fn on_token(&self) -> bool {
        self.key.on_token()
    }

    /// The AlgorithmIdentifier of this key's signatures, for a TBS's `signature` field.
    pub fn signature_algorithm(&self) -> AlgorithmIdentifierOwned {
        AlgorithmIdentifierOwned { oid: self.curve.signature_oid(), parameters: None }
    }

    pub fn spki_der(&self) -> &[u8] {
        self.key.spki_der()
    }

    pub fn spki(&self) -> SubjectPublicKeyInfoOwned {
        self.spki.clone()
    }

    fn sign(&self, data: &[u8]) -> Result<Vec<u8>, X509Error> {
        Ok(self.key.sign(data)?)
    }
}

/// RFC 7093 §2 method 1: the leftmost 160 bits of SHA-256 of the subjectPublicKey bits.
pub fn key_identifier(spki: &SubjectPublicKeyInfoOwned) -> Vec<u8> {
    sha256(spki.subject_public_key.raw_bytes())[..20].to_vec()
}

/// Issuer certificates found by key: which of them issued a certificate is the one whose key
/// identifier, as [`key_identifier`] makes it and as this CA writes it into every leaf's AKI,
/// is the certificate's authority key identifier. (After `trust rotate --intermediate` the
/// intermediates share their name; their keys tell them apart.)
pub struct Issuers<'a> {
    by_key: Vec<(Vec<u8>, &'a [u8])>,
}

impl<'a> Issuers<'a> {
    /// The DER certificates among `candidates` that parse, each with its key identifier.
    pub fn new(candidates: impl IntoIterator<Item = &'a [u8]>) -> Issuers<'a> {
        let by_key = candidates
            .into_iter()
            .filter_map(|der| Certificate::from_der(der).ok().map(|c| (key_identifier(&c.tbs_certificate.subject_public_key_info), der)))
            .collect();
        Issuers { by_key }
    }

    /// The issuer of `cert` (DER), or `None` when it names no authority key or none of these.
    pub fn of(&self, cert: &[u8]) -> Option<&'a [u8]> {
        use der::oid::AssociatedOid;
        use x509_cert::ext::pkix::AuthorityKeyIdentifier;
        let cert = Certificate::from_der(cert).ok()?;
        let extensions = cert.tbs_certificate.extensions?;
        let aki = extensions.iter().find(|e| e.extn_id == AuthorityKeyIdentifier::OID)?;
        let id = AuthorityKeyIdentifier::from_der(aki.extn_value.as_bytes()).ok()?.key_identifier?;
        self.by_key.iter().find(|(key, _)| key == id.as_bytes()).map(|(_, der)| *der)
    }
}

/// RFC 5280 §4.1.2.5: UTCTime through 2049, GeneralizedTime from 2050. (webpki verifiers,
/// `cryptography`'s among them, refuse a GeneralizedTime before 2050.)
pub fn time(t: SystemTime) -> Result<Time, X509Error> {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).map_err(|_| X509Error::Time)?;
    // Whole seconds: certificates carry no fractions.
    let whole = Duration::from_secs(d.as_secs());
    match der::asn1::UtcTime::from_unix_duration(whole) {
        Ok(utc) => Ok(Time::UtcTime(utc)),
        Err(_) => Ok(Time::GeneralTime(der::asn1::GeneralizedTime::from_unix_duration(whole).map_err(|_| X509Error::Time)?)),
    }
}

/// An extension whose value is the DER of `value`.
pub fn extension(oid: ObjectIdentifier, critical: bool, value: &impl Encode) -> Result<Extension, X509Error> {
    Ok(Extension { extn_id: oid, critical, extn_value: OctetString::new(value.to_der()?)? })
}

/// An extension whose value is `raw` as is.
pub fn raw_extension(oid: ObjectIdentifier, critical: bool, raw: Vec<u8>) -> Result<Extension, X509Error> {
    Ok(Extension { extn_id: oid, critical, extn_value: OctetString::new(raw)? })
}

/// A random positive 20-byte serial (RFC 5280 §4.1.2.2 caps serials at 20 octets).
pub fn random_serial() -> Result<SerialNumber, X509Error> {
    let mut bytes: [u8; 20] = rand_bytes()?;
    bytes[0] &= 0x7f;
    bytes[0] |= 0x01; // never a leading zero byte, so the encoding stays 20 octets
    Ok(SerialNumber::new(&bytes)?)
}

fn rand_bytes<const N: usize>() -> Result<[u8; N], X509Error> {
    let mut b = [0u8; N];
    aws_lc_rs::rand::fill(&mut b).map_err(|_| X509Error::Sign)?;
    Ok(b)
}

pub struct TbsSpec {
    pub serial: SerialNumber,
    /// The issuer key's signature algorithm ([`CaKey::signature_algorithm`]).
    pub signature: AlgorithmIdentifierOwned,
    pub issuer: Name,
    pub subject: Name,
    pub not_before: SystemTime,
    pub not_after: SystemTime,
    pub spki: SubjectPublicKeyInfoOwned,
    pub extensions: Vec<Extension>,
}

pub fn tbs(spec: TbsSpec) -> Result<TbsCertificate, X509Error> {
    Ok(TbsCertificate {
        version: Version::V3,
        serial_number: spec.serial,
        signature: spec.signature,
        issuer: spec.issuer,
        validity: Validity { not_before: time(spec.not_before)?, not_after: time(spec.not_after)? },
        subject: spec.subject,
        subject_public_key_info: spec.spki,
        issuer_unique_id: None,
        subject_unique_id: None,
        extensions: Some(spec.extensions),
    })
}

/// Signs `tbs` with `key` and returns the certificate's DER.
pub fn sign(tbs: TbsCertificate, key: &CaKey) -> Result<Vec<u8>, X509Error> {
    // RFC 5280 §4.1.1.2: the outer algorithm must equal the TBS's, and both must be the key's.
    let algorithm = key.signature_algorithm();
    if tbs.signature != algorithm {
        return Err(X509Error::AlgorithmMismatch { tbs: tbs.signature.oid.to_string(), key: key.curve() });
    }
    let tbs_der = tbs.to_der()?;
    let sig = key.sign(&tbs_der)?;
    let cert = Certificate {
        tbs_certificate: tbs,
        signature_algorithm: algorithm,
        signature: BitString::from_bytes(&sig)?,
    };
    Ok(cert.to_der()?)
}
