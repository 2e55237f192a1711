//! The certificate authority: a P-384 root, a P-256 (or P-384) intermediate, and Fulcio's
//! leaf profile.
//!
//! sigstore-python checks chains with `cryptography`'s webpki policy, so the leaf follows
//! Fulcio exactly: 10 minutes of validity, an empty subject, the identity in a critical SAN,
//! digitalSignature + codeSigning, key identifiers, the OIDC issuer in both Sigstore
//! extensions, and (added by the CT step) exactly one embedded SCT.

use std::path::Path;
use std::str::FromStr;
use std::time::{Duration, SystemTime};

use der::asn1::{Ia5String, ObjectIdentifier, OctetString, Utf8StringRef};
use der::{Decode, Encode};
use signet_core::{files, pem};
use signet_keys::{self as keys, KeySource, Pkcs11Settings};
use spki::SubjectPublicKeyInfoOwned;
use x509_cert::certificate::{Certificate, TbsCertificate};
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::{
    AuthorityKeyIdentifier, BasicConstraints, ExtendedKeyUsage, KeyUsage, KeyUsages, SubjectAltName, SubjectKeyIdentifier,
};
use x509_cert::ext::Extension;
use x509_cert::name::Name;

use crate::oidc::{Identity, SanKind};
use crate::x509::{self, CaCurve, CaKey, TbsSpec, X509Error};

pub const OID_KEY_USAGE: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.15");
pub const OID_EXT_KEY_USAGE: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.37");
pub const OID_SUBJECT_KEY_ID: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.14");
pub const OID_AUTHORITY_KEY_ID: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.35");
pub const OID_SUBJECT_ALT_NAME: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.17");
pub const OID_BASIC_CONSTRAINTS: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.19");
pub const OID_CODE_SIGNING: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.3");
/// Fulcio's deprecated issuer extension: the raw UTF-8 bytes, no DER wrapping.
pub const OID_FULCIO_ISSUER_V1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.57264.1.1");
/// Fulcio's issuer extension: a DER UTF8String.
pub const OID_FULCIO_ISSUER_V2: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.57264.1.8");
/// Fulcio's otherName type for a `username` issuer's `user!domain` SAN.
pub const OID_FULCIO_USERNAME: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.57264.1.7");
/// RFC 6962 §3.1: the critical poison that makes a precertificate unusable as a certificate.
pub const OID_CT_POISON: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.11129.2.4.3");
/// RFC 6962 §3.3: the embedded SCT list.
pub const OID_CT_SCT_LIST: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.11129.2.4.2");

pub const LEAF_VALIDITY: Duration = Duration::from_secs(600);
const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

#[derive(Debug, thiserror::Error)]
pub enum CaError {
    #[error(transparent)]
    X509(#[from] X509Error),
    #[error(transparent)]
    Key(#[from] keys::KeyError),
    #[error("{path}: {why}")]
    File { path: String, why: String },
    #[error("the identity {0:?} cannot go in a SAN: {1}")]
    Identity(String, String),
    #[error(
        "{path} is a {found} key, but ca.intermediate_key asks for {wanted}; a CA key's curve is fixed when the key \
         is made: set ca.intermediate_key = \"{}\" or leave it out, or start a new data dir",
        .found.config_name()
    )]
    CurveMismatch { path: String, found: CaCurve, wanted: CaCurve },
    /// A scheduled rotation's hand-over came and its successor is not loaded.
    #[error(transparent)]
    HandedOver(#[from] crate::handover::Ended),
}

impl CaError {
    /// Whether a CA key on a token did not sign now (unplugged, busy): a retry may succeed.
    pub fn key_unavailable(&self) -> bool {
        match self {
            CaError::X509(X509Error::Signer(k)) | CaError::Key(k) => k.is_transient(),
            CaError::HandedOver(_) => true,
            _ => false,
        }
    }
}

impl From<der::Error> for CaError {
    fn from(e: der::Error) -> Self {
        CaError::X509(X509Error::Der(e))
    }
}

/// Where the CA's two keys are kept, as configured.
#[derive(Clone, Debug, Default)]
pub struct CaKeys {
    /// The curve of a new intermediate key (P-256 when `None`); an existing key keeps its
    /// curve, and must match this when it is given.
    pub intermediate_curve: Option<CaCurve>,
    /// The intermediate key, which signs every leaf (default: `keys/ca-intermediate.pem`,
    /// made on first start).
    pub intermediate: Option<KeySource>,
    /// The root key (default: `keys/ca-root.pem`). Needed only while certificates are made:
    /// at the first start, and when the TSA or intermediate certificate is renewed.
    pub root: Option<KeySource>,
    /// The module and PIN for keys on a token.
    pub pkcs11: Pkcs11Settings,
}

impl CaKeys {
    /// File keys under the data dir, a new intermediate on `curve`.
    pub fn curve(curve: Option<CaCurve>) -> CaKeys {
        CaKeys { intermediate_curve: curve, ..CaKeys::default() }
    }

    fn intermediate_source(&self, data_dir: &Path) -> KeySource {
        self.intermediate.clone().unwrap_or_else(|| KeySource::File(data_dir.join("keys").join("ca-intermediate.pem")))
    }

    /// Where the root key is: configured, or `keys/ca-root.pem`.
    pub fn root_source(&self, data_dir: &Path) -> KeySource {
        self.root.clone().unwrap_or_else(|| KeySource::File(data_dir.join("keys").join("ca-root.pem")))
    }

    /// The root key, made (P-384) where it is a file that does not exist yet.
    pub fn root_key(&self, data_dir: &Path) -> Result<CaKey, CaError> {
        Ok(CaKey::open(&self.root_source(data_dir), &self.pkcs11, CaCurve::P384, true)?)
    }
}

/// The CA: its intermediate key, and the chain above it.
pub struct Authority {
    intermediate_key: CaKey,
    intermediate: Certificate,
    intermediate_der: Vec<u8>,
    root_der: Vec<u8>,
}

fn file_err(path: &Path, e: impl std::fmt::Display) -> CaError {
    CaError::File { path: path.display().to_string(), why: e.to_string() }
}

impl Authority {
    /// Loads the CA from `data_dir` and `keys`, creating the root and intermediate
    /// certificates (and the keys, where they are files) on first start.
    pub fn open(data_dir: &Path, keys: &CaKeys) -> Result<Authority, CaError> {
        let keys_dir = data_dir.join("keys");
        let ca_dir = data_dir.join("ca");
        for d in [&keys_dir, &ca_dir] {
            files::ensure_private_dir(d).map_err(|e| file_err(d, e))?;
        }
        let inter_source = keys.intermediate_source(data_dir);
        let wanted = keys.intermediate_curve.unwrap_or(CaCurve::P256);
        let generate = matches!(inter_source, KeySource::File(_));
        let inter_key = CaKey::open(&inter_source, &keys.pkcs11, wanted, generate)?;
        if keys.intermediate_curve.is_some_and(|c| c != inter_key.curve()) {
            return Err(CaError::CurveMismatch { path: inter_source.to_string(), found: inter_key.curve(), wanted });
        }
        let (root_path, inter_path) = (ca_dir.join("root.pem"), ca_dir.join("intermediate.pem"));

        let read = |p: &Path| -> Result<Option<Vec<u8>>, CaError> {
            match std::fs::read(p) {
                Ok(b) => Ok(Some(pem::decode_first(&b).map_err(|e| file_err(p, e))?.der)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(file_err(p, e)),
            }
        };
        // The root key is needed only to make the certificates. Once they exist it may live
        // offline (`signet init --root-key-out`, or a token kept apart); a root key file
        // still here must match root.pem.
        let root_source = keys.root_source(data_dir);
        let (root_der, inter_der) = match (read(&root_path)?, read(&inter_path)?) {
            (Some(r), Some(i)) => (r, i),
            _ => {
                let root_key = keys.root_key(data_dir)?;
                let root_name = Name::from_str("CN=signet root,O=signet").map_err(X509Error::from)?;
                let inter_name = Name::from_str("CN=signet intermediate,O=signet").map_err(X509Error::from)?;
                let now = SystemTime::now();
                let root = x509::sign(ca_tbs(&root_key, &root_key, root_name.clone(), root_name.clone(), None, now)?, &root_key)?;
                let inter = x509::sign(ca_tbs(&inter_key, &root_key, inter_name, root_name, Some(0), now)?, &root_key)?;
                files::write_atomic(&root_path, pem::encode("CERTIFICATE", &root).as_bytes(), 0o644).map_err(|e| file_err(&root_path, e))?;
                files::write_atomic(&inter_path, pem::encode("CERTIFICATE", &inter).as_bytes(), 0o644).map_err(|e| file_err(&inter_path, e))?;
                (root, inter)
            }
        };
        if let KeySource::File(root_key_path) = &root_source {
            if root_key_path.exists() {
                let root_key = CaKey::open(&root_source, &keys.pkcs11, CaCurve::P384, false)?;
                let root = Certificate::from_der(&root_der)?;
                if root.tbs_certificate.subject_public_key_info.to_der()? != root_key.spki_der() {
                    return Err(file_err(&root_path, format!("the root certificate does not match {}", root_key_path.display())));
                }
            }
        }
        let intermediate = Certificate::from_der(&inter_der)?;
        if intermediate.tbs_certificate.subject_public_key_info.to_der()? != inter_key.spki_der() {
            return Err(file_err(&inter_path, format!("the intermediate certificate does not match the intermediate key {inter_source}")));
        }
        Ok(Authority { intermediate_key: inter_key, intermediate, intermediate_der: inter_der, root_der })
    }

    /// The intermediate that follows this one at a scheduled rotation: `key` under
    /// `intermediate_der`, which the same root must have issued.
    pub fn successor(&self, key: CaKey, intermediate_der: Vec<u8>) -> Result<Authority, CaError> {
        let intermediate = Certificate::from_der(&intermediate_der)?;
        if intermediate.tbs_certificate.subject_public_key_info.to_der()? != key.spki_der() {
            return Err(file_err(Path::new("the new intermediate certificate"), "it does not certify the new intermediate key"));
        }
        let root = Certificate::from_der(&self.root_der)?;
        if intermediate.tbs_certificate.issuer != root.tbs_certificate.subject {
            return Err(file_err(Path::new("the new intermediate certificate"), "it was not issued by this instance's root"));
        }
        Ok(Authority { intermediate_key: key, intermediate, intermediate_der, root_der: self.root_der.clone() })
    }

    /// PEMs of the chain above leaves: intermediate, then root.
    pub fn chain_pem(&self) -> Vec<String> {
        vec![pem::encode("CERTIFICATE", &self.intermediate_der), pem::encode("CERTIFICATE", &self.root_der)]
    }

    pub fn root_der(&self) -> &[u8] {
        &self.root_der
    }

    pub fn intermediate_der(&self) -> &[u8] {
        &self.intermediate_der
    }

    /// The curve of the key that signs leaves.
    pub fn intermediate_curve(&self) -> CaCurve {
        self.intermediate_key.curve()
    }

    /// SPKI DER of the key that signs leaves (the CT issuer key hash is over this).
    pub fn issuer_spki_der(&self) -> &[u8] {
        self.intermediate_key.spki_der()
    }

    /// The TBS of a leaf for `identity` and `spki`, valid from `now`. `last` is the final
    /// extension: the CT poison for a precertificate, the SCT list for the certificate, or
    /// none for the TBS that the SCT signs (the precertificate without its poison).
    pub fn leaf_tbs(
        &self,
        identity: &Identity,
        spki: SubjectPublicKeyInfoOwned,
        serial: x509_cert::serial_number::SerialNumber,
        now: SystemTime,
        last: Option<Extension>,
    ) -> Result<TbsCertificate, CaError> {
        let bad = |e: der::Error| CaError::Identity(identity.subject.clone(), e.to_string());
        let san = match identity.kind {
            SanKind::Email => GeneralName::Rfc822Name(Ia5String::new(&identity.subject).map_err(bad)?),
            SanKind::Uri => GeneralName::UniformResourceIdentifier(Ia5String::new(&identity.subject).map_err(bad)?),
            SanKind::Username => GeneralName::OtherName(x509_cert::ext::pkix::name::OtherName {
                type_id: OID_FULCIO_USERNAME,
                value: der::Any::encode_from(&Utf8StringRef::new(&identity.subject).map_err(bad)?).map_err(bad)?,
            }),
        };
        let ski = x509::key_identifier(&spki);
        let aki = x509::key_identifier(&self.intermediate.tbs_certificate.subject_public_key_info);
        let mut extensions = vec![
            x509::extension(OID_KEY_USAGE, true, &KeyUsage(KeyUsages::DigitalSignature.into()))?,
            x509::extension(OID_EXT_KEY_USAGE, false, &ExtendedKeyUsage(vec![OID_CODE_SIGNING]))?,
            x509::extension(OID_SUBJECT_KEY_ID, false, &SubjectKeyIdentifier(OctetString::new(ski)?))?,
            x509::extension(
                OID_AUTHORITY_KEY_ID,
                false,
                &AuthorityKeyIdentifier { key_identifier: Some(OctetString::new(aki)?), authority_cert_issuer: None, authority_cert_serial_number: None },
            )?,
            // Critical because the subject is empty (RFC 5280 §4.2.1.6).
            x509::extension(OID_SUBJECT_ALT_NAME, true, &SubjectAltName(vec![san]))?,
            x509::raw_extension(OID_FULCIO_ISSUER_V1, false, identity.issuer.as_bytes().to_vec())?,
            x509::extension(OID_FULCIO_ISSUER_V2, false, &Utf8StringRef::new(&identity.issuer)?)?,
        ];
        for e in &identity.extensions {
            extensions.push(match e.encoding {
                crate::ci::Encoding::Raw => x509::raw_extension(e.oid, false, e.value.clone().into_bytes())?,
                crate::ci::Encoding::Utf8String => x509::extension(e.oid, false, &Utf8StringRef::new(&e.value)?)?,
            });
        }
        // Every Fulcio certificate since 1.24 names the token's raw subject.
        extensions.push(x509::extension(crate::ci::OID_TOKEN_SUBJECT, false, &Utf8StringRef::new(&identity.token_subject)?)?);
        extensions.extend(last);
        Ok(x509::tbs(TbsSpec {
            serial,
            signature: self.intermediate_key.signature_algorithm(),
            issuer: self.intermediate.tbs_certificate.subject.clone(),
            subject: Name::default(),
            not_before: now,
            not_after: now + LEAF_VALIDITY,
            spki,
            extensions,
        })?)
    }

    /// The precertificate for a CT leaf's TBS: the same TBS with the poison appended (the
    /// poison is always the last extension), signed now. Issuance stores it beside the CT
    /// entry, and CT's `get-entries` serves it from there.
    pub fn precertificate(&self, tbs_without_poison: &[u8]) -> Result<Vec<u8>, CaError> {
        self.precertificate_of(TbsCertificate::from_der(tbs_without_poison)?)
    }

    /// [`Authority::precertificate`] for a TBS that issuance has just built, not decoded.
    pub fn precertificate_of(&self, mut tbs: TbsCertificate) -> Result<Vec<u8>, CaError> {
        tbs.extensions.get_or_insert_with(Vec::new).push(poison()?);
        self.sign(tbs)
    }

    /// Signs a TBS with the intermediate key.
    pub fn sign(&self, tbs: TbsCertificate) -> Result<Vec<u8>, CaError> {
        Ok(x509::sign(tbs, &self.intermediate_key)?)
    }
}

/// The critical poison extension of a precertificate: ASN.1 NULL.
pub fn poison() -> Result<Extension, CaError> {
    Ok(x509::raw_extension(OID_CT_POISON, true, vec![0x05, 0x00])?)
}

/// A certificate for a new intermediate key (`new_key`), signed by the root: what
/// `signet trust rotate --intermediate` installs. The root key is the one of `root_der`
/// (kept offline after `signet init`, brought back for the rotation). The subject is the
/// first intermediate's: clients tell the two apart by key identifier, and by the windows
/// the trusted root gives each.
pub fn issue_intermediate(root_key: &CaKey, root_der: &[u8], new_key: &CaKey) -> Result<Vec<u8>, CaError> {
    let root = Certificate::from_der(root_der)?;
    if root.tbs_certificate.subject_public_key_info.to_der()? != root_key.spki_der() {
        return Err(CaError::File { path: "the root key".into(), why: "it is not the key of ca/root.pem".into() });
    }
    let name = Name::from_str("CN=signet intermediate,O=signet").map_err(X509Error::from)?;
    let mut tbs = ca_tbs(new_key, root_key, name, root.tbs_certificate.subject.clone(), Some(0), SystemTime::now())?;
    // Not past the root: a chain is valid only while every certificate in it is.
    if tbs.validity.not_after.to_system_time() > root.tbs_certificate.validity.not_after.to_system_time() {
        tbs.validity.not_after = root.tbs_certificate.validity.not_after;
    }
    Ok(x509::sign(tbs, root_key)?)
}

pub(crate) fn ca_tbs(
    subject_key: &CaKey,
    issuer_key: &CaKey,
    subject: Name,
    issuer: Name,
    path_len: Option<u8>,
    now: SystemTime,
) -> Result<TbsCertificate, CaError> {
    let spki = subject_key.spki();
    let mut extensions = vec![
        x509::extension(OID_BASIC_CONSTRAINTS, true, &BasicConstraints { ca: true, path_len_constraint: path_len })?,
        x509::extension(OID_KEY_USAGE, true, &KeyUsage(KeyUsages::KeyCertSign | KeyUsages::CRLSign))?,
        x509::extension(OID_SUBJECT_KEY_ID, false, &SubjectKeyIdentifier(OctetString::new(x509::key_identifier(&spki))?))?,
    ];
    if path_len.is_some() {
        extensions.push(x509::extension(OID_EXT_KEY_USAGE, false, &ExtendedKeyUsage(vec![OID_CODE_SIGNING]))?);
        extensions.push(x509::extension(
            OID_AUTHORITY_KEY_ID,
            false,
            &AuthorityKeyIdentifier {
                key_identifier: Some(OctetString::new(x509::key_identifier(&issuer_key.spki()))?),
                authority_cert_issuer: None,
                authority_cert_serial_number: None,
            },
        )?);
    }
    Ok(x509::tbs(TbsSpec {
        serial: x509::random_serial()?,
        signature: issuer_key.signature_algorithm(),
        issuer,
        subject,
        not_before: now - Duration::from_secs(60),
        not_after: now + CA_VALIDITY,
        spki,
        extensions,
    })?)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::process::Command;

    pub(crate) fn identity() -> Identity {
        Identity {
            issuer: "http://127.0.0.1:8080/oidc".into(),
            subject: "alice@example.com".into(),
            kind: SanKind::Email,
            token_subject: "alice-sub".into(),
            extensions: Vec::new(),
            claims: Default::default(),
        }
    }

    fn leaf_spki() -> SubjectPublicKeyInfoOwned {
        let pair = aws_lc_rs::signature::EcdsaKeyPair::generate(&aws_lc_rs::signature::ECDSA_P256_SHA256_ASN1_SIGNING).unwrap();
        let der = aws_lc_rs::encoding::AsDer::as_der(aws_lc_rs::signature::KeyPair::public_key(&pair)).unwrap();
        SubjectPublicKeyInfoOwned::from_der(der.as_ref()).unwrap()
    }

    fn openssl(args: &[&str], files: &[&Path]) -> (bool, String) {
        let out = Command::new("openssl").args(args).args(files).output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
    }

    #[test]
    fn chain_and_leaf_verify_in_openssl() {
        for (curve, leaf_sig) in [(None, "ecdsa-with-SHA256"), (Some(CaCurve::P384), "ecdsa-with-SHA384")] {
            let dir = tempfile::tempdir().unwrap();
            let ca = Authority::open(dir.path(), &CaKeys::curve(curve)).unwrap();
            let again = Authority::open(dir.path(), &CaKeys::curve(None)).unwrap();
            assert_eq!(ca.root_der(), again.root_der(), "the CA persists across restarts");
            assert_eq!(ca.intermediate_curve(), curve.unwrap_or(CaCurve::P256));
            #[cfg(unix)]
            for key in ["ca-root.pem", "ca-intermediate.pem"] {
                use std::os::unix::fs::PermissionsExt;
                let mode = std::fs::metadata(dir.path().join("keys").join(key)).unwrap().permissions().mode();
                assert_eq!(mode & 0o777, 0o600, "{key}");
            }

            let tbs = ca.leaf_tbs(&identity(), leaf_spki(), x509::random_serial().unwrap(), SystemTime::now(), None).unwrap();
            let leaf = ca.sign(tbs).unwrap();
            let write = |name: &str, der: &[u8]| {
                let p = dir.path().join(name);
                std::fs::write(&p, pem::encode("CERTIFICATE", der)).unwrap();
                p
            };
            let (root, inter, leaf) = (write("r.pem", ca.root_der()), write("i.pem", ca.intermediate_der()), write("l.pem", &leaf));
            let (ok, text) = openssl(&["x509", "-noout", "-text", "-in"], &[&leaf]);
            assert!(ok, "{text}");
            for needle in ["email:alice@example.com", "Code Signing", "Digital Signature", "X509v3 Subject Alternative Name: critical", "1.3.6.1.4.1.57264.1.8", leaf_sig] {
                assert!(text.contains(needle), "openssl shows no {needle:?}:\n{text}");
            }
            let (_, inter_text) = openssl(&["x509", "-noout", "-text", "-in"], &[&inter]);
            assert!(inter_text.contains("ecdsa-with-SHA384"), "the P-384 root signs the intermediate:\n{inter_text}");
            // The whole chain verifies for code signing, leaf to root.
            let (ok, out) = openssl(&["verify", "-purpose", "any", "-CAfile"], &[&root, Path::new("-untrusted"), &inter, &leaf]);
            assert!(ok, "{out}");
        }
    }

    #[test]
    fn an_existing_intermediate_keeps_its_curve_and_a_mismatch_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let first = Authority::open(dir.path(), &CaKeys::curve(Some(CaCurve::P384))).unwrap();
        let reopened = Authority::open(dir.path(), &CaKeys::curve(None)).unwrap();
        assert_eq!(reopened.intermediate_curve(), CaCurve::P384, "no setting keeps the key on disk");
        assert_eq!(reopened.intermediate_der(), first.intermediate_der());
        let err = Authority::open(dir.path(), &CaKeys::curve(Some(CaCurve::P256))).err().expect("a P-256 setting over a P-384 key is refused");
        let msg = err.to_string();
        assert!(msg.contains("ca-intermediate.pem is a P-384 key") && msg.contains("ca.intermediate_key = \"p384\""), "{msg}");
        assert_eq!(Authority::open(dir.path(), &CaKeys::curve(Some(CaCurve::P384))).unwrap().intermediate_der(), first.intermediate_der());
    }
}
