//! The signing identity of an entry, for `POST /api/v1/index/retrieve` by identity or email.
//!
//! An entry signed with a Fulcio certificate carries the signer's identity in the
//! certificate's Subject Alternative Name: an email address or a URI (Fulcio issues one). The
//! index key says which it is, so that a search by email finds email SANs only, and holds
//! emails lower-cased, since the address's case does not name another signer:
//! `email:<address, lower-cased>` or `uri:<uri, exactly>`. Entries signed with a bare key
//! have no identity.

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
        _ => None,
    })
}

/// The index key of an email address.
pub fn email_key(address: &str) -> String {
    format!("email:{}", address.to_lowercase())
}

/// The index key of an identity as a search names it: an email address (no scheme, an `@`)
/// or a URI. A URI always has a `:` after its scheme; an email address, unquoted, has none.
pub fn identity_key(value: &str) -> String {
    if value.contains('@') && !value.contains(':') {
        email_key(value)
    } else {
        format!("uri:{value}")
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
        assert_eq!(certificate_identity(b"not a certificate"), None);
    }
}
