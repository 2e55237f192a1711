//! JSON Web Key Sets: parsing, and lookup by key ID.

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::DecodingKey;

/// The verification keys of one issuer.
#[derive(Clone)]
pub struct KeySet {
    keys: Vec<(Option<String>, DecodingKey, Jwk)>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwksError {
    #[error("JWKS is not valid JSON: {0}")]
    Json(String),
    #[error("JWKS key {kid:?} is unusable: {why}")]
    Key { kid: Option<String>, why: String },
}

impl KeySet {
    pub fn from_json(text: &str) -> Result<KeySet, JwksError> {
        let set: JwkSet = serde_json::from_str(text).map_err(|e| JwksError::Json(e.to_string()))?;
        let mut keys = Vec::with_capacity(set.keys.len());
        for jwk in set.keys {
            let kid = jwk.common.key_id.clone();
            let key = DecodingKey::from_jwk(&jwk).map_err(|e| JwksError::Key { kid: kid.clone(), why: e.to_string() })?;
            keys.push((kid, key, jwk));
        }
        Ok(KeySet { keys })
    }

    /// The key with `kid`, or the only key when the token names none.
    pub fn find(&self, kid: Option<&str>) -> Option<(&DecodingKey, &Jwk)> {
        match kid {
            Some(kid) => self.keys.iter().find(|(k, _, _)| k.as_deref() == Some(kid)),
            None if self.keys.len() == 1 => self.keys.first(),
            None => None,
        }
        .map(|(_, key, jwk)| (key, jwk))
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}
