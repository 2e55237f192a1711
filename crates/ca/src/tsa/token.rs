//! A timestamp token's CMS encoding, with everything that is the same in every token encoded
//! once.
//!
//! Built from the `cms` and `x509-cert` types on every stamp, a response re-encoded the TSA's
//! certificate and its issuer name, cloned both, and hashed the certificate for the
//! signingCertificateV2 attribute: more than all but the signature itself (docs/performance.md,
//! "The measurements behind the code's shape"). [`Template`] encodes those parts once, with the
//! same types, and a stamp writes only what changes around them: the TSTInfo, its digest, and
//! the signature. The tests check the result byte for byte against the types' own encoding.

use cmpv2::status::{PkiStatus, PkiStatusInfo};
use cms::cert::{CertificateChoices, IssuerAndSerialNumber};
use cms::content_info::CmsVersion;
use cms::signed_data::{CertificateSet, SignerIdentifier};
use der::asn1::{Any, OctetString, SetOfVec};
use der::{Decode, Encode, Header, Length, Tag, TagNumber};
use signet_core::hash::sha256;
use spki::AlgorithmIdentifierOwned;
use x509_cert::attr::Attribute;
use x509_cert::Certificate;

use super::oid::{ECDSA_WITH_SHA256, ID_CONTENT_TYPE, ID_CT_TST_INFO, ID_MESSAGE_DIGEST, ID_SHA256, ID_SIGNED_DATA, ID_SIGNING_CERTIFICATE_V2};

/// `[0]`, constructed: the tag of SignedData's certificates and SignerInfo's signedAttrs
/// (IMPLICIT), and of ContentInfo's content and eContent (EXPLICIT).
const CONTEXT_0: Tag = Tag::ContextSpecific { constructed: true, number: TagNumber::N0 };

/// The DER of every part of a token that does not depend on the request or the time.
pub(super) struct Template {
    /// `status` of TimeStampResp: granted.
    status: Vec<u8>,
    /// ContentInfo's contentType: id-signedData.
    content_type: Vec<u8>,
    /// SignedData's version (3) and digestAlgorithms (`SET { sha256 }`).
    signed_data_head: Vec<u8>,
    /// EncapsulatedContentInfo's eContentType: id-ct-TSTInfo.
    econtent_type: Vec<u8>,
    /// `[0] IMPLICIT SET { the TSA certificate }`, sent when the request asks for it.
    certificates: Vec<u8>,
    /// SignerInfo's version, sid (the certificate's issuer and serial) and digestAlgorithm.
    signer_head: Vec<u8>,
    /// SignerInfo's signatureAlgorithm.
    signature_algorithm: Vec<u8>,
    /// The content of the signed attributes' SET OF, in DER order, with the message digest
    /// zeroed at `digest_at`.
    attributes: Vec<u8>,
    digest_at: usize,
}

impl Template {
    pub(super) fn new(cert: &Certificate, cert_der: &[u8]) -> der::Result<Template> {
        let (attributes, digest_at) = attributes_with_hole(cert_der)?;
        let mut signed_data_head = CmsVersion::V3.to_der()?;
        SetOfVec::try_from(vec![sha256_algorithm()])?.encode_to_vec(&mut signed_data_head)?;
        let mut signer_head = CmsVersion::V1.to_der()?;
        SignerIdentifier::IssuerAndSerialNumber(IssuerAndSerialNumber {
            issuer: cert.tbs_certificate.issuer.clone(),
            serial_number: cert.tbs_certificate.serial_number.clone(),
        })
        .encode_to_vec(&mut signer_head)?;
        sha256_algorithm().encode_to_vec(&mut signer_head)?;
        // `[0] IMPLICIT` takes the place of the certificate SET's own tag.
        let certificates = CertificateSet(SetOfVec::try_from(vec![CertificateChoices::Certificate(cert.clone())])?);
        let certificates_field = wrap(CONTEXT_0, content_of(&certificates.0.to_der()?)?)?;
        Ok(Template {
            status: PkiStatusInfo { status: PkiStatus::Accepted, status_string: None, fail_info: None }.to_der()?,
            content_type: ID_SIGNED_DATA.to_der()?,
            signed_data_head,
            econtent_type: ID_CT_TST_INFO.to_der()?,
            certificates: certificates_field,
            signer_head,
            signature_algorithm: AlgorithmIdentifierOwned { oid: ECDSA_WITH_SHA256, parameters: None }.to_der()?,
            attributes,
            digest_at,
        })
    }

    /// The DER TimeStampResp granting a token over `tst_der`. `sign` signs the DER of the
    /// signed attributes (RFC 5652 §5.4: as a SET OF, not as the `[0]` they are sent as).
    pub(super) fn response<E: From<der::Error>>(
        &self,
        tst_der: &[u8],
        with_certificate: bool,
        sign: impl FnOnce(&[u8]) -> Result<Vec<u8>, E>,
    ) -> Result<Vec<u8>, E> {
        let mut to_sign = Vec::with_capacity(self.attributes.len() + 4);
        header(&mut to_sign, Tag::Set, self.attributes.len())?;
        let attributes_at = to_sign.len();
        to_sign.extend_from_slice(&self.attributes);
        let hole = attributes_at + self.digest_at;
        to_sign.get_mut(hole..hole + 32).ok_or_else(|| Tag::Set.length_error())?.copy_from_slice(&sha256(tst_der));
        let signature = sign(&to_sign)?;
        let attributes = to_sign.get(attributes_at..).ok_or_else(|| Tag::Set.length_error())?;

        // Lengths from the inside out, then one pass from the outside in.
        let signer = self.signer_head.len()
            + tlv_len(attributes.len())?
            + self.signature_algorithm.len()
            + tlv_len(signature.len())?;
        let signer_infos = tlv_len(signer)?;
        let tst_octets = tlv_len(tst_der.len())?;
        let encap = self.econtent_type.len() + tlv_len(tst_octets)?;
        let certificates: &[u8] = if with_certificate { &self.certificates } else { &[] };
        let signed_data = self.signed_data_head.len() + tlv_len(encap)? + certificates.len() + tlv_len(signer_infos)?;
        let explicit_content = tlv_len(signed_data)?;
        let content_info = self.content_type.len() + tlv_len(explicit_content)?;
        let resp = self.status.len() + tlv_len(content_info)?;

        let mut out = Vec::with_capacity(tlv_len(resp)?);
        header(&mut out, Tag::Sequence, resp)?;
        out.extend_from_slice(&self.status);
        header(&mut out, Tag::Sequence, content_info)?;
        out.extend_from_slice(&self.content_type);
        header(&mut out, CONTEXT_0, explicit_content)?;
        header(&mut out, Tag::Sequence, signed_data)?;
        out.extend_from_slice(&self.signed_data_head);
        header(&mut out, Tag::Sequence, encap)?;
        out.extend_from_slice(&self.econtent_type);
        header(&mut out, CONTEXT_0, tst_octets)?;
        header(&mut out, Tag::OctetString, tst_der.len())?;
        out.extend_from_slice(tst_der);
        out.extend_from_slice(certificates);
        header(&mut out, Tag::Set, signer_infos)?;
        header(&mut out, Tag::Sequence, signer)?;
        out.extend_from_slice(&self.signer_head);
        header(&mut out, CONTEXT_0, attributes.len())?;
        out.extend_from_slice(attributes);
        out.extend_from_slice(&self.signature_algorithm);
        header(&mut out, Tag::OctetString, signature.len())?;
        out.extend_from_slice(&signature);
        Ok(out)
    }
}

fn sha256_algorithm() -> AlgorithmIdentifierOwned {
    AlgorithmIdentifierOwned { oid: ID_SHA256, parameters: None }
}

fn header(out: &mut Vec<u8>, tag: Tag, len: usize) -> der::Result<()> {
    Header::new(tag, Length::try_from(len)?)?.encode_to_vec(out)?;
    Ok(())
}

/// The length of a TLV whose value is `len` bytes.
fn tlv_len(len: usize) -> der::Result<usize> {
    Ok(usize::try_from(Length::try_from(len)?.for_tlv()?)?)
}

/// The three signed attributes (content type, message digest, signingCertificateV2) as the
/// content of a DER SET OF, with a zero message digest, and where that digest starts. DER
/// orders a SET OF by its elements' encodings, and these three differ before the digest's
/// bytes, so the order found here holds for every digest.
fn attributes_with_hole(cert_der: &[u8]) -> der::Result<(Vec<u8>, usize)> {
    let zero = [0u8; 32];
    let message_digest = attribute(ID_MESSAGE_DIGEST, Any::encode_from(&OctetString::new(zero.to_vec())?)?)?;
    let marked = {
        let mut marked = message_digest.to_der()?;
        let n = marked.len();
        marked.get_mut(n.saturating_sub(32)..).ok_or_else(|| Tag::Set.length_error())?.fill(0xff);
        marked
    };
    let set = |digest_attribute: Attribute| -> der::Result<Vec<u8>> {
        let all = SetOfVec::try_from(vec![
            attribute(ID_CONTENT_TYPE, Any::encode_from(&ID_CT_TST_INFO)?)?,
            digest_attribute,
            attribute(ID_SIGNING_CERTIFICATE_V2, Any::from_der(&signing_certificate_v2(cert_der)?)?)?,
        ])?;
        Ok(content_of(&all.to_der()?)?.to_vec())
    };
    let attributes = set(message_digest.clone())?;
    // Where the attribute sits: found by its encoding with the digest marked, so that a zero
    // run elsewhere cannot be taken for it.
    let with_marked = set(Attribute::from_der(&marked)?)?;
    let at = attributes
        .iter()
        .zip(&with_marked)
        .position(|(a, b)| a != b)
        .ok_or_else(|| Tag::Set.length_error())?;
    Ok((attributes, at))
}

fn attribute(oid: der::asn1::ObjectIdentifier, value: Any) -> der::Result<Attribute> {
    Ok(Attribute { oid, values: SetOfVec::try_from(vec![value])? })
}

/// RFC 5035 `SigningCertificateV2 ::= SEQUENCE { certs SEQUENCE OF ESSCertIDv2 }`, one
/// ESSCertIDv2 with the default hash (SHA-256) and so only `certHash`.
fn signing_certificate_v2(cert_der: &[u8]) -> der::Result<Vec<u8>> {
    let cert_hash = OctetString::new(sha256(cert_der).to_vec())?.to_der()?;
    let ess_cert_id = wrap(Tag::Sequence, &cert_hash)?;
    wrap(Tag::Sequence, &wrap(Tag::Sequence, &ess_cert_id)?)
}

fn wrap(tag: Tag, content: &[u8]) -> der::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(tlv_len(content.len())?);
    header(&mut out, tag, content.len())?;
    out.extend_from_slice(content);
    Ok(out)
}

/// The value of the TLV `der`, without its header.
fn content_of(der: &[u8]) -> der::Result<&[u8]> {
    let header = Header::decode(&mut der::SliceReader::new(der)?)?;
    der.get(usize::try_from(header.encoded_len()?)?..).ok_or_else(|| Tag::Set.length_error())
}

#[cfg(test)]
mod tests {
    use aws_lc_rs::signature::{UnparsedPublicKey, ECDSA_P256_SHA256_ASN1};
    use cms::content_info::ContentInfo;
    use cms::signed_data::{EncapsulatedContentInfo, SignedData, SignerInfo};
    use der::asn1::Int;
    use x509_tsp::{TimeStampResp, TstInfo};

    use super::*;
    use crate::authority::Authority;
    use crate::tsa::{Request, Tsa};
    use crate::x509::CaCurve;

    /// The oracle: the response as the `cms` types encode it, which is how every stamp was
    /// built before the template.
    fn by_types(cert: &Certificate, cert_der: &[u8], tst_der: &[u8], with_certificate: bool, signature: &[u8]) -> Vec<u8> {
        let signed_attrs = SetOfVec::try_from(vec![
            attribute(ID_CONTENT_TYPE, Any::encode_from(&ID_CT_TST_INFO).unwrap()).unwrap(),
            attribute(ID_MESSAGE_DIGEST, Any::encode_from(&OctetString::new(sha256(tst_der).to_vec()).unwrap()).unwrap())
                .unwrap(),
            attribute(ID_SIGNING_CERTIFICATE_V2, Any::from_der(&signing_certificate_v2(cert_der).unwrap()).unwrap()).unwrap(),
        ])
        .unwrap();
        let signer = SignerInfo {
            version: CmsVersion::V1,
            sid: SignerIdentifier::IssuerAndSerialNumber(IssuerAndSerialNumber {
                issuer: cert.tbs_certificate.issuer.clone(),
                serial_number: cert.tbs_certificate.serial_number.clone(),
            }),
            digest_alg: sha256_algorithm(),
            signed_attrs: Some(signed_attrs),
            signature_algorithm: AlgorithmIdentifierOwned { oid: ECDSA_WITH_SHA256, parameters: None },
            signature: OctetString::new(signature.to_vec()).unwrap(),
            unsigned_attrs: None,
        };
        let signed = SignedData {
            version: CmsVersion::V3,
            digest_algorithms: SetOfVec::try_from(vec![sha256_algorithm()]).unwrap(),
            encap_content_info: EncapsulatedContentInfo {
                econtent_type: ID_CT_TST_INFO,
                econtent: Some(Any::encode_from(&OctetString::new(tst_der.to_vec()).unwrap()).unwrap()),
            },
            certificates: with_certificate
                .then(|| CertificateSet(SetOfVec::try_from(vec![CertificateChoices::Certificate(cert.clone())]).unwrap())),
            crls: None,
            signer_infos: SetOfVec::try_from(vec![signer]).unwrap().into(),
        };
        TimeStampResp {
            status: PkiStatusInfo { status: PkiStatus::Accepted, status_string: None, fail_info: None },
            time_stamp_token: Some(ContentInfo { content_type: ID_SIGNED_DATA, content: Any::encode_from(&signed).unwrap() }),
        }
        .to_der()
        .unwrap()
    }

    fn a_tsa() -> (Tsa, Certificate, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let ca_keys = crate::authority::CaKeys::curve(Some(CaCurve::P256));
        let authority = Authority::open(dir.path(), &ca_keys).unwrap();
        let key = signet_keys::Signer::load_or_generate(&dir.path().join("keys").join("tsa.pem"), signet_keys::Algorithm::EcdsaP256Sha256).unwrap();
        let tsa = Tsa::open(dir.path(), std::sync::Arc::new(key), || ca_keys.root_key(dir.path()), authority.root_der()).unwrap();
        let cert = Certificate::from_der(&tsa.cert_der).unwrap();
        (tsa, cert, dir)
    }

    /// A response's TSTInfo, signed attributes (as the SET OF that was signed) and signature.
    fn parts(resp: &[u8]) -> (Vec<u8>, Vec<u8>, Vec<u8>, bool) {
        let resp = TimeStampResp::from_der(resp).unwrap();
        let signed: SignedData = resp.time_stamp_token.unwrap().content.decode_as().unwrap();
        let tst = OctetString::from_der(&signed.encap_content_info.econtent.unwrap().to_der().unwrap()).unwrap();
        let signer = signed.signer_infos.0.get(0).unwrap().clone();
        let attributes = signer.signed_attrs.unwrap().to_der().unwrap();
        (tst.as_bytes().to_vec(), attributes, signer.signature.as_bytes().to_vec(), signed.certificates.is_some())
    }

    #[test]
    fn every_stamp_is_byte_for_byte_what_the_cms_types_encode() {
        let (tsa, cert, _dir) = a_tsa();
        let requests = [
            (super::super::ID_SHA256, 32, Some(vec![0x41, 2, 3, 4, 5, 6, 7, 8]), true),
            (super::super::ID_SHA256, 32, None, false),
            (super::super::ID_SHA384, 48, Some(vec![0x01; 20]), false),
            (super::super::ID_SHA512, 64, None, true),
        ];
        for (n, (hash_oid, len, nonce, cert_req)) in requests.into_iter().enumerate() {
            for round in 0..8u8 {
                let digest: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(round) ^ n as u8).collect();
                let req = Request { hash_oid, digest: digest.clone(), nonce: nonce.clone(), cert_req, policy: None };
                let resp = tsa.timestamp(&req).unwrap();
                let (tst_der, attributes, signature, has_certificate) = parts(&resp);
                assert_eq!(has_certificate, cert_req, "the certificate is sent when asked for, and only then");
                assert_eq!(resp, by_types(&cert, &tsa.cert_der, &tst_der, cert_req, &signature), "request {n}, round {round}");
                let tst = TstInfo::from_der(&tst_der).unwrap();
                assert_eq!(tst.message_imprint.hashed_message.as_bytes(), &digest[..]);
                assert_eq!(tst.nonce, nonce.as_deref().map(|b| Int::new(b).unwrap()));
                // The signature is over the attributes as a SET OF, by the certificate's key.
                let set = [&[0x31][..], &attributes[1..]].concat();
                let spki = cert.tbs_certificate.subject_public_key_info.subject_public_key.raw_bytes();
                UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, spki).verify(&set, &signature).unwrap();
                assert_eq!(tst.policy, crate::tsa::POLICY);
            }
        }
    }

    #[test]
    fn the_message_digest_is_the_tst_infos_and_sits_where_der_orders_it() {
        let (tsa, _, _dir) = a_tsa();
        for tst in [&b"\x30\x03\x02\x01\x01"[..], &[0u8; 300][..], &[0xffu8; 40][..]] {
            let resp = tsa.token.response(tst, false, |_| Ok::<_, der::Error>(vec![0x30, 0])).unwrap();
            let (_, attributes, _, _) = parts(&resp);
            let set = SetOfVec::<Attribute>::from_der(&[&[0x31][..], &attributes[1..]].concat()).unwrap();
            let digest = set.iter().find(|a| a.oid == ID_MESSAGE_DIGEST).unwrap();
            let value = OctetString::from_der(&digest.values.get(0).unwrap().to_der().unwrap()).unwrap();
            assert_eq!(value.as_bytes(), &sha256(tst)[..]);
            // Decoding a SET OF checks DER order; re-encoding must give the same bytes.
            assert_eq!(set.to_der().unwrap()[1..], attributes[1..]);
        }
    }
}
