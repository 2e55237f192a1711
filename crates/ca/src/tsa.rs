//! The RFC 3161 timestamp authority.
//!
//! A timestamp token is a CMS SignedData (RFC 5652) over a TSTInfo. Its signed attributes
//! are the content type, the message digest of the TSTInfo, and the ESS
//! signingCertificateV2 (RFC 5816) naming the TSA certificate, which verifiers such as
//! `openssl ts -verify` require. The TSA certificate is issued by the CA's root (not the
//! code-signing intermediate, whose EKU would not nest) with a critical EKU of timeStamping.

use std::path::Path;
use std::sync::Arc;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use der::asn1::{GeneralizedTime, Int, ObjectIdentifier, OctetString};
use der::{Decode, Encode};
use signet_keys::Signer;
use signet_core::{files, pem};
use x509_cert::ext::pkix::{ExtendedKeyUsage, KeyUsage, KeyUsages, SubjectKeyIdentifier};
use x509_cert::name::Name;
use x509_cert::Certificate;
use x509_tsp::{Accuracy, MessageImprint, TimeStampReq, TspVersion, TstInfo};

use crate::authority::{CaError, OID_EXT_KEY_USAGE, OID_KEY_USAGE, OID_SUBJECT_KEY_ID};
use crate::x509::{self, CaKey, TbsSpec};

mod oid;
mod token;

use oid::{ID_SHA256, ID_SHA384, ID_SHA512, ID_TIME_STAMPING};

/// The TSA policy, Sigstore's.
pub const POLICY: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.57264.2");

#[derive(Debug, thiserror::Error)]
pub enum TsaError {
    #[error("timestamp request is not valid DER: {0}")]
    Malformed(String),
    #[error("hash algorithm {0} is not accepted; expected SHA-256, SHA-384 or SHA-512")]
    BadAlgorithm(String),
    #[error("message imprint is {got} bytes, but {alg} digests are {want}")]
    BadImprint { alg: &'static str, got: usize, want: usize },
    #[error("policy {0} is not offered; this TSA issues under {POLICY}")]
    Policy(String),
    #[error("only version 1 requests exist")]
    Version,
    #[error("timestamp request has extensions, which this TSA does not support")]
    Extensions,
    #[error(transparent)]
    Ca(#[from] CaError),
    #[error("building the timestamp failed: {0}")]
    Build(String),
    /// The key's token did not sign now: 503, try again.
    #[error("the TSA's key cannot sign now: {0}")]
    KeyUnavailable(String),
}

impl From<der::Error> for TsaError {
    fn from(e: der::Error) -> Self {
        TsaError::Build(e.to_string())
    }
}

/// A request in signet's own terms (from DER or from the JSON form).
pub struct Request {
    pub hash_oid: ObjectIdentifier,
    pub digest: Vec<u8>,
    pub nonce: Option<Vec<u8>>,
    pub cert_req: bool,
    pub policy: Option<ObjectIdentifier>,
}

pub struct Tsa {
    key: Arc<Signer>,
    /// Every part of a token that is the same for every stamp, as DER.
    token: token::Template,
    cert_der: Vec<u8>,
    root_der: Vec<u8>,
    /// Timestamps issued since start, for `/metrics`.
    stamped: Arc<std::sync::atomic::AtomicU64>,
}

impl Tsa {
    /// The TSA signing with `key` (a file's or a token's), with its certificate under
    /// `data_dir`, issued by the root (`root_key`, asked for only then) when missing.
    pub fn open(data_dir: &Path, key: Arc<Signer>, root_key: impl FnOnce() -> Result<CaKey, CaError>, root_der: &[u8]) -> Result<Tsa, TsaError> {
        let cert_path = data_dir.join("ca").join("tsa.pem");
        let spki_der = key.spki_der().to_vec();
        let cert_der: Vec<u8> = match std::fs::read(&cert_path) {
            Ok(b) => pem::decode_first(&b).map_err(|e| TsaError::Build(format!("{}: {e}", cert_path.display())))?.der,
            Err(_) => {
                let der = Tsa::issue_certificate(&root_key()?, root_der, &spki_der)?;
                files::write_atomic(&cert_path, pem::encode("CERTIFICATE", &der).as_bytes(), 0o644)
                    .map_err(|e| TsaError::Build(format!("{}: {e}", cert_path.display())))?;
                der
            }
        };
        Tsa::new(key, cert_der, root_der).map_err(|e| TsaError::Build(format!("{}: {e}", cert_path.display())))
    }

    /// The TSA signing with `key` under the certificate `cert_der`, which must certify it
    /// (a rotation's successor, [`crate::handover`]).
    pub fn new(key: Arc<Signer>, cert_der: Vec<u8>, root_der: &[u8]) -> Result<Tsa, TsaError> {
        let cert = Certificate::from_der(&cert_der)?;
        if cert.tbs_certificate.subject_public_key_info.to_der()? != key.spki_der() {
            return Err(TsaError::Build(format!("the certificate does not match the TSA key {key:?}")));
        }
        let token = token::Template::new(&cert, &cert_der)?;
        Ok(Tsa { key, token, cert_der, root_der: root_der.to_vec(), stamped: Default::default() })
    }

    /// Counts its stamps with `other`'s counter, so that `/metrics` keeps counting across a
    /// hand-over.
    pub fn counting_with(mut self, other: &Tsa) -> Tsa {
        self.stamped = other.stamped.clone();
        self
    }

    /// The root that issued its certificate (DER).
    pub fn root_der(&self) -> &[u8] {
        &self.root_der
    }

    /// The TSA's certificate (DER).
    pub fn cert_der(&self) -> &[u8] {
        &self.cert_der
    }

    /// PEMs of the TSA's chain: its certificate, then the root.
    pub fn chain_pem(&self) -> Vec<String> {
        vec![pem::encode("CERTIFICATE", &self.cert_der), pem::encode("CERTIFICATE", &self.root_der)]
    }

    /// Parses a DER `TimeStampReq`.
    pub fn parse_der(der_bytes: &[u8]) -> Result<Request, TsaError> {
        let req = TimeStampReq::from_der(der_bytes).map_err(|e| TsaError::Malformed(e.to_string()))?;
        if req.version != TspVersion::V1 {
            return Err(TsaError::Version);
        }
        if req.extensions.as_ref().is_some_and(|e| !e.is_empty()) {
            return Err(TsaError::Extensions);
        }
        Ok(Request {
            hash_oid: req.message_imprint.hash_algorithm.oid,
            digest: req.message_imprint.hashed_message.as_bytes().to_vec(),
            nonce: req.nonce.map(|n| n.as_bytes().to_vec()),
            cert_req: req.cert_req,
            policy: req.req_policy,
        })
    }

    /// A TSA certificate for the key `spki_der`, issued by the root (`root_key`, `root_der`),
    /// valid until the root expires: at the first start, and at a rotation.
    pub fn issue_certificate(root_key: &CaKey, root_der: &[u8], spki_der: &[u8]) -> Result<Vec<u8>, TsaError> {
        let root = Certificate::from_der(root_der)?;
        let spki = spki::SubjectPublicKeyInfoOwned::from_der(spki_der)?;
        let now = SystemTime::now();
        let extensions = vec![
            x509::extension(OID_KEY_USAGE, true, &KeyUsage(KeyUsages::DigitalSignature.into())).map_err(CaError::from)?,
            // RFC 3161 §2.3: the EKU is id-kp-timeStamping alone, and critical.
            x509::extension(OID_EXT_KEY_USAGE, true, &ExtendedKeyUsage(vec![ID_TIME_STAMPING])).map_err(CaError::from)?,
            x509::extension(OID_SUBJECT_KEY_ID, false, &SubjectKeyIdentifier(OctetString::new(x509::key_identifier(&spki))?))
                .map_err(CaError::from)?,
        ];
        let tbs = x509::tbs(TbsSpec {
            serial: x509::random_serial().map_err(CaError::from)?,
            signature: root_key.signature_algorithm(),
            issuer: root.tbs_certificate.subject.clone(),
            subject: Name::from_str("CN=signet timestamp authority,O=signet").map_err(|e| TsaError::Build(e.to_string()))?,
            not_before: now - Duration::from_secs(60),
            not_after: root.tbs_certificate.validity.not_after.to_system_time(),
            spki,
            extensions,
        })
        .map_err(CaError::from)?;
        Ok(x509::sign(tbs, root_key).map_err(CaError::from)?)
    }

    /// Timestamps issued since start.
    pub fn stamped(&self) -> u64 {
        self.stamped.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Issues a timestamp for `req` and returns the DER `TimeStampResp`.
    pub fn timestamp(&self, req: &Request) -> Result<Vec<u8>, TsaError> {
        self.timestamp_with_serial(req).map(|(der, _)| der)
    }

    /// [`Tsa::timestamp`], with the token's serial number (for the audit record).
    pub fn timestamp_with_serial(&self, req: &Request) -> Result<(Vec<u8>, [u8; 16]), TsaError> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_err(|e| TsaError::Build(e.to_string()))?;
        self.timestamp_at(req, now)
    }

    /// [`Tsa::timestamp_with_serial`] with genTime `now` (since the Unix epoch): the time that
    /// chose this TSA among a hand-over's two ([`crate::handover::Handover::at`]).
    pub fn timestamp_at(&self, req: &Request, now: Duration) -> Result<(Vec<u8>, [u8; 16]), TsaError> {
        let (alg, want) = match req.hash_oid {
            o if o == ID_SHA256 => ("SHA-256", 32),
            o if o == ID_SHA384 => ("SHA-384", 48),
            o if o == ID_SHA512 => ("SHA-512", 64),
            o => return Err(TsaError::BadAlgorithm(o.to_string())),
        };
        if req.digest.len() != want {
            return Err(TsaError::BadImprint { alg, got: req.digest.len(), want });
        }
        if let Some(p) = req.policy {
            if p != POLICY {
                return Err(TsaError::Policy(p.to_string()));
            }
        }
        let mut serial = [0u8; 16];
        aws_lc_rs::rand::fill(&mut serial).map_err(|_| TsaError::Build("RNG".into()))?;
        serial[0] = (serial[0] & 0x7f) | 0x01;
        let tst = TstInfo {
            version: TspVersion::V1,
            policy: POLICY,
            message_imprint: MessageImprint {
                hash_algorithm: spki::AlgorithmIdentifier { oid: req.hash_oid, parameters: None },
                hashed_message: OctetString::new(req.digest.clone())?,
            },
            serial_number: Int::new(&serial)?,
            gen_time: GeneralizedTime::from_unix_duration(Duration::from_secs(now.as_secs()))?,
            // genTime has whole seconds; the true time is within one second of it.
            accuracy: Some(Accuracy { seconds: Some(1), millis: None, micros: None }),
            ordering: false,
            nonce: req.nonce.as_deref().map(Int::new).transpose()?,
            tsa: None,
            extensions: None,
        };
        let der = self.token.response(&tst.to_der()?, req.cert_req, |signed_attributes| {
            let signature = self.key.sign(signed_attributes).map_err(|e| match e.is_transient() {
                true => TsaError::KeyUnavailable(e.to_string()),
                false => TsaError::Build(format!("signing failed: {e}")),
            })?;
            Ok::<_, TsaError>(signature)
        })?;
        self.stamped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok((der, serial))
    }
}
