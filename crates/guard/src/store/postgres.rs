//! The guard's tokens and bans on PostgreSQL, shared by every instance on one database.
//!
//! The tables (`guard_tokens`, `guard_bans`, `guard_meta`) are this crate's migrations in the
//! database's one sequence ([`signet_db::migrations`]), applied when the store opens and by
//! `signet migrate`. Every change bumps
//! `guard_meta.version` in the same transaction; instances poll that one integer, as they
//! poll SQLite's `data_version`, and reread the tables only when it moved. So a token
//! revoked through any instance's database stops working on all of them within a poll.
//!
//! The calls are blocking (the store thread and `signet admin` have no runtime): [`Pg`].

use std::future::Future;
use std::sync::Arc;

use signet_db::migrations::Migration;
use tokio_postgres::Client;

use super::record::{now, parse_scope, scope_column, BanRecord, TokenRecord};
use crate::error::StoreError;
use crate::pg::{pg, Pg};
use crate::client::ClientKey;
use crate::roles::Role;
use crate::scope::TokenScope;
use crate::token::{self, NewToken};

pub struct PgStore {
    pg: Pg,
}

/// A row of `table` that does not read back as what it holds.
fn corrupt(table: &str, what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt { path: format!("PostgreSQL {table}"), what: what.to_string() }
}

/// The guard's tables, versions 4 and 6 of [`signet_db::migrations::REGISTRY`].
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 4,
        name: "the guard's tokens and bans, shared by every instance",
        sql: "
CREATE TABLE guard_tokens(id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, role TEXT NOT NULL, hash BYTEA NOT NULL,
    created BIGINT NOT NULL, expires BIGINT, revoked BIGINT);
CREATE TABLE guard_bans(client TEXT PRIMARY KEY, reason TEXT NOT NULL, since BIGINT NOT NULL, until BIGINT NOT NULL);
CREATE TABLE guard_meta(id INT PRIMARY KEY, version BIGINT NOT NULL);
INSERT INTO guard_meta(id, version) VALUES (1, 0);
",
    },
    Migration {
        version: 6,
        name: "token scopes",
        // JSON (crate::scope::TokenScope); NULL: the token is not limited beyond its role.
        sql: "ALTER TABLE guard_tokens ADD COLUMN scope TEXT;",
    },
];

const BUMP: &str = "UPDATE guard_meta SET version = version + 1 WHERE id = 1";

impl PgStore {
    /// Connects, and brings the guard's tables up to date.
    pub fn open(url: &str) -> Result<PgStore, StoreError> {
        let pg = Pg::open(url, None)?;
        pg.migrate(MIGRATIONS)?;
        Ok(PgStore { pg })
    }

    fn block<T, F, Fut>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Client>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        self.pg.block(f)
    }

    pub fn data_version(&self) -> Result<i64, StoreError> {
        self.block(|c| async move { c.query_one("SELECT version FROM guard_meta WHERE id = 1", &[]).await.map_err(pg)?.try_get(0).map_err(pg) })
    }

    pub fn create_token(&self, name: Option<&str>, role: Role, ttl_secs: Option<u64>, scope: TokenScope) -> Result<(NewToken, TokenRecord), StoreError> {
        let new = token::generate();
        let name = name.map_or_else(|| format!("token-{}", new.id), str::to_string);
        let created = now();
        let expires = ttl_secs.map(|t| created.saturating_add(t));
        let (id, hash, n, r) = (new.id.to_string(), new.hash.to_vec(), name.clone(), role.name().to_string());
        let scope_text = scope_column(&scope);
        let inserted = self.block(move |c| async move {
            let tx_sql = "WITH ins AS (INSERT INTO guard_tokens (id, name, role, hash, created, expires, scope) \
                          VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING RETURNING 1) \
                          UPDATE guard_meta SET version = version + (SELECT COUNT(*) FROM ins) WHERE id = 1 \
                          RETURNING (SELECT COUNT(*) FROM ins)";
            let row = c
                .query_one(tx_sql, &[&id, &n, &r, &hash, &(created as i64), &expires.map(|e| e as i64), &scope_text])
                .await
                .map_err(pg)?;
            Ok(row.try_get::<_, i64>(0).map_err(pg)? == 1)
        })?;
        if !inserted {
            return Err(StoreError::NameTaken(name));
        }
        let record = TokenRecord { id: new.id, name, role, hash: new.hash, scope: Arc::new(scope), created, expires, revoked: None };
        Ok((new, record))
    }

    pub fn tokens(&self) -> Result<Vec<TokenRecord>, StoreError> {
        let rows = self.block(|c| async move {
            c.query("SELECT id, name, role, hash, created, expires, revoked, scope FROM guard_tokens ORDER BY created, name", &[])
                .await
                .map_err(pg)
        })?;
        rows.iter()
            .map(|r| {
                let name: String = r.try_get(1).map_err(pg)?;
                let hash: Vec<u8> = r.try_get(3).map_err(pg)?;
                Ok(TokenRecord {
                    scope: parse_scope("PostgreSQL guard_tokens", &name, r.try_get::<_, Option<String>>(7).map_err(pg)?.as_deref())?,
                    id: r.try_get::<_, String>(0).map_err(pg)?.parse().map_err(|e| corrupt("guard_tokens", e))?,
                    role: r.try_get::<_, String>(2).map_err(pg)?.parse().map_err(|e| corrupt("guard_tokens", e))?,
                    hash: hash.try_into().map_err(|_| corrupt("guard_tokens", format!("token {name}: hash is not 32 bytes")))?,
                    name,
                    created: r.try_get::<_, i64>(4).map_err(pg)? as u64,
                    expires: r.try_get::<_, Option<i64>>(5).map_err(pg)?.map(|e| e as u64),
                    revoked: r.try_get::<_, Option<i64>>(6).map_err(pg)?.map(|e| e as u64),
                })
            })
            .collect()
    }

    pub fn revoke(&self, name_or_id: &str) -> Result<TokenRecord, StoreError> {
        let key = name_or_id.to_string();
        let id: Option<String> = self.block(move |c| async move {
            let sql = "WITH r AS (UPDATE guard_tokens SET revoked = COALESCE(revoked, $2) WHERE name = $1 OR id = $1 RETURNING id), \
                       b AS (UPDATE guard_meta SET version = version + 1 WHERE id = 1 AND EXISTS (SELECT 1 FROM r)) \
                       SELECT id FROM r";
            let row = c.query_opt(sql, &[&key, &(now() as i64)]).await.map_err(pg)?;
            row.map(|r| r.try_get(0)).transpose().map_err(pg)
        })?;
        let id = id.ok_or_else(|| StoreError::NoSuchToken(name_or_id.into()))?;
        self.tokens()?.into_iter().find(|t| t.id.to_string() == id).ok_or_else(|| StoreError::NoSuchToken(name_or_id.into()))
    }

    pub fn rotate(&self, name_or_id: &str, ttl_secs: Option<u64>) -> Result<(NewToken, TokenRecord), StoreError> {
        let key = name_or_id.to_string();
        let found: Option<(String, Option<i64>)> = self.block(move |c| async move {
            let row = c.query_opt("SELECT id, revoked FROM guard_tokens WHERE name = $1 OR id = $1", &[&key]).await.map_err(pg)?;
            row.map(|r| Ok((r.try_get(0).map_err(pg)?, r.try_get(1).map_err(pg)?))).transpose()
        })?;
        let (id, revoked) = found.ok_or_else(|| StoreError::NoSuchToken(name_or_id.into()))?;
        if revoked.is_some() {
            return Err(StoreError::Revoked(name_or_id.into()));
        }
        let new = token::with_new_secret(id.parse().map_err(|e| corrupt("guard_tokens", e))?);
        let (hash, expires) = (new.hash.to_vec(), ttl_secs.map(|t| now().saturating_add(t) as i64));
        let updated = self.block(move |c| async move {
            // The version moves with the change, so every instance rereads the tokens.
            let sql = "WITH u AS (UPDATE guard_tokens SET hash = $2, expires = $3 WHERE id = $1 AND revoked IS NULL RETURNING 1) \
                       UPDATE guard_meta SET version = version + (SELECT COUNT(*) FROM u) WHERE id = 1 RETURNING (SELECT COUNT(*) FROM u)";
            let row = c.query_one(sql, &[&id, &hash, &expires]).await.map_err(pg)?;
            Ok(row.try_get::<_, i64>(0).map_err(pg)? == 1)
        })?;
        if !updated {
            return Err(StoreError::Revoked(name_or_id.into()));
        }
        let record = self.tokens()?.into_iter().find(|t| t.id == new.id).ok_or_else(|| StoreError::NoSuchToken(name_or_id.into()))?;
        Ok((new, record))
    }

    pub fn bans(&self) -> Result<Vec<BanRecord>, StoreError> {
        let rows = self.block(|c| async move {
            c.query("SELECT client, reason, since, until FROM guard_bans WHERE until > $1 ORDER BY since, client", &[&(now() as i64)])
                .await
                .map_err(pg)
        })?;
        rows.iter()
            .map(|r| {
                let client: String = r.try_get(0).map_err(pg)?;
                Ok(BanRecord {
                    client: client.parse().map_err(|e| corrupt("guard_bans", e))?,
                    reason: r.try_get(1).map_err(pg)?,
                    since: r.try_get::<_, i64>(2).map_err(pg)? as u64,
                    until: r.try_get::<_, i64>(3).map_err(pg)? as u64,
                })
            })
            .collect()
    }

    pub fn insert_ban(&self, ban: &BanRecord) -> Result<(), StoreError> {
        let (client, reason, since, until) = (ban.client.to_string(), ban.reason.clone(), ban.since as i64, ban.until as i64);
        self.block(move |c| async move {
            c.execute(
                "INSERT INTO guard_bans (client, reason, since, until) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (client) DO UPDATE SET reason = EXCLUDED.reason, since = EXCLUDED.since, until = EXCLUDED.until",
                &[&client, &reason, &since, &until],
            )
            .await
            .map_err(pg)?;
            c.execute("DELETE FROM guard_bans WHERE until <= $1", &[&(now() as i64)]).await.map_err(pg)?;
            c.execute(BUMP, &[]).await.map_err(pg)?;
            Ok(())
        })
    }

    pub fn lift(&self, client: &ClientKey) -> Result<bool, StoreError> {
        let client = client.to_string();
        self.block(move |c| async move {
            let n = c.execute("DELETE FROM guard_bans WHERE client = $1", &[&client]).await.map_err(pg)?;
            if n > 0 {
                c.execute(BUMP, &[]).await.map_err(pg)?;
            }
            Ok(n > 0)
        })
    }
}
