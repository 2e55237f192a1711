//! Who must have signed: a certificate identity (SAN) from an OIDC issuer, or a managed key.
//! Fulcio certificates also must be for code signing: key usage digitalSignature and
//! extended key usage codeSigning.

use der::asn1::{ObjectIdentifier, Utf8StringRef};
use der::Decode;
use signet_core::pubkey::PublicKey;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::{ExtendedKeyUsage, KeyUsage, KeyUsages, SubjectAltName};

use crate::cert::{Cert, OID_EXT_KEY_USAGE, OID_KEY_USAGE, OID_SUBJECT_ALT_NAME};
use crate::error::{Result, VerifyError};

/// Fulcio's OIDC issuer extensions: v2 holds a DER UTF8String, v1 (deprecated) the raw bytes.
const OID_ISSUER_V2: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.57264.1.8");
const OID_ISSUER_V1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.57264.1.1");
const ID_KP_CODE_SIGNING: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.3");

/// What the caller requires of the signer.
#[derive(Debug, Clone)]
pub enum Policy {
    /// A Fulcio certificate for exactly this identity (email or URI SAN) and OIDC issuer.
    Identity { identity: String, issuer: String },
    /// A bundle signed with this managed key (no certificate).
    Key(PublicKey),
}

impl Policy {
    /// A managed-key policy from a PEM `PUBLIC KEY`. The body is read as leniently as Go's
    /// `encoding/pem` reads it (non-canonical trailing bits are accepted); a key that still
    /// does not parse is a policy failure naming the key.
    pub fn key_from_pem(text: &[u8]) -> Result<Policy> {
        let der = lenient_pem_body(text).ok_or_else(|| err("the given public key is not a PEM PUBLIC KEY block"))?;
        PublicKey::from_spki(&der)
            .map(Policy::Key)
            .map_err(|e| err(format!("the given public key is not a valid public key: {e}")))
    }
}

fn lenient_pem_body(text: &[u8]) -> Option<Vec<u8>> {
    use base64::engine::{general_purpose::GeneralPurpose, DecodePaddingMode, GeneralPurposeConfig};
    use base64::Engine;
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    let text = std::str::from_utf8(text).ok()?;
    let body = text.split("-----BEGIN PUBLIC KEY-----").nth(1)?.split("-----END PUBLIC KEY-----").next()?;
    let b64: String = body.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    LENIENT.decode(b64).ok()
}

fn err(m: impl Into<String>) -> VerifyError {
    VerifyError::Policy(m.into())
}

/// The email and URI SANs of the certificate.
pub fn identities(leaf: &Cert) -> Vec<String> {
    let Some(ext) = leaf.extension(OID_SUBJECT_ALT_NAME) else { return Vec::new() };
    let Ok(san) = SubjectAltName::from_der(ext.extn_value.as_bytes()) else { return Vec::new() };
    san.0
        .iter()
        .filter_map(|n| match n {
            GeneralName::Rfc822Name(s) | GeneralName::UniformResourceIdentifier(s) => Some(s.to_string()),
            _ => None,
        })
        .collect()
}

/// The OIDC issuer that Fulcio recorded in the certificate.
pub fn oidc_issuer(leaf: &Cert) -> Option<String> {
    if let Some(ext) = leaf.extension(OID_ISSUER_V2) {
        return Utf8StringRef::from_der(ext.extn_value.as_bytes()).ok().map(|s| s.as_str().to_string());
    }
    let ext = leaf.extension(OID_ISSUER_V1)?;
    std::str::from_utf8(ext.extn_value.as_bytes()).ok().map(str::to_string)
}

/// Checks the identity and issuer against the policy.
pub fn check_identity(leaf: &Cert, identity: &str, issuer: &str) -> Result<(String, String)> {
    let got_issuer = oidc_issuer(leaf).ok_or_else(|| err("the certificate records no OIDC issuer"))?;
    if got_issuer != issuer {
        return Err(err(format!("certificate OIDC issuer {got_issuer:?} is not the expected {issuer:?}")));
    }
    let sans = identities(leaf);
    if !sans.iter().any(|s| s == identity) {
        return Err(err(format!("certificate identity {sans:?} does not match the expected {identity:?}")));
    }
    Ok((identity.to_string(), got_issuer))
}

/// Key usage must allow digitalSignature, and the EKU must include codeSigning.
pub fn check_usage(leaf: &Cert) -> Result<()> {
    let ku = leaf.extension(OID_KEY_USAGE).ok_or_else(|| err("the certificate has no key usage extension"))?;
    let ku = KeyUsage::from_der(ku.extn_value.as_bytes()).map_err(|e| err(format!("malformed key usage: {e}")))?;
    if !ku.0.contains(KeyUsages::DigitalSignature) {
        return Err(err("the certificate's key usage lacks digitalSignature"));
    }
    let eku = leaf.extension(OID_EXT_KEY_USAGE).ok_or_else(|| err("the certificate has no extended key usage"))?;
    let eku = ExtendedKeyUsage::from_der(eku.extn_value.as_bytes()).map_err(|e| err(format!("malformed extended key usage: {e}")))?;
    if !eku.0.contains(&ID_KP_CODE_SIGNING) {
        return Err(err("the certificate's extended key usage lacks codeSigning"));
    }
    Ok(())
}
