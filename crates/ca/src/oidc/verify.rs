//! Verifying OIDC identity tokens, as Fulcio does before it issues a certificate.
//!
//! A token is accepted only if its issuer is configured, its algorithm is one of RS256,
//! ES256, ES384 or PS256 and matches the key, its signature verifies under a key of that
//! issuer's set, its audience matches, and it is within its validity (with 60 s of skew).
//! An unknown key ID triggers one refresh of the issuer's key set before the token is
//! refused, so issuers can rotate keys. Sources that go over the network are wrapped in
//! [`super::refresh::rate_limited`], so that such refreshes cannot be forced at will.

use std::collections::HashMap;
use std::sync::Arc;

use jsonwebtoken::{Algorithm, Validation};
use parking_lot::{Mutex, RwLock};
use serde_json::Value;

use super::jwks::KeySet;

/// Which claim names the identity, and how it is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubjectKind {
    /// `email`, which must come with `email_verified: true`.
    Email,
    /// `sub` is a URI: CI workflow identities such as GitHub Actions'.
    Uri,
    /// `sub` is a SPIFFE ID (`spiffe://...`).
    Spiffe,
    /// A GitHub Actions token: the SAN is the workflow's URI (from `job_workflow_ref`), and
    /// the certificate carries Fulcio's CI extensions ([`crate::ci`]).
    GithubWorkflow,
}

/// Fetches a fresh key set for an issuer (OIDC discovery, a file, or the dev issuer).
pub type KeySource = Arc<dyn Fn() -> Result<KeySet, String> + Send + Sync>;

#[derive(Clone)]
pub struct IssuerConfig {
    pub issuer: String,
    pub audience: String,
    pub subject: SubjectKind,
    pub keys: KeySource,
}

/// Who a verified token says the caller is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub issuer: String,
    /// The email, URI or SPIFFE ID that goes into the certificate's SAN.
    pub subject: String,
    pub kind: SubjectKind,
    /// Every claim, for the CI extensions of the certificate.
    pub claims: serde_json::Map<String, Value>,
}

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
    BadSubject(String, &'static str),
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
        }
    }
}

struct Issuer {
    config: IssuerConfig,
    keys: RwLock<Option<KeySet>>,
}

/// Verifies tokens against a fixed set of issuers.
pub struct TokenVerifier {
    issuers: HashMap<String, Issuer>,
    leeway_secs: u64,
    /// Tokens already verified, by SHA-256 of the whole token (signature included), until
    /// they expire. CI jobs sign many artifacts with one token; each signature check costs
    /// as much as the rest of certificate issuance.
    verified: Mutex<HashMap<[u8; 32], (Identity, u64)>>,
}

/// At most this many verified tokens are remembered.
const CACHE_LIMIT: usize = 10_000;

fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

const ACCEPTED: [Algorithm; 4] = [Algorithm::RS256, Algorithm::ES256, Algorithm::ES384, Algorithm::PS256];

impl TokenVerifier {
    pub fn new(configs: impl IntoIterator<Item = IssuerConfig>) -> TokenVerifier {
        let issuers = configs
            .into_iter()
            .map(|c| (c.issuer.clone(), Issuer { config: c, keys: RwLock::new(None) }))
            .collect();
        TokenVerifier { issuers, leeway_secs: 60, verified: Mutex::new(HashMap::new()) }
    }

    pub fn issuers(&self) -> impl Iterator<Item = &str> {
        self.issuers.keys().map(String::as_str)
    }

    pub fn verify(&self, token: &str) -> Result<Identity, TokenError> {
        let digest = signet_core::hash::sha256(token.as_bytes());
        let now = now_secs();
        if let Some((identity, exp)) = self.verified.lock().get(&digest) {
            // Expiry is checked exactly, without leeway, once a token is cached.
            if now < *exp {
                return Ok(identity.clone());
            }
        }
        let identity = self.verify_uncached(token)?;
        if let Some(exp) = identity.claims.get("exp").and_then(Value::as_u64) {
            let mut cache = self.verified.lock();
            if cache.len() >= CACHE_LIMIT {
                cache.retain(|_, (_, e)| *e > now);
                if cache.len() >= CACHE_LIMIT {
                    cache.clear();
                }
            }
            cache.insert(digest, (identity.clone(), exp));
        }
        Ok(identity)
    }

    fn verify_uncached(&self, token: &str) -> Result<Identity, TokenError> {
        let header = jsonwebtoken::decode_header(token).map_err(|e| TokenError::Malformed(e.to_string()))?;
        if !ACCEPTED.contains(&header.alg) {
            return Err(TokenError::Algorithm(format!("{:?}", header.alg)));
        }
        let issuer_url = unverified_issuer(token)?;
        let issuer = self.issuers.get(&issuer_url).ok_or(TokenError::UnknownIssuer(issuer_url))?;
        let kid = header.kid.as_deref();

        let key = match issuer.lookup(kid) {
            Some(k) => k,
            None => {
                issuer.refresh()?;
                issuer.lookup(kid).ok_or_else(|| TokenError::UnknownKey(kid.unwrap_or("<none>").to_string()))?
            }
        };
        let (decoding, jwk) = key;
        if let Some(alg) = jwk.common.key_algorithm {
            if format!("{alg:?}") != format!("{:?}", header.alg) {
                return Err(TokenError::Algorithm(format!("{:?} (the key is for {alg:?})", header.alg)));
            }
        }

        let mut validation = Validation::new(header.alg);
        validation.set_audience(&[&issuer.config.audience]);
        validation.set_issuer(&[&issuer.config.issuer]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.leeway = self.leeway_secs;
        validation.validate_nbf = true;
        let data = jsonwebtoken::decode::<serde_json::Map<String, Value>>(token, &decoding, &validation).map_err(|e| {
            use jsonwebtoken::errors::ErrorKind::*;
            match e.kind() {
                InvalidSignature => TokenError::BadSignature,
                ExpiredSignature => TokenError::Expired,
                ImmatureSignature => TokenError::NotYetValid,
                InvalidAudience => TokenError::WrongAudience(issuer.config.audience.clone()),
                MissingRequiredClaim(c) => TokenError::Malformed(format!("missing required claim {c}")),
                InvalidAlgorithm => TokenError::Algorithm(format!("{:?}", header.alg)),
                other => TokenError::Malformed(format!("{other:?}")),
            }
        })?;
        identity(&issuer.config, data.claims)
    }
}

impl Issuer {
    fn lookup(&self, kid: Option<&str>) -> Option<(jsonwebtoken::DecodingKey, jsonwebtoken::jwk::Jwk)> {
        let keys = self.keys.read();
        keys.as_ref()?.find(kid).map(|(k, j)| (k.clone(), j.clone()))
    }

    fn refresh(&self) -> Result<(), TokenError> {
        let fresh = (self.config.keys)().map_err(TokenError::KeysUnavailable)?;
        *self.keys.write() = Some(fresh);
        Ok(())
    }
}

/// The `iss` claim, read before verification only to pick the issuer's keys.
fn unverified_issuer(token: &str) -> Result<String, TokenError> {
    use base64::Engine;
    let payload = token.split('.').nth(1).ok_or_else(|| TokenError::Malformed("not a JWS compact token".into()))?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|_| TokenError::Malformed("payload is not base64url".into()))?;
    let claims: Value = serde_json::from_slice(&bytes).map_err(|_| TokenError::Malformed("payload is not JSON".into()))?;
    claims
        .get("iss")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or(TokenError::MissingClaim("iss"))
}

fn identity(config: &IssuerConfig, claims: serde_json::Map<String, Value>) -> Result<Identity, TokenError> {
    let sub = claims.get("sub").and_then(Value::as_str).ok_or(TokenError::MissingClaim("sub"))?.to_string();
    let subject = match config.subject {
        SubjectKind::Email => {
            let email = claims.get("email").and_then(Value::as_str).ok_or(TokenError::MissingClaim("email"))?;
            if claims.get("email_verified") != Some(&Value::Bool(true)) {
                return Err(TokenError::EmailNotVerified);
            }
            if !email.contains('@') {
                return Err(TokenError::BadSubject(email.to_string(), "email address"));
            }
            email.to_string()
        }
        SubjectKind::Uri => {
            if !sub.contains("://") {
                return Err(TokenError::BadSubject(sub, "URI"));
            }
            sub
        }
        SubjectKind::Spiffe => {
            if !sub.starts_with("spiffe://") {
                return Err(TokenError::BadSubject(sub, "SPIFFE ID"));
            }
            sub
        }
        SubjectKind::GithubWorkflow => crate::ci::github_subject(&claims).ok_or(TokenError::MissingClaim("job_workflow_ref"))?,
    };
    Ok(Identity { issuer: config.issuer.clone(), subject, kind: config.subject, claims })
}
