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

use super::error::{KeySetError, TokenError};
use super::jwks::KeySet;
use super::kind::{IssuerKind, SanKind};
use super::meta::MetaPattern;
use crate::ci::CiExtension;

/// Fetches a fresh key set for an issuer (OIDC discovery, a file, or the dev issuer).
pub type KeySource = Arc<dyn Fn() -> Result<KeySet, KeySetError> + Send + Sync>;

/// Makes the key source of one concrete issuer that a meta-issuer pattern matched.
pub type KeySourceFor = Arc<dyn Fn(&str) -> KeySource + Send + Sync>;

#[derive(Clone)]
pub struct IssuerConfig {
    pub issuer: String,
    pub audience: String,
    pub kind: IssuerKind,
    pub keys: KeySource,
}

/// A family of issuers ([`super::meta`]), each of which gets its own key source.
#[derive(Clone)]
pub struct MetaIssuerConfig {
    pub pattern: MetaPattern,
    pub audience: String,
    pub kind: IssuerKind,
    pub keys: KeySourceFor,
}

/// Who a verified token says the caller is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub issuer: String,
    /// The email, URI or `user!domain` that goes into the certificate's SAN.
    pub subject: String,
    pub kind: SanKind,
    /// The token's `sub` claim, which every certificate carries (extension 1.24).
    pub token_subject: String,
    /// The CI provider's extensions, if the issuer is one.
    pub extensions: Vec<CiExtension>,
    /// Every claim.
    pub claims: serde_json::Map<String, Value>,
}


struct Issuer {
    config: IssuerConfig,
    keys: RwLock<Option<KeySet>>,
}

/// Verifies tokens against a fixed set of issuers and meta-issuer patterns.
pub struct TokenVerifier {
    issuers: HashMap<String, Arc<Issuer>>,
    meta: Vec<MetaIssuerConfig>,
    /// The concrete issuers that meta patterns have matched so far, each with its own keys.
    matched: Mutex<HashMap<String, Arc<Issuer>>>,
    /// When the current minute of new meta-matched issuers began, and how many it has had.
    new_matches: Mutex<(std::time::Instant, u32)>,
    leeway_secs: u64,
    /// Tokens already verified, by SHA-256 of the whole token (signature included), until
    /// they expire. CI jobs sign many artifacts with one token; each signature check costs
    /// as much as the rest of certificate issuance.
    verified: Mutex<HashMap<[u8; 32], (Identity, u64)>>,
}

/// At most this many verified tokens are remembered.
const CACHE_LIMIT: usize = 10_000;

/// At most this many concrete issuers are kept for meta patterns; past it they are all
/// forgotten (their keys are fetched again when next needed).
const MATCHED_LIMIT: usize = 1_000;

/// At most this many new issuer URLs are taken up from meta patterns per minute. Each one
/// costs a key fetch from a host that the token names, so an unauthenticated caller could
/// otherwise make signet fetch from as many hosts as it can invent.
const NEW_MATCHES_PER_MINUTE: u32 = 30;

fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

const ACCEPTED: [Algorithm; 4] = [Algorithm::RS256, Algorithm::ES256, Algorithm::ES384, Algorithm::PS256];

impl TokenVerifier {
    pub fn new(configs: impl IntoIterator<Item = IssuerConfig>) -> TokenVerifier {
        TokenVerifier::with_meta(configs, [])
    }

    pub fn with_meta(configs: impl IntoIterator<Item = IssuerConfig>, meta: impl IntoIterator<Item = MetaIssuerConfig>) -> TokenVerifier {
        let issuers = configs
            .into_iter()
            .map(|c| (c.issuer.clone(), Arc::new(Issuer { config: c, keys: RwLock::new(None) })))
            .collect();
        TokenVerifier {
            issuers,
            meta: meta.into_iter().collect(),
            matched: Mutex::new(HashMap::new()),
            new_matches: Mutex::new((std::time::Instant::now(), 0)),
            leeway_secs: 60,
            verified: Mutex::new(HashMap::new()),
        }
    }

    /// Every configured issuer, in URL order: (URL, audience, kind).
    pub fn issuers(&self) -> Vec<(&str, &str, &IssuerKind)> {
        let mut out: Vec<_> = self.issuers.values().map(|i| (i.config.issuer.as_str(), i.config.audience.as_str(), &i.config.kind)).collect();
        out.sort_by_key(|(url, _, _)| *url);
        out
    }

    /// Every meta-issuer pattern: (pattern, audience, kind).
    pub fn meta_issuers(&self) -> impl Iterator<Item = (&str, &str, &IssuerKind)> {
        self.meta.iter().map(|m| (m.pattern.as_str(), m.audience.as_str(), &m.kind))
    }

    /// The issuer for `url`: a configured one, or one a meta pattern matches.
    fn issuer(&self, url: &str) -> Result<Arc<Issuer>, TokenError> {
        if let Some(issuer) = self.issuers.get(url) {
            return Ok(issuer.clone());
        }
        let meta = self.meta.iter().find(|m| m.pattern.matches(url)).ok_or_else(|| TokenError::UnknownIssuer(url.to_string()))?;
        let mut matched = self.matched.lock();
        if let Some(issuer) = matched.get(url) {
            return Ok(issuer.clone());
        }
        {
            let mut window = self.new_matches.lock();
            if window.0.elapsed() >= std::time::Duration::from_secs(60) {
                *window = (std::time::Instant::now(), 0);
            }
            if window.1 >= NEW_MATCHES_PER_MINUTE {
                return Err(TokenError::KeysUnavailable(KeySetError::NewIssuers {
                    url: url.to_string(),
                    pattern: meta.pattern.as_str().to_string(),
                    limit: NEW_MATCHES_PER_MINUTE,
                }));
            }
            window.1 += 1;
        }
        if matched.len() >= MATCHED_LIMIT {
            matched.clear();
        }
        let config = IssuerConfig { issuer: url.to_string(), audience: meta.audience.clone(), kind: meta.kind.clone(), keys: (meta.keys)(url) };
        let issuer = Arc::new(Issuer { config, keys: RwLock::new(None) });
        matched.insert(url.to_string(), issuer.clone());
        Ok(issuer)
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
        let issuer = self.issuer(&issuer_url)?;
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
    let principal = config.kind.principal(&config.issuer, &claims)?;
    let token_subject = claims.get("sub").and_then(Value::as_str).ok_or(TokenError::MissingClaim("sub"))?.to_string();
    Ok(Identity {
        issuer: config.issuer.clone(),
        subject: principal.san,
        kind: principal.san_kind,
        token_subject,
        extensions: principal.extensions,
        claims,
    })
}
