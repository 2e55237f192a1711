//! Why an identity token was refused: each reason a message for the client and a stable name for
//! metrics.

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
    KeysUnavailable(String),
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
    BadSubject(String, String),
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
