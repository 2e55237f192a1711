//! Fulcio's issuer types: how a verified token's claims become the certificate's subject,
//! and which identities an issuer may vouch for at all.
//!
//! An issuer that names its subjects freely (`uri`, `username`, `spiffe`) is bound to a
//! domain, as Fulcio binds it: otherwise any configured issuer could mint a certificate for
//! `https://someone-else.example/...`, and a verifier that checks only the SAN would accept
//! it.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::error::{IssuerError, SubjectShape, TokenError};
use crate::ci::{CiExtension, CiProvider};

/// What kind of name goes into the certificate's SAN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SanKind {
    /// rfc822Name.
    Email,
    /// uniformResourceIdentifier.
    Uri,
    /// otherName 1.3.6.1.4.1.57264.1.7, a UTF8String `user!domain` (Fulcio's `username`).
    Username,
}

/// An issuer's type, with what that type needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IssuerKind {
    /// `email`, which must come with `email_verified: true` unless the issuer is trusted to
    /// have verified it another way.
    Email { skip_email_verification: bool },
    /// `sub` is a URI on `subject_domain`'s scheme and host.
    Uri { subject_domain: String },
    /// `sub` is a SPIFFE ID in `trust_domain`.
    Spiffe { trust_domain: String },
    /// `sub` is a user name; the SAN is `sub!subject_domain`.
    Username { subject_domain: String },
    /// A Kubernetes service account token: the SAN names its namespace and account.
    Kubernetes,
    /// Chainguard's identity tokens: the SAN is the issuer URL joined with `sub`.
    Chainguard,
    /// A CI provider's token, mapped by its templates ([`crate::ci`]).
    Ci(Arc<CiProvider>),
}

/// The certificate's subject for a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub san: String,
    pub san_kind: SanKind,
    pub extensions: Vec<CiExtension>,
}

impl IssuerKind {
    /// Fulcio's name for the type (`/api/v2/configuration`).
    pub fn type_name(&self) -> &str {
        match self {
            IssuerKind::Email { .. } => "email",
            IssuerKind::Uri { .. } => "uri",
            IssuerKind::Spiffe { .. } => "spiffe",
            IssuerKind::Username { .. } => "username",
            IssuerKind::Kubernetes => "kubernetes",
            IssuerKind::Chainguard => "chainguard-identity",
            IssuerKind::Ci(_) => "ci-provider",
        }
    }

    /// The claim a client signs to prove possession of its key (Fulcio's challenge claim).
    pub fn challenge_claim(&self) -> &'static str {
        match self {
            IssuerKind::Email { .. } => "email",
            _ => "sub",
        }
    }

    /// Checks the kind's own settings against the issuer it is configured for, as Fulcio
    /// does when it reads its config. `Err` says what to change.
    pub fn check(&self, issuer: &str) -> Result<(), IssuerError> {
        match self {
            IssuerKind::Uri { subject_domain } => {
                let (scheme, host) = scheme_and_host(subject_domain).ok_or_else(|| IssuerError::SubjectDomainUrl(subject_domain.clone()))?;
                if let Some((issuer_scheme, issuer_host)) = scheme_and_host(issuer) {
                    if scheme != issuer_scheme {
                        return Err(IssuerError::SubjectDomainScheme(subject_domain.clone()));
                    }
                    allowed_domain(host, issuer_host)?;
                }
                Ok(())
            }
            IssuerKind::Username { subject_domain } => {
                if subject_domain.contains("://") {
                    return Err(IssuerError::SubjectDomainHost(subject_domain.clone()));
                }
                if subject_domain.is_empty() {
                    return Err(IssuerError::NoSubjectDomain);
                }
                if let Some((_, issuer_host)) = scheme_and_host(issuer) {
                    allowed_domain(subject_domain, issuer_host)?;
                }
                Ok(())
            }
            IssuerKind::Spiffe { trust_domain } => {
                if trust_domain.is_empty() || !trust_domain.bytes().all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-' | b'_')) {
                    return Err(IssuerError::TrustDomain(trust_domain.clone()));
                }
                Ok(())
            }
            IssuerKind::Email { .. } | IssuerKind::Kubernetes | IssuerKind::Chainguard | IssuerKind::Ci(_) => Ok(()),
        }
    }

    /// The certificate subject for a token from `issuer` with these verified claims.
    pub fn principal(&self, issuer: &str, claims: &Map<String, Value>) -> Result<Principal, TokenError> {
        let sub = claims.get("sub").and_then(Value::as_str).ok_or(TokenError::MissingClaim("sub"))?;
        let plain = |san: String, san_kind| Ok(Principal { san, san_kind, extensions: Vec::new() });
        match self {
            IssuerKind::Email { skip_email_verification } => {
                let email = claims.get("email").and_then(Value::as_str).ok_or(TokenError::MissingClaim("email"))?;
                if !skip_email_verification && claims.get("email_verified") != Some(&Value::Bool(true)) {
                    return Err(TokenError::EmailNotVerified);
                }
                if !email.contains('@') {
                    return Err(TokenError::BadSubject(email.to_string(), SubjectShape::Email));
                }
                plain(email.to_string(), SanKind::Email)
            }
            IssuerKind::Uri { subject_domain } => {
                let refuse = |why: SubjectShape| Err(TokenError::BadSubject(sub.to_string(), why));
                let Some((scheme, host)) = scheme_and_host(sub) else {
                    return refuse(SubjectShape::Uri);
                };
                if sub.contains('@') && !sub.contains('/') {
                    return refuse(SubjectShape::UriNotEmail);
                }
                match scheme_and_host(subject_domain) {
                    Some((s, h)) if s == scheme && h.eq_ignore_ascii_case(host) => plain(sub.to_string(), SanKind::Uri),
                    _ => refuse(SubjectShape::UriOn(subject_domain.clone())),
                }
            }
            IssuerKind::Spiffe { trust_domain } => {
                let (domain, path) = spiffe_id(sub).map_err(|why| TokenError::BadSubject(sub.to_string(), why))?;
                if domain != trust_domain || path.is_empty() {
                    return Err(TokenError::BadSubject(sub.to_string(), SubjectShape::SpiffeIn(trust_domain.clone())));
                }
                plain(sub.to_string(), SanKind::Uri)
            }
            IssuerKind::Username { subject_domain } => {
                if sub.contains('!') {
                    return Err(TokenError::BadSubject(sub.to_string(), SubjectShape::UserName));
                }
                if sub.contains('@') {
                    return Err(TokenError::BadSubject(sub.to_string(), SubjectShape::UserNameNotEmail));
                }
                plain(format!("{sub}!{subject_domain}"), SanKind::Username)
            }
            IssuerKind::Kubernetes => {
                let k8s = claims.get("kubernetes.io");
                let namespace = k8s.and_then(|k| k.get("namespace")).and_then(Value::as_str).filter(|s| !s.is_empty());
                let account = k8s.and_then(|k| k.get("serviceaccount")).and_then(|s| s.get("name")).and_then(Value::as_str).filter(|s| !s.is_empty());
                match (namespace, account) {
                    (Some(ns), Some(sa)) => plain(format!("https://kubernetes.io/namespaces/{ns}/serviceaccounts/{sa}"), SanKind::Uri),
                    _ => Err(TokenError::MissingClaim("kubernetes.io (namespace and serviceaccount.name)")),
                }
            }
            IssuerKind::Chainguard => plain(format!("{}/{}", issuer.trim_end_matches('/'), sub.trim_start_matches('/')), SanKind::Uri),
            IssuerKind::Ci(provider) => {
                let rendered = provider.render(claims).map_err(|e| TokenError::CiClaim(provider.name.clone(), e.0))?;
                Ok(Principal { san: rendered.san, san_kind: SanKind::Uri, extensions: rendered.extensions })
            }
        }
    }
}

/// `scheme` and host (without port or user) of an absolute URL, if it is one.
fn scheme_and_host(url: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = url.split_once("://")?;
    if scheme.is_empty() || !scheme.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')) {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(v6),
        None => host_port.split(':').next().unwrap_or(host_port),
    };
    (!host.is_empty()).then_some((scheme, host))
}

/// Fulcio's rule for a subject domain: the same host as the issuer, or the same last two
/// labels (so `https://accounts.example.com` may vouch for `https://ci.example.com`).
fn allowed_domain(subject: &str, issuer: &str) -> Result<(), IssuerError> {
    if subject.eq_ignore_ascii_case(issuer) {
        return Ok(());
    }
    let tail = |h: &str| {
        let labels: Vec<String> = h.split('.').map(str::to_ascii_lowercase).collect();
        (labels.len() >= 2).then(|| labels[labels.len() - 2..].join("."))
    };
    match (tail(subject), tail(issuer)) {
        (Some(s), Some(i)) if s == i => Ok(()),
        _ => Err(IssuerError::ForeignDomain { subject: subject.to_string(), issuer: issuer.to_string() }),
    }
}

/// The trust domain and path of a SPIFFE ID (the SPIFFE ID standard, §2).
fn spiffe_id(id: &str) -> Result<(&str, &str), SubjectShape> {
    let rest = id.strip_prefix("spiffe://").ok_or(SubjectShape::SpiffeId)?;
    let (domain, path) = rest.split_once('/').map_or((rest, ""), |(d, p)| (d, p));
    if domain.is_empty() || !domain.bytes().all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-' | b'_')) {
        return Err(SubjectShape::SpiffeTrustDomain);
    }
    if !path.is_empty()
        && path.split('/').any(|seg| seg.is_empty() || seg == "." || seg == ".." || !seg.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_')))
    {
        return Err(SubjectShape::SpiffePath);
    }
    Ok((domain, path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn principal(kind: &IssuerKind, claims: Value) -> Result<Principal, TokenError> {
        kind.principal("https://issuer.example.com", claims.as_object().unwrap())
    }

    #[test]
    fn uri_subjects_are_bound_to_their_domain() {
        let kind = IssuerKind::Uri { subject_domain: "https://ci.example.com".into() };
        assert!(kind.check("https://issuer.example.com").is_ok());
        let ok = principal(&kind, json!({"sub": "https://ci.example.com/jobs/1"})).unwrap();
        assert_eq!((ok.san.as_str(), ok.san_kind), ("https://ci.example.com/jobs/1", SanKind::Uri));
        for bad in ["https://evil.example.org/jobs/1", "http://ci.example.com/jobs/1", "ci.example.com/x", "https://ci.example.com.evil.org/x"] {
            let err = principal(&kind, json!({"sub": bad})).unwrap_err();
            assert!(matches!(err, TokenError::BadSubject(..)), "{bad}: {err}");
        }
        assert!(IssuerKind::Uri { subject_domain: "ci.example.com".into() }.check("https://issuer.example.com").unwrap_err().to_string().contains("scheme"));
        assert!(IssuerKind::Uri { subject_domain: "https://example.org".into() }.check("https://issuer.example.com").unwrap_err().to_string().contains("second-level"));
        assert!(IssuerKind::Uri { subject_domain: "http://ci.example.com".into() }.check("https://issuer.example.com").unwrap_err().to_string().contains("scheme"));
    }

    #[test]
    fn spiffe_ids_are_bound_to_their_trust_domain() {
        let kind = IssuerKind::Spiffe { trust_domain: "example.org".into() };
        assert_eq!(principal(&kind, json!({"sub": "spiffe://example.org/ns/prod/sa/ci"})).unwrap().san, "spiffe://example.org/ns/prod/sa/ci");
        for bad in ["spiffe://other.org/ci", "spiffe://example.org", "spiffe://example.org/a//b", "spiffe://example.org/../x", "spiffe://Example.org/x", "https://example.org/x"] {
            assert!(principal(&kind, json!({"sub": bad})).is_err(), "{bad}");
        }
        assert!(IssuerKind::Spiffe { trust_domain: "Example.org".into() }.check("https://x").is_err());
    }

    #[test]
    fn usernames_become_other_names_under_the_subject_domain() {
        let kind = IssuerKind::Username { subject_domain: "example.com".into() };
        assert!(kind.check("https://accounts.example.com").is_ok());
        assert!(kind.check("https://accounts.example.org").is_err());
        assert!(IssuerKind::Username { subject_domain: "https://example.com".into() }.check("https://accounts.example.com").is_err());
        let p = principal(&kind, json!({"sub": "alice"})).unwrap();
        assert_eq!((p.san.as_str(), p.san_kind), ("alice!example.com", SanKind::Username));
        assert!(principal(&kind, json!({"sub": "al!ce"})).is_err());
        assert!(principal(&kind, json!({"sub": "alice@example.com"})).is_err());
    }

    #[test]
    fn kubernetes_service_accounts() {
        // A projected service-account token's claims (kubernetes.io/docs, "Service account tokens").
        let claims = json!({
            "sub": "system:serviceaccount:build:signer",
            "kubernetes.io": {"namespace": "build", "pod": {"name": "signer-7c9", "uid": "u1"}, "serviceaccount": {"name": "signer", "uid": "u2"}},
        });
        let p = principal(&IssuerKind::Kubernetes, claims).unwrap();
        assert_eq!(p.san, "https://kubernetes.io/namespaces/build/serviceaccounts/signer");
        let err = principal(&IssuerKind::Kubernetes, json!({"sub": "system:serviceaccount:build:signer"})).unwrap_err();
        assert!(matches!(err, TokenError::MissingClaim(_)), "{err}");
    }

    #[test]
    fn email_verification_and_chainguard() {
        let kind = IssuerKind::Email { skip_email_verification: false };
        assert_eq!(principal(&kind, json!({"sub": "1", "email": "a@example.com"})).unwrap_err(), TokenError::EmailNotVerified);
        let trusting = IssuerKind::Email { skip_email_verification: true };
        assert_eq!(principal(&trusting, json!({"sub": "1", "email": "a@example.com"})).unwrap().san, "a@example.com");
        assert_eq!(principal(&IssuerKind::Chainguard, json!({"sub": "abc/def"})).unwrap().san, "https://issuer.example.com/abc/def");
    }
}
