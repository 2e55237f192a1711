//! The signing identity of an entry, for `POST /api/v1/index/retrieve` by identity or email.
//!
//! An entry signed with a Fulcio certificate carries the signer's identity in the
//! certificate's Subject Alternative Name: an email address or a URI (Fulcio issues one). The
//! index key says which it is, so that a search by email finds email SANs only, and holds
//! emails lower-cased, since the address's case does not name another signer:
//! `email:<address, lower-cased>`, `uri:<uri, exactly>`, or `name:<user!domain>` for the
//! otherName of Fulcio's `username` issuers. Entries signed with a bare key have no identity.

use x509_cert::der::oid::AssociatedOid;
use x509_cert::der::Decode;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::SubjectAltName;

/// The index key of `cert_der`'s first email or URI SAN; `None` for a certificate without
/// one, or one that does not parse (never an error: the identity only makes it searchable).
pub fn certificate_identity(cert_der: &[u8]) -> Option<String> {
    let cert = x509_cert::Certificate::from_der(cert_der).ok()?;
    let extensions = cert.tbs_certificate.extensions?;
    let ext = extensions.iter().find(|e| e.extn_id == SubjectAltName::OID)?;
    let names = SubjectAltName::from_der(ext.extn_value.as_bytes()).ok()?;
    names.0.iter().find_map(|n| match n {
        GeneralName::Rfc822Name(s) => Some(email_key(s.as_str())),
        GeneralName::UniformResourceIdentifier(s) => Some(format!("uri:{}", s.as_str())),
        GeneralName::OtherName(other) if other.type_id == FULCIO_USERNAME => {
            other.value.decode_as::<x509_cert::der::asn1::Utf8StringRef>().ok().map(|u| format!("name:{}", u.as_str()))
        }
        _ => None,
    })
}

/// Fulcio's otherName type for a `username` issuer's `user!domain`.
const FULCIO_USERNAME: x509_cert::der::oid::ObjectIdentifier = x509_cert::der::oid::ObjectIdentifier::new_unwrap("1.3.6.1.4.1.57264.1.7");

/// The index key of an email address.
pub fn email_key(address: &str) -> String {
    format!("email:{}", address.to_lowercase())
}

/// The index key of an identity as a search names it: an email address (no scheme, an `@`),
/// a user name (`user!domain`: no scheme, no `@`), or a URI. A URI always has a `:` after its
/// scheme; an email address, unquoted, has none.
pub fn identity_key(value: &str) -> String {
    if value.contains(':') {
        format!("uri:{value}")
    } else if value.contains('@') {
        email_key(value)
    } else {
        format!("name:{value}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn searches_name_emails_in_any_case_and_uris_exactly() {
        assert_eq!(identity_key("Alice@Example.com"), "email:alice@example.com");
        assert_eq!(identity_key("https://github.com/o/r/.github/workflows/w.yml@refs/heads/main"),
            "uri:https://github.com/o/r/.github/workflows/w.yml@refs/heads/main");
        assert_eq!(identity_key("spiffe://x/Y"), "uri:spiffe://x/Y");
        assert_eq!(identity_key("alice!example.com"), "name:alice!example.com");
        assert_eq!(certificate_identity(b"not a certificate"), None);
    }
}

/// The index key of a signer's key or certificate (rekor-cli `search --public-key`), as
/// Rekor's: `sha256:<hex>` of its PEM as Go's `encoding/pem` writes it (Rekor's
/// `CanonicalValue`), so that the same key or certificate finds it however its PEM was
/// wrapped. `label` is `PUBLIC KEY` or `CERTIFICATE`.
pub fn public_key_index(label: &str, der: &[u8]) -> String {
    let mut key = String::from("sha256:");
    signet_core::hexfmt::push(&mut key, &signet_core::hash::sha256(signet_core::pem::encode(label, der).as_bytes()));
    key
}
