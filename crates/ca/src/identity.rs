//! Whether an identity can be written into a certificate as it stands.
//!
//! A verified token proves who the caller is; it does not make every claim certifiable.
//! The SAN's rfc822Name and uniformResourceIdentifier are IA5String, 7-bit ASCII
//! (RFC 5280 §4.2.1.6), and a URI has no spaces or control characters (RFC 3986). An email
//! like `ü@example.com` used to reach the encoder and come back as a 500; it is refused here
//! with a 400 that says why. signet does not issue RFC 9598 SmtpUTF8Mailbox names: Sigstore
//! verifiers match identities against the rfc822Name, so a certificate they cannot match
//! would be worse than a clear refusal.

use crate::oidc::{Identity, SanKind};

/// The longest subject certified; longer ones are refused rather than truncated.
pub const MAX_SUBJECT: usize = 1024;

/// What keeps an identity out of a certificate; each names the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Uncertifiable {
    #[error("the identity must be 1 to {MAX_SUBJECT} bytes, got {0}")]
    Length(usize),
    #[error(
        "the email {0:?} is not ASCII: a certificate's rfc822Name must be (RFC 5280), and signet does not issue SmtpUTF8Mailbox names (RFC 9598)"
    )]
    EmailNotAscii(String),
    #[error("the email {0:?} contains spaces or control characters")]
    EmailSpaces(String),
    #[error("the email {0:?} is not of the form local@domain")]
    EmailShape(String),
    #[error("the URI {0:?} is not ASCII: a certificate's URI must be (RFC 5280); percent-encode it (RFC 3987)")]
    UriNotAscii(String),
    #[error("the URI {0:?} contains spaces or control characters (RFC 3986)")]
    UriSpaces(String),
    #[error("the user name {name:?} contains the control character {control:?}")]
    UsernameControl { name: String, control: char },
}

/// `Err` says what is wrong with the identity, naming the value.
pub fn certifiable(identity: &Identity) -> Result<(), Uncertifiable> {
    let s = identity.subject.as_str();
    if s.is_empty() || s.len() > MAX_SUBJECT {
        return Err(Uncertifiable::Length(s.len()));
    }
    match identity.kind {
        SanKind::Email => {
            if !s.is_ascii() {
                return Err(Uncertifiable::EmailNotAscii(s.to_string()));
            }
            if s.bytes().any(|b| b.is_ascii_control() || b == b' ') {
                return Err(Uncertifiable::EmailSpaces(s.to_string()));
            }
            match s.split_once('@') {
                Some((local, domain)) if !local.is_empty() && !domain.is_empty() && !domain.contains('@') => Ok(()),
                _ => Err(Uncertifiable::EmailShape(s.to_string())),
            }
        }
        SanKind::Uri => {
            if !s.is_ascii() {
                return Err(Uncertifiable::UriNotAscii(s.to_string()));
            }
            if s.bytes().any(|b| !b.is_ascii_graphic()) {
                return Err(Uncertifiable::UriSpaces(s.to_string()));
            }
            Ok(())
        }
        // A UTF8String: any text, but no control characters in a name a person reads.
        SanKind::Username => match s.chars().find(|c| c.is_control()) {
            Some(control) => Err(Uncertifiable::UsernameControl { name: s.to_string(), control }),
            None => Ok(()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(kind: SanKind, subject: &str) -> Identity {
        Identity {
            issuer: "https://issuer.example".into(),
            subject: subject.into(),
            kind,
            token_subject: "1".into(),
            extensions: Vec::new(),
            claims: Default::default(),
        }
    }

    #[test]
    fn ascii_identities_pass_and_others_are_named() {
        assert!(certifiable(&id(SanKind::Email, "alice@example.com")).is_ok());
        assert!(certifiable(&id(SanKind::Uri, "https://ci.example/job?x=1")).is_ok());
        for (kind, bad, why) in [
            (SanKind::Email, "ünïcode@example.com", "not ASCII"),
            (SanKind::Email, "alice@bücher.example", "not ASCII"),
            (SanKind::Email, "a b@example.com", "spaces"),
            (SanKind::Email, "a\u{0}@example.com", "control"),
            (SanKind::Email, "@example.com", "local@domain"),
            (SanKind::Email, "a@b@example.com", "local@domain"),
            (SanKind::Uri, "https://bücher.example/", "not ASCII"),
            (SanKind::Uri, "spiffe://example.org/a b", "spaces"),
            (SanKind::Uri, "", "1 to"),
        ] {
            let err = certifiable(&id(kind, bad)).unwrap_err().to_string();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
        assert!(certifiable(&id(SanKind::Uri, &format!("https://x/{}", "a".repeat(MAX_SUBJECT)))).is_err());
        assert!(certifiable(&id(SanKind::Username, "ålice!example.com")).is_ok(), "an otherName is a UTF8String");
        assert!(certifiable(&id(SanKind::Username, "a\nb!example.com")).unwrap_err().to_string().contains("control"));
    }
}
