//! Why an identity token was refused: each reason a message for the client and a stable name for
//! metrics. And why an issuer as configured cannot be used, or gave no keys.

use super::jwks::JwksError;
use crate::ci::CiConfigError;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("identity token is malformed: {0}")]
    Malformed(String),
    #[error("identity token algorithm {0} is not accepted; expected RS256, ES256, ES384 or PS256")]
    Algorithm(String),
    #[error("identity token issuer {0:?} is not a configured OIDC issuer")]
    UnknownIssuer(String),
    #[error("identity token key ID {0:?} is not in the issuer's current key set")]
    UnknownKey(String),
    #[error("the issuer's key set could not be fetched: {0}")]
    KeysUnavailable(#[source] KeySetError),
    #[error("identity token signature does not verify")]
    BadSignature,
    #[error("identity token has expired")]
    Expired,
    #[error("identity token is not valid yet (nbf is in the future)")]
    NotYetValid,
    #[error("identity token audience is not {0:?}")]
    WrongAudience(String),
    #[error("identity token lacks the {0} claim")]
    MissingClaim(&'static str),
    #[error("identity token's email is not verified (email_verified must be true)")]
    EmailNotVerified,
    #[error("identity token subject {0:?} is not a {1}")]
    BadSubject(String, SubjectShape),
    #[error("identity token lacks the claim {1:?}, which the {0} provider's templates need and give no default for")]
    CiClaim(String, String),
}

impl TokenError {
    /// A stable name for metrics labels.
    pub fn reason(&self) -> &'static str {
        match self {
            TokenError::Malformed(_) => "token_malformed",
            TokenError::Algorithm(_) => "token_algorithm",
            TokenError::UnknownIssuer(_) => "token_unknown_issuer",
            TokenError::UnknownKey(_) => "token_unknown_key",
            TokenError::KeysUnavailable(_) => "token_keys_unavailable",
            TokenError::BadSignature => "token_bad_signature",
            TokenError::Expired => "token_expired",
            TokenError::NotYetValid => "token_not_yet_valid",
            TokenError::WrongAudience(_) => "token_wrong_audience",
            TokenError::MissingClaim(_) => "token_missing_claim",
            TokenError::EmailNotVerified => "token_email_not_verified",
            TokenError::BadSubject(..) => "token_bad_subject",
            TokenError::CiClaim(..) => "token_missing_claim",
        }
    }
}

/// What a token's subject must be and is not, for [`TokenError::BadSubject`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SubjectShape {
    Email,
    Uri,
    UriNotEmail,
    /// A URI on this domain, the one the issuer is bound to.
    UriOn(String),
    SpiffeId,
    SpiffeTrustDomain,
    SpiffePath,
    /// A SPIFFE ID with a path in this trust domain.
    SpiffeIn(String),
    UserName,
    UserNameNotEmail,
}

impl std::fmt::Display for SubjectShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SubjectShape::Email => f.write_str("email address"),
            SubjectShape::Uri => f.write_str("URI (scheme://host/…)"),
            SubjectShape::UriNotEmail => f.write_str("URI, not an email address"),
            SubjectShape::UriOn(domain) => write!(f, "URI on {domain}, the domain this issuer is bound to"),
            SubjectShape::SpiffeId => f.write_str("SPIFFE ID (spiffe://trust-domain/path)"),
            SubjectShape::SpiffeTrustDomain => f.write_str("SPIFFE ID whose trust domain is lower-case letters, digits, '.', '-' and '_'"),
            SubjectShape::SpiffePath => {
                f.write_str("SPIFFE ID whose path segments are letters, digits, '.', '-' and '_', none empty, '.' or '..'")
            }
            SubjectShape::SpiffeIn(domain) => write!(f, "SPIFFE ID with a path in the trust domain {domain}"),
            SubjectShape::UserName => f.write_str("user name without '!'"),
            SubjectShape::UserNameNotEmail => f.write_str("user name, not an email address"),
        }
    }
}

/// Why an issuer's key source gave no key set: its tokens are refused until one does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeySetError {
    #[error(transparent)]
    Jwks(#[from] JwksError),
    /// A key set from `from` (a file, a URL) that is not a usable JWKS.
    #[error("{from}: {source}")]
    JwksFrom { from: String, source: JwksError },
    /// The source could not get one: a file that cannot be read, an OIDC discovery that
    /// failed. The source is the caller's, and this is its account of the failure.
    #[error("{why}")]
    Fetch { why: String },
    /// More new issuers matched meta-issuer patterns in the last minute than are taken up.
    #[error("{url} matches {pattern}, but {limit} new issuers were taken up from meta-issuer patterns in the last minute; try again in a minute")]
    NewIssuers { url: String, pattern: String, limit: u32 },
}

/// Why an issuer, as configured (signet's TOML or a Fulcio config), cannot be used. Each
/// says what is wrong and what to write.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IssuerError {
    /// An issuer of type `kind` lacks setting `key`.
    #[error("a {kind} issuer needs {key} (for example {example})")]
    Needs { kind: String, key: &'static str, example: &'static str },
    #[error("a ci-provider issuer needs ci_provider (for example \"gitlab-pipeline\")")]
    NoCiProvider,
    #[error("type {0:?} is not an issuer type; expected {types}", types = super::spec::TYPES)]
    UnknownType(String),
    #[error("skip_email_verification applies only to email issuers")]
    SkipEmailVerification,
    #[error("ci_provider applies only to ci-provider issuers, not {0}")]
    CiProviderOnly(String),
    #[error("ci_defaults apply only to CI provider issuers, not {0}")]
    CiDefaultsOnly(String),
    #[error("ci provider {0:?} is neither defined in the config nor one of {names}", names = crate::ci::providers::NAMES.join(", "))]
    UnknownCiProvider(String),
    #[error(transparent)]
    CiProvider(#[from] CiConfigError),
    #[error("subject_domain {0:?} must be a URL with a scheme, such as https://example.com")]
    SubjectDomainUrl(String),
    #[error("subject_domain {0:?} and the issuer's URL must have the same scheme")]
    SubjectDomainScheme(String),
    #[error("subject_domain {0:?} of a username issuer is a host name, without a scheme")]
    SubjectDomainHost(String),
    #[error("a username issuer needs subject_domain (the host name after the `!`)")]
    NoSubjectDomain,
    #[error("trust_domain {0:?} is not a SPIFFE trust domain (lower-case letters, digits, '.', '-', '_')")]
    TrustDomain(String),
    /// Fulcio's rule: a subject domain shares the issuer's host or its last two labels.
    #[error(
        "the subject domain {subject} is not in the issuer's domain {issuer}: an issuer may only vouch for names under its own second-level domain"
    )]
    ForeignDomain { subject: String, issuer: String },
    #[error("{0:?} has no `*`; it is a plain issuer URL")]
    NotAPattern(String),
    #[error("{0:?}: two stars side by side match nothing more than one")]
    DoubleStar(String),
    #[error("{0:?} must start with https://")]
    PatternScheme(String),
    #[error("{0:?}: a star may not stand for the whole host or its registrable domain")]
    StarHost(String),
    /// A Fulcio config lists an issuer under another URL than its own.
    #[error("its IssuerURL differs from the key it is listed under ({0})")]
    UrlDiffers(String),
    #[error("a meta-issuer's URL needs a `*`")]
    MetaNeedsStar,
    #[error("a `*` belongs under MetaIssuers")]
    StarNotMeta,
    #[error(
        "IssuerClaim ({0}) is not supported: signet writes the token's own `iss` into the certificate; list the upstream issuers themselves"
    )]
    IssuerClaim(String),
    #[error("ChallengeClaim {claim:?} is not supported: signet checks the proof of possession against `{checked}` for this type")]
    ChallengeClaim { claim: String, checked: &'static str },
}
