//! What the guard's store (tokens and bans, on SQLite or PostgreSQL) can fail with, why
//! `[guard]` cannot be used as written, and why a permission, a role or a token scope is not
//! one the guard takes.
//!
//! Below every module that returns these: it names only leaves (the small errors of
//! [`crate::client`], [`crate::permission`] and [`crate::redis_client`], and the log names of
//! [`crate::logs`]), never a module that returns what is here.

use crate::client::ClientError;
use crate::logs::LOGS;
use crate::permission::UnknownPermission;
use crate::redis_client::RedisClientError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("guard store {path}: {source}")]
    Sqlite { path: String, source: rusqlite::Error },
    #[error("guard store {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("guard store {path}: {what}")]
    Corrupt { path: String, what: String },
    /// A stored scope that does not parse: the store is corrupt, the token never unlimited.
    #[error("guard store {path}: token {token}: scope {scope:?} does not parse: {source}")]
    CorruptScope { path: String, token: String, scope: String, source: serde_json::Error },
    #[error("a token named {0:?} already exists; pick another --name or revoke it first")]
    NameTaken(String),
    #[error("no token named or with id {0:?}")]
    NoSuchToken(String),
    #[error("token {0:?} is revoked; create a new one instead")]
    Revoked(String),
    /// The queue to the store is full: what was asked is done in memory only.
    #[error("the guard store is busy; the ban is lifted here but not in the store: retry, or use `signet admin ban lift`")]
    Busy,
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("guard store on PostgreSQL: {0}")]
    Postgres(String),
}

impl From<signet_db::sqlite::SqliteError> for StoreError {
    fn from(e: signet_db::sqlite::SqliteError) -> StoreError {
        StoreError::Sqlite { path: e.path, source: e.source }
    }
}

impl From<signet_db::DbError> for StoreError {
    fn from(e: signet_db::DbError) -> StoreError {
        StoreError::Postgres(e.to_string())
    }
}

/// Why `[guard]` cannot be used as written; each names the setting.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("guard.ipv4_prefix must be 8..=32 and guard.ipv6_prefix 16..=128, got {ipv4} and {ipv6}")]
    Prefixes { ipv4: u8, ipv6: u8 },
    #[error("guard.max_clients must be 100..=100000000, got {0}")]
    MaxClients(usize),
    #[error("guard.trusted_proxies: {0}")]
    TrustedProxy(#[source] ClientError),
    #[error("[guard.roles]: {0}")]
    RoleName(#[source] PolicyError),
    /// The role's name.
    #[error("[guard.roles]: {0} is a built-in role and cannot be redefined; choose another name")]
    BuiltinRole(String),
    /// `role` is the role's name.
    #[error("[guard.roles] {role}: {source}")]
    RolePermissions { role: String, source: PolicyError },
    #[error(
        "guard.mtls.roles: {san:?} maps to role {role:?}, which is not defined; expected admin, signer, reader, auditor or a [guard.roles] name"
    )]
    MtlsRole { san: String, role: String },
    #[error("guard.rate_limit: per_second, burst, write_per_second and write_burst must be at least 1")]
    RateLimitZero,
    #[error("guard.ban: max_refusals, window_secs and duration_secs must be at least 1")]
    BanZero,
    #[error(
        "guard.redis shares the rate limits (and the bans they lead to) between instances: set guard.rate_limit.enabled = true, or leave guard.redis.url empty"
    )]
    RedisWithoutRateLimit,
    #[error(transparent)]
    Redis(#[from] RedisClientError),
}

/// Why a permission, a role name or a token scope is not one the guard takes. Each names the
/// value given and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    #[error(transparent)]
    UnknownPermission(#[from] UnknownPermission),
    #[error(
        "{0:?} is not a role name: 1 to 64 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit (built in: admin, signer, reader, auditor)"
    )]
    RoleName(String),
    /// A scope list longer than [`crate::scope::MAX_ENTRIES`].
    #[error("a scope lists at most {max} {list}, got {got}")]
    TooMany { list: &'static str, max: usize, got: usize },
    /// The rule as it is written out (`METHOD /template` or `/template`).
    #[error("route {0} is not a route of this server (see docs/guard.md for the list)")]
    UnknownRoute(String),
    #[error("log {0:?} is not one of {logs}", logs = LOGS.join(", "))]
    UnknownLog(String),
    #[error("route {route:?}: {method:?} is not a method")]
    NotAMethod { route: String, method: String },
    #[error("route {0:?} is not METHOD /path or /path (e.g. \"POST /api/v2/log/entries\")")]
    RouteShape(String),
    #[error("identity pattern {pattern:?} must be 1 to {max} printable ASCII characters, with * for any run")]
    PatternShape { pattern: String, max: usize },
    #[error("identity pattern {0:?} matches every identity; leave the scope's identities empty instead")]
    PatternMatchesAll(String),
}
