//! RFC 3161 timestamps: a TSA's CMS signature (RFC 5652) over a TSTInfo whose message
//! imprint is the hash of the bundle's signature. A verified timestamp proves the signature
//! existed at `genTime`, which is then the time the certificate must have been valid.
//!
//! The TSA must be one of the trusted root's `timestampAuthorities`; certificates embedded
//! in the token are never trusted on their own.

use cmpv2::status::PkiStatus;
use cms::content_info::ContentInfo;
use cms::signed_data::SignedData;
use der::asn1::{ObjectIdentifier, OctetString};
use der::{Decode, Encode, Tag};
use x509_tsp::{TimeStampResp, TstInfo};

use crate::cert::{self, next_tlv, Cert, OID_EXT_KEY_USAGE};
use crate::error::{Result, VerifyError};
use crate::time::format_unix;
use crate::trust_root::{Authority, TrustedRoot};

const ID_SIGNED_DATA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.7.2");
const ID_CT_TST_INFO: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.16.1.4");
const ID_CONTENT_TYPE: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.3");
const ID_MESSAGE_DIGEST: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.4");
const ID_KP_TIME_STAMPING: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.8");

fn err(m: impl ToString) -> VerifyError {
    VerifyError::Timestamp(m.to_string())
}

/// A timestamp that verified: when, and by which TSA.
#[derive(Debug, Clone)]
pub struct Verified<'r> {
    pub time: i64,
    pub tsa: &'r Authority,
}

/// Verifies one `signedTimestamp` (a DER TimeStampResp, or a bare TimeStampToken) over `signature`.
pub fn verify<'r>(root: &'r TrustedRoot, der: &[u8], signature: &[u8]) -> Result<Verified<'r>> {
    let token = match TimeStampResp::from_der(der) {
        Ok(resp) => {
            if !matches!(resp.status.status, PkiStatus::Accepted | PkiStatus::GrantedWithMods) {
                return Err(err(format!("the TSA did not grant the timestamp (status {:?})", resp.status.status)));
            }
            resp.time_stamp_token.ok_or_else(|| err("the response carries no timeStampToken"))?
        }
        Err(_) => ContentInfo::from_der(der).map_err(|e| err(format!("not a DER RFC 3161 timestamp: {e}")))?,
    };
    if token.content_type != ID_SIGNED_DATA {
        return Err(err("the timestamp token is not CMS SignedData"));
    }
    let signed_data_der = token.content.to_der().map_err(|e| err(e.to_string()))?;
    let sd = SignedData::from_der(&signed_data_der).map_err(|e| err(format!("malformed SignedData: {e}")))?;
    if sd.encap_content_info.econtent_type != ID_CT_TST_INFO {
        return Err(err("the signed content is not a TSTInfo"));
    }
    let econtent = sd.encap_content_info.econtent.as_ref().ok_or_else(|| err("the token has no TSTInfo"))?;
    let tst_der = econtent.decode_as::<OctetString>().map_err(|e| err(format!("malformed eContent: {e}")))?;
    let tst = TstInfo::from_der(tst_der.as_bytes()).map_err(|e| err(format!("malformed TSTInfo: {e}")))?;

    // The imprint binds the timestamp to this bundle's signature.
    let imprint_alg = cert::digest_alg(tst.message_imprint.hash_algorithm.oid).map_err(err)?;
    if imprint_alg.digest(signature) != tst.message_imprint.hashed_message.as_bytes() {
        return Err(err("the message imprint does not match the hash of the bundle's signature"));
    }
    let time = tst.gen_time.to_unix_duration().as_secs() as i64;

    let [signer] = sd.signer_infos.0.as_slice() else {
        return Err(err(format!("expected one SignerInfo, found {}", sd.signer_infos.0.len())));
    };
    let digest_alg = cert::digest_alg(signer.digest_alg.oid).map_err(err)?;
    // With signed attributes (RFC 3161 requires them) the signature covers their DER as a
    // SET OF, in the order sent, and the messageDigest attribute covers the TSTInfo.
    let signed_bytes = match &signer.signed_attrs {
        None => tst_der.as_bytes().to_vec(),
        Some(attrs) => {
            let digest_attr = attrs
                .iter()
                .find(|a| a.oid == ID_MESSAGE_DIGEST)
                .and_then(|a| a.values.get(0))
                .and_then(|v| v.decode_as::<OctetString>().ok())
                .ok_or_else(|| err("signed attributes have no messageDigest"))?;
            if digest_attr.as_bytes() != digest_alg.digest(tst_der.as_bytes()) {
                return Err(err("the messageDigest attribute does not match the TSTInfo"));
            }
            let content_type = attrs
                .iter()
                .find(|a| a.oid == ID_CONTENT_TYPE)
                .and_then(|a| a.values.get(0))
                .and_then(|v| v.decode_as::<ObjectIdentifier>().ok());
            if content_type != Some(ID_CT_TST_INFO) {
                return Err(err("the contentType attribute is not id-ct-TSTInfo"));
            }
            raw_signed_attrs(&signed_data_der).ok_or_else(|| err("cannot locate the signed attributes"))?
        }
    };
    let sig_hash = cert::signature_hash(signer.signature_algorithm.oid, Some(signer.digest_alg.oid)).map_err(err)?;
    let sig = signer.signature.as_bytes();

    let tsa = root
        .timestamp_authorities
        .iter()
        .find(|a| a.chain[0].key.verify_with_hash(sig_hash, &signed_bytes, sig).is_ok())
        .ok_or_else(|| err("not signed by any timestamp authority in the trusted root"))?;
    check_authority(tsa, time)?;
    Ok(Verified { time, tsa })
}

/// The TSA must be trusted at `time`, its chain valid then, and its certificate for timestamping.
fn check_authority(tsa: &Authority, time: i64) -> Result<()> {
    if let Some(e) = &tsa.chain_error {
        return Err(err(format!("the chain of TSA {} does not verify: {e}", tsa.uri)));
    }
    if !tsa.valid.contains(time) {
        return Err(err(format!(
            "time {} is outside the trusted root's validity for TSA {} ({})",
            format_unix(time),
            tsa.uri,
            tsa.valid
        )));
    }
    for c in &tsa.chain {
        if !c.validity.contains(time) {
            return Err(err(format!(
                "time {} is outside the validity of TSA certificate {} ({})",
                format_unix(time),
                c.x509.tbs_certificate.subject,
                c.validity
            )));
        }
    }
    check_eku(&tsa.chain[0])
}

fn check_eku(leaf: &Cert) -> Result<()> {
    if let Some(ext) = leaf.extension(OID_EXT_KEY_USAGE) {
        let eku = x509_cert::ext::pkix::ExtendedKeyUsage::from_der(ext.extn_value.as_bytes())
            .map_err(|e| err(format!("TSA certificate has a malformed EKU: {e}")))?;
        if !eku.0.contains(&ID_KP_TIME_STAMPING) {
            return Err(err("the TSA certificate's extended key usage lacks timeStamping"));
        }
    }
    Ok(())
}

/// The DER of the first SignerInfo's signedAttrs, re-tagged as a SET OF, walking the original
/// bytes: decoding would sort the set, and the signature covers the order sent.
fn raw_signed_attrs(signed_data_der: &[u8]) -> Option<Vec<u8>> {
    let mut sd = next_tlv(signed_data_der)?.value;
    let mut signer_infos = None;
    while !sd.is_empty() {
        let t = next_tlv(sd)?;
        if t.tag == Tag::Set {
            signer_infos = Some(t.value); // the last SET is signerInfos
        }
        sd = t.rest;
    }
    let mut si = next_tlv(signer_infos?)?.value;
    while !si.is_empty() {
        let t = next_tlv(si)?;
        if t.tag.is_context_specific() && t.tag.is_constructed() && t.tag.number().value() == 0 {
            return der::asn1::AnyRef::new(Tag::Set, t.value).ok()?.to_der().ok();
        }
        si = t.rest;
    }
    None
}
