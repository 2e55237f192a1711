//! What the store keeps, as the SQLite and PostgreSQL stores both read and write it: tokens (never
//! their secrets), bans, and token scopes as JSON columns.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::client::ClientKey;
use crate::error::StoreError;
use crate::roles::Role;
use crate::scope::TokenScope;
use crate::token::TokenId;

/// A stored token: everything but the secret, which is never stored.
#[derive(Debug, Clone, Serialize)]
pub struct TokenRecord {
    #[serde(serialize_with = "display")]
    pub id: TokenId,
    pub name: String,
    #[serde(serialize_with = "display")]
    pub role: Role,
    #[serde(skip)]
    pub hash: [u8; 32],
    /// Where it may be used (every list empty: wherever its role reaches).
    #[serde(serialize_with = "shared")]
    pub scope: Arc<TokenScope>,
    pub created: u64,
    /// Unix seconds after which the token is refused; `None`: never.
    pub expires: Option<u64>,
    /// Unix seconds at which it was revoked.
    pub revoked: Option<u64>,
}

impl TokenRecord {
    pub fn usable_at(&self, now: u64) -> bool {
        self.revoked.is_none() && self.expires.is_none_or(|e| now < e)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct BanRecord {
    #[serde(serialize_with = "display")]
    pub client: ClientKey,
    pub reason: String,
    pub since: u64,
    pub until: u64,
}

fn shared<T: Serialize, S: serde::Serializer>(v: &Arc<T>, s: S) -> Result<S::Ok, S::Error> {
    v.as_ref().serialize(s)
}

fn display<T: std::fmt::Display, S: serde::Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// A scope as stored: JSON, or NULL for none.
pub(crate) fn scope_column(scope: &TokenScope) -> Option<String> {
    (!scope.is_unlimited()).then(|| serde_json::to_string(scope).unwrap_or_default())
}

/// A stored scope, of token `token` in the store at `path`. One that does not parse makes the
/// store corrupt rather than the token unlimited.
pub(crate) fn parse_scope(path: &str, token: &str, stored: Option<&str>) -> Result<Arc<TokenScope>, StoreError> {
    match stored {
        None => Ok(Arc::default()),
        Some(text) => serde_json::from_str(text).map(Arc::new).map_err(|source| StoreError::CorruptScope {
            path: path.to_string(),
            token: token.to_string(),
            scope: text.to_string(),
            source,
        }),
    }
}

pub fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
