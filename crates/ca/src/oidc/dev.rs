//! The development OIDC issuer: `serve --dev` trusts it, `signet dev-token` mints from it.
//!
//! Its ES256 key lives in the data dir (`keys/dev-oidc.pem`, 0600). Its issuer URL is
//! `<public URL>/oidc`, written to `oidc-issuer` in the data dir at startup so that
//! `dev-token` can mint tokens for the running instance without being told the URL. It is
//! never trusted outside `--dev`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;
use signet_keys::{self as keys, KeyError, Signer};

use super::jwks::KeySet;
use super::kind::IssuerKind;
use super::verify::IssuerConfig;

pub const AUDIENCE: &str = "sigstore";

pub struct DevIssuer {
    issuer: String,
    encoding: EncodingKey,
    kid: String,
    jwks: serde_json::Value,
}

#[derive(Debug, thiserror::Error)]
pub enum DevIssuerError {
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error("dev issuer key is unusable: {0}")]
    Encoding(String),
    #[error("{path}: {why}")]
    File { path: String, why: String },
    #[error("minting a token failed: {0}")]
    Mint(String),
}

pub fn key_path(data_dir: &Path) -> PathBuf {
    data_dir.join("keys").join("dev-oidc.pem")
}

pub fn issuer_file(data_dir: &Path) -> PathBuf {
    data_dir.join("oidc-issuer")
}

impl DevIssuer {
    /// Loads (or creates) the issuer's key under `data_dir`.
    pub fn open(data_dir: &Path, issuer: &str) -> Result<DevIssuer, DevIssuerError> {
        let path = key_path(data_dir);
        if let Some(dir) = path.parent() {
            signet_core::files::ensure_private_dir(dir)
                .map_err(|e| DevIssuerError::File { path: dir.display().to_string(), why: e.to_string() })?;
        }
        let pkcs8 = keys::file::load_or_generate_pkcs8(&path, signet_keys::Algorithm::EcdsaP256Sha256)?;
        let signing = Signer::from_pkcs8(&pkcs8, &path.display().to_string(), &[signet_keys::Algorithm::EcdsaP256Sha256])?;
        let encoding = EncodingKey::from_ec_der(&pkcs8);
        // An uncompressed P-256 point is the last 65 bytes of its SPKI: 0x04 ‖ x ‖ y.
        let spki = signing.spki_der();
        let point = &spki[spki.len() - 65..];
        let kid = hex::encode(&signing.key_id()[..8]);
        let b64url = |b: &[u8]| {
            use base64::Engine;
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
        };
        let jwks = json!({"keys": [{
            "kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": kid,
            "x": b64url(&point[1..33]), "y": b64url(&point[33..]),
        }]});
        Ok(DevIssuer { issuer: issuer.trim_end_matches('/').to_string(), encoding, kid, jwks })
    }

    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The JWKS document served at `<issuer>/jwks`.
    pub fn jwks(&self) -> &serde_json::Value {
        &self.jwks
    }

    /// The discovery document served at `<issuer>/.well-known/openid-configuration`.
    pub fn discovery(&self) -> serde_json::Value {
        json!({
            "issuer": self.issuer,
            "jwks_uri": format!("{}/jwks", self.issuer),
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"],
            "scopes_supported": ["openid", "email"],
            "claims_supported": ["iss", "sub", "aud", "exp", "iat", "email", "email_verified"],
        })
    }

    /// A token for `email`, valid for `ttl_secs`, in the shape public issuers use.
    pub fn mint(&self, email: &str, ttl_secs: u64) -> Result<String, DevIssuerError> {
        self.mint_claims(email, json!({"email": email, "email_verified": true}), ttl_secs)
    }

    /// A token for `sub` with `extra` claims (e.g. a CI provider's), for tests and demos.
    pub fn mint_claims(&self, sub: &str, extra: serde_json::Value, ttl_secs: u64) -> Result<String, DevIssuerError> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        let mut claims = json!({"iss": self.issuer, "sub": sub, "aud": AUDIENCE, "iat": now, "nbf": now, "exp": now + ttl_secs});
        if let (Some(c), Some(e)) = (claims.as_object_mut(), extra.as_object()) {
            c.extend(e.clone());
        }
        jsonwebtoken::encode(&header, &claims, &self.encoding).map_err(|e| DevIssuerError::Mint(e.to_string()))
    }

    /// How the verifier trusts this issuer: email subjects, audience `sigstore`, its own keys.
    pub fn config(self: &Arc<Self>) -> IssuerConfig {
        let me = self.clone();
        IssuerConfig {
            issuer: self.issuer.clone(),
            audience: AUDIENCE.to_string(),
            kind: IssuerKind::Email { skip_email_verification: false },
            keys: Arc::new(move || Ok(KeySet::from_json(&me.jwks.to_string())?)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{error::TokenError, verify::TokenVerifier};
    use super::*;

    fn verifier(dev: &Arc<DevIssuer>) -> TokenVerifier {
        TokenVerifier::new([dev.config()])
    }

    #[test]
    fn minted_tokens_verify_and_carry_the_email() {
        let dir = tempfile::tempdir().unwrap();
        let dev = Arc::new(DevIssuer::open(dir.path(), "http://127.0.0.1:8080/oidc").unwrap());
        let token = dev.mint("alice@example.com", 300).unwrap();
        let v = verifier(&dev);
        let id = v.verify(&token).unwrap();
        assert_eq!(id.subject, "alice@example.com");
        assert_eq!(v.verify(&token).unwrap(), id, "a cached token gives the same identity");
        // A cached token's identity does not leak to a token that differs only in its signature.
        let mut forged = token.clone();
        forged.truncate(forged.len() - 4);
        forged.push_str("AAAA");
        assert!(v.verify(&forged).is_err());
        assert_eq!(id.issuer, "http://127.0.0.1:8080/oidc");
        // The key persists: a second open verifies the first one's tokens.
        let again = Arc::new(DevIssuer::open(dir.path(), "http://127.0.0.1:8080/oidc").unwrap());
        assert!(verifier(&again).verify(&token).is_ok());
    }

    #[test]
    fn meta_issuers_get_keys_per_url_and_a_bounded_number_of_new_urls() {
        use super::super::kind::IssuerKind;
        use super::super::meta::MetaPattern;
        use super::super::verify::MetaIssuerConfig;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let dir = tempfile::tempdir().unwrap();
        let made = Arc::new(AtomicUsize::new(0));
        let keys_dir = dir.path().to_path_buf();
        let counter = made.clone();
        let meta = MetaIssuerConfig {
            pattern: MetaPattern::new("https://oidc.example.com/id/*").unwrap(),
            audience: AUDIENCE.into(),
            kind: IssuerKind::Email { skip_email_verification: false },
            keys: Arc::new(move |url: &str| {
                counter.fetch_add(1, Ordering::SeqCst);
                Arc::new(DevIssuer::open(&keys_dir, url).unwrap()).config().keys
            }),
        };
        let v = TokenVerifier::with_meta([], [meta]);
        let mint = |id: usize| {
            let dev = DevIssuer::open(dir.path(), &format!("https://oidc.example.com/id/c{id}")).unwrap();
            dev.mint_claims("s", serde_json::json!({"email": "a@example.com", "email_verified": true}), 300).unwrap()
        };
        let first = v.verify(&mint(0)).unwrap();
        assert_eq!(first.issuer, "https://oidc.example.com/id/c0");
        assert_eq!(v.verify(&mint(0)).unwrap(), first);
        assert_eq!(made.load(Ordering::SeqCst), 1, "one key source per URL");
        let outside = DevIssuer::open(dir.path(), "https://oidc.example.com/id/c1/x").unwrap();
        let token = outside.mint_claims("s", serde_json::json!({"email": "a@example.com", "email_verified": true}), 300).unwrap();
        assert!(matches!(v.verify(&token), Err(TokenError::UnknownIssuer(_))));
        for id in 1..30 {
            v.verify(&mint(id)).unwrap();
        }
        // The 31st new URL within a minute waits.
        let err = v.verify(&mint(30)).unwrap_err();
        assert!(matches!(&err, TokenError::KeysUnavailable(why) if why.to_string().contains("in the last minute")), "{err}");
        assert!(v.verify(&mint(3)).is_ok(), "URLs already taken up are not limited");
    }

    fn forge(dev: &DevIssuer, header: serde_json::Value, claims: serde_json::Value) -> String {
        use base64::Engine;
        let e = |v: &serde_json::Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        let _ = dev;
        format!("{}.{}.", e(&header), e(&claims))
    }

    #[test]
    fn refuses_each_kind_of_bad_token() {
        let dir = tempfile::tempdir().unwrap();
        let dev = Arc::new(DevIssuer::open(dir.path(), "http://dev/oidc").unwrap());
        let other = Arc::new(DevIssuer::open(&dir.path().join("other"), "http://dev/oidc").unwrap());
        let v = verifier(&dev);
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        let sign = |claims: serde_json::Value, issuer: &DevIssuer| {
            let mut h = Header::new(Algorithm::ES256);
            h.kid = Some(issuer.kid.clone());
            jsonwebtoken::encode(&h, &claims, &issuer.encoding).unwrap()
        };
        let base = json!({"iss": "http://dev/oidc", "sub": "a@b.c", "aud": "sigstore", "exp": now + 300,
                          "email": "a@b.c", "email_verified": true});
        let with = |k: &str, val: serde_json::Value| {
            let mut c = base.clone();
            c[k] = val;
            c
        };
        // A key set holding the dev key under a different kid: the token's kid is then unknown.
        let mut wrong_kid = Header::new(Algorithm::ES256);
        wrong_kid.kid = Some("nope".into());
        let unknown_kid = jsonwebtoken::encode(&wrong_kid, &base, &dev.encoding).unwrap();
        let cases: Vec<(&str, String, TokenError)> = vec![
            ("expired", sign(with("exp", json!(now - 3600)), &dev), TokenError::Expired),
            ("not yet valid", sign(with("nbf", json!(now + 3600)), &dev), TokenError::NotYetValid),
            ("wrong audience", sign(with("aud", json!("other")), &dev), TokenError::WrongAudience("sigstore".into())),
            ("wrong issuer", sign(with("iss", json!("http://evil/")), &dev), TokenError::UnknownIssuer("http://evil/".into())),
            ("bad signature", { let mut h = Header::new(Algorithm::ES256); h.kid = Some(dev.kid.clone()); jsonwebtoken::encode(&h, &base, &other.encoding).unwrap() }, TokenError::BadSignature),
            ("alg none", forge(&dev, json!({"alg": "none", "typ": "JWT"}), base.clone()), TokenError::Malformed(String::new())),
            ("unknown kid", unknown_kid, TokenError::UnknownKey("nope".into())),
            ("unverified email", sign(with("email_verified", json!(false)), &dev), TokenError::EmailNotVerified),
            ("no email", sign({ let mut c = base.clone(); c.as_object_mut().unwrap().remove("email"); c }, &dev), TokenError::MissingClaim("email")),
            ("garbage", "a.b.c".to_string(), TokenError::Malformed(String::new())),
        ];
        for (name, token, want) in cases {
            let got = v.verify(&token).unwrap_err();
            match (&got, &want) {
                (TokenError::Malformed(_), TokenError::Malformed(_)) | (TokenError::Algorithm(_), TokenError::Malformed(_)) => {}
                _ => assert_eq!(got, want, "{name}"),
            }
        }
    }
}
