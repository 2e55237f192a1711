//! The tokens and bans that `signet admin` and a running server share: `guard.sqlite` in
//! the data dir, or, for many instances on one database, PostgreSQL ([`postgres`]).
//!
//! SQLite gives both processes atomic updates under its own locking, and a cheap way for
//! the server to notice the other's changes: `PRAGMA data_version` changes whenever
//! another connection commits, so the server polls one integer instead of rereading
//! tables (see [`crate::guard`]). The file is created 0600; it holds only token hashes,
//! but the hashes and names are still nobody else's business.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rusqlite::{params, Connection, OptionalExtension};

use crate::client::ClientKey;
use crate::roles::Role;
use crate::scope::TokenScope;
use crate::token::{self, NewToken};

pub use crate::error::StoreError;
pub use record::{now, BanRecord, TokenRecord};

use record::{parse_scope, scope_column};

mod postgres;
mod record;

/// The guard's tables on PostgreSQL ([`signet_db::migrations`]).
pub use postgres::MIGRATIONS as POSTGRES_MIGRATIONS;

/// The guard's store: SQLite in the data dir, or PostgreSQL shared by many instances.
pub struct Store {
    backend: Backend,
}

enum Backend {
    Sqlite(SqliteStore),
    Postgres(postgres::PgStore),
}

macro_rules! each {
    ($self:ident, $s:ident => $call:expr) => {
        match &$self.backend {
            Backend::Sqlite($s) => $call,
            Backend::Postgres($s) => $call,
        }
    };
}

impl Store {
    /// Opens (creating, mode 0600) `<data_dir>/guard.sqlite`.
    pub fn open(data_dir: &Path) -> Result<Store, StoreError> {
        Ok(Store { backend: Backend::Sqlite(SqliteStore::open(data_dir)?) })
    }

    /// Opens the guard's tables in the PostgreSQL database at `url` (made by its migrations).
    pub fn open_postgres(url: &str) -> Result<Store, StoreError> {
        Ok(Store { backend: Backend::Postgres(postgres::PgStore::open(url)?) })
    }

    /// Changes whenever another connection commits a change.
    pub fn data_version(&self) -> Result<i64, StoreError> {
        each!(self, s => s.data_version())
    }

    /// Makes and stores a token; the plaintext is in the result and nowhere else.
    pub fn create_token(&self, name: Option<&str>, role: Role, ttl_secs: Option<u64>, scope: TokenScope) -> Result<(NewToken, TokenRecord), StoreError> {
        each!(self, s => s.create_token(name, role, ttl_secs, scope))
    }

    pub fn tokens(&self) -> Result<Vec<TokenRecord>, StoreError> {
        each!(self, s => s.tokens())
    }

    /// Revokes the token with this name or id. Its record stays, marked, for `list`.
    pub fn revoke(&self, name_or_id: &str) -> Result<TokenRecord, StoreError> {
        each!(self, s => s.revoke(name_or_id))
    }

    /// Gives the token with this name or id a new secret and a new expiry (`ttl_secs` from
    /// now; `None`: never). Same id, name and role; the old secret stops working at once.
    /// A revoked token cannot be rotated.
    pub fn rotate(&self, name_or_id: &str, ttl_secs: Option<u64>) -> Result<(NewToken, TokenRecord), StoreError> {
        each!(self, s => s.rotate(name_or_id, ttl_secs))
    }

    /// Bans still in force.
    pub fn bans(&self) -> Result<Vec<BanRecord>, StoreError> {
        each!(self, s => s.bans())
    }

    /// Records a ban, replacing an older one of the same client; drops expired ones.
    pub fn insert_ban(&self, ban: &BanRecord) -> Result<(), StoreError> {
        each!(self, s => s.insert_ban(ban))
    }

    /// Lifts the ban of `client`; false when it had none.
    pub fn lift(&self, client: &ClientKey) -> Result<bool, StoreError> {
        each!(self, s => s.lift(client))
    }
}

pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join("guard.sqlite")
}

pub struct SqliteStore {
    conn: Connection,
    path: String,
}

impl SqliteStore {
    /// Opens (creating, mode 0600) `<data_dir>/guard.sqlite`.
    pub fn open(data_dir: &Path) -> Result<SqliteStore, StoreError> {
        let file = path(data_dir);
        let shown = file.display().to_string();
        let io = |source| StoreError::Io { path: shown.clone(), source };
        signet_core::files::ensure_private_dir(data_dir).map_err(io)?;
        // WAL: the server's ban writes and `signet admin`'s token writes do not lock each
        // other's readers out, and a commit costs one fsync, not a journal's three.
        let conn = signet_db::sqlite::open_writer(&file, &signet_db::sqlite::Writer::durable())?;
        let store = SqliteStore { conn, path: shown };
        store
            .conn
            .execute_batch(
                "CREATE TABLE IF NOT EXISTS tokens (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, role TEXT NOT NULL,
                     hash BLOB NOT NULL, created INTEGER NOT NULL, expires INTEGER, revoked INTEGER);
                 CREATE TABLE IF NOT EXISTS bans (client TEXT PRIMARY KEY, reason TEXT NOT NULL,
                     since INTEGER NOT NULL, until INTEGER NOT NULL);",
            )
            .map_err(|e| store.err(e))?;
        // Scopes came later: a store made before them gains the column (NULL: unlimited).
        let has_scope: bool = store
            .conn
            .query_row("SELECT EXISTS(SELECT 1 FROM pragma_table_info('tokens') WHERE name = 'scope')", [], |r| r.get(0))
            .map_err(|e| store.err(e))?;
        if !has_scope {
            store.conn.execute_batch("ALTER TABLE tokens ADD COLUMN scope TEXT").map_err(|e| store.err(e))?;
        }
        Ok(store)
    }

    fn err(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite { path: self.path.clone(), source }
    }

    fn corrupt(&self, what: impl std::fmt::Display) -> StoreError {
        StoreError::Corrupt { path: self.path.clone(), what: what.to_string() }
    }

    /// Changes whenever another connection commits (SQLite's `PRAGMA data_version`).
    pub fn data_version(&self) -> Result<i64, StoreError> {
        self.conn.query_row("PRAGMA data_version", [], |r| r.get(0)).map_err(|e| self.err(e))
    }

    /// Makes and stores a token; the plaintext is in the result and nowhere else.
    pub fn create_token(&self, name: Option<&str>, role: Role, ttl_secs: Option<u64>, scope: TokenScope) -> Result<(NewToken, TokenRecord), StoreError> {
        let new = token::generate();
        let scope_text = scope_column(&scope);
        let name = name.map_or_else(|| format!("token-{}", new.id), str::to_string);
        let created = now();
        let expires = ttl_secs.map(|t| created.saturating_add(t));
        let taken: bool = self
            .conn
            .query_row("SELECT EXISTS(SELECT 1 FROM tokens WHERE name = ?1)", [&name], |r| r.get(0))
            .map_err(|e| self.err(e))?;
        if taken {
            return Err(StoreError::NameTaken(name));
        }
        self.conn
            .execute(
                "INSERT INTO tokens (id, name, role, hash, created, expires, scope) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![new.id.to_string(), name, role.name(), &new.hash[..], created as i64, expires.map(|e| e as i64), scope_text],
            )
            .map_err(|e| self.err(e))?;
        let record = TokenRecord { id: new.id, name, role: role.clone(), hash: new.hash, scope: Arc::new(scope), created, expires, revoked: None };
        Ok((new, record))
    }

    pub fn tokens(&self) -> Result<Vec<TokenRecord>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, name, role, hash, created, expires, revoked, scope FROM tokens ORDER BY created, name")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, Vec<u8>>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, Option<i64>>(5)?,
                    r.get::<_, Option<i64>>(6)?,
                    r.get::<_, Option<String>>(7)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (id, name, role, hash, created, expires, revoked, scope) = row.map_err(|e| self.err(e))?;
            out.push(TokenRecord {
                scope: parse_scope(&self.path, &name, scope.as_deref())?,
                id: id.parse().map_err(|e| self.corrupt(e))?,
                role: role.parse().map_err(|e| self.corrupt(e))?,
                hash: hash.try_into().map_err(|_| self.corrupt(format!("token {name}: hash is not 32 bytes")))?,
                name,
                created: created as u64,
                expires: expires.map(|e| e as u64),
                revoked: revoked.map(|r| r as u64),
            });
        }
        Ok(out)
    }

    /// Revokes the token with this name or id. Its record stays, marked, for `list`.
    pub fn revoke(&self, name_or_id: &str) -> Result<TokenRecord, StoreError> {
        let id: Option<String> = self
            .conn
            .query_row("SELECT id FROM tokens WHERE name = ?1 OR id = ?1", [name_or_id], |r| r.get(0))
            .optional()
            .map_err(|e| self.err(e))?;
        let id = id.ok_or_else(|| StoreError::NoSuchToken(name_or_id.into()))?;
        self.conn
            .execute("UPDATE tokens SET revoked = COALESCE(revoked, ?2) WHERE id = ?1", params![id, now() as i64])
            .map_err(|e| self.err(e))?;
        let all = self.tokens()?;
        all.into_iter().find(|t| t.id.to_string() == id).ok_or_else(|| StoreError::NoSuchToken(name_or_id.into()))
    }

    pub fn rotate(&self, name_or_id: &str, ttl_secs: Option<u64>) -> Result<(NewToken, TokenRecord), StoreError> {
        let found: Option<(String, Option<i64>)> = self
            .conn
            .query_row("SELECT id, revoked FROM tokens WHERE name = ?1 OR id = ?1", [name_or_id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
            .map_err(|e| self.err(e))?;
        let (id, revoked) = found.ok_or_else(|| StoreError::NoSuchToken(name_or_id.into()))?;
        if revoked.is_some() {
            return Err(StoreError::Revoked(name_or_id.into()));
        }
        let new = token::with_new_secret(id.parse().map_err(|e| self.corrupt(e))?);
        let expires = ttl_secs.map(|t| now().saturating_add(t));
        self.conn
            .execute(
                "UPDATE tokens SET hash = ?2, expires = ?3 WHERE id = ?1 AND revoked IS NULL",
                params![id, &new.hash[..], expires.map(|e| e as i64)],
            )
            .map_err(|e| self.err(e))?;
        let record = self.tokens()?.into_iter().find(|t| t.id == new.id).ok_or_else(|| StoreError::NoSuchToken(name_or_id.into()))?;
        Ok((new, record))
    }

    /// Bans still in force.
    pub fn bans(&self) -> Result<Vec<BanRecord>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT client, reason, since, until FROM bans WHERE until > ?1 ORDER BY since, client")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([now() as i64], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?, r.get::<_, i64>(3)?))
            })
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (client, reason, since, until) = row.map_err(|e| self.err(e))?;
            let client = client.parse().map_err(|e| self.corrupt(e))?;
            out.push(BanRecord { client, reason, since: since as u64, until: until as u64 });
        }
        Ok(out)
    }

    /// Records a ban, replacing an older one of the same client; drops expired ones.
    pub fn insert_ban(&self, ban: &BanRecord) -> Result<(), StoreError> {
        // One transaction (one commit) for both statements.
        let tx = self.conn.unchecked_transaction().map_err(|e| self.err(e))?;
        tx.execute(
            "INSERT OR REPLACE INTO bans (client, reason, since, until) VALUES (?1, ?2, ?3, ?4)",
            params![ban.client.to_string(), ban.reason, ban.since as i64, ban.until as i64],
        )
        .map_err(|e| self.err(e))?;
        tx.execute("DELETE FROM bans WHERE until <= ?1", [now() as i64]).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))
    }

    /// Lifts the ban of `client`; false when it had none.
    pub fn lift(&self, client: &ClientKey) -> Result<bool, StoreError> {
        let n = self.conn.execute("DELETE FROM bans WHERE client = ?1", [client.to_string()]).map_err(|e| self.err(e))?;
        Ok(n > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_without_plaintext() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path()).unwrap();
        let (new, rec) = s.create_token(Some("ci"), Role::signer(), Some(60), TokenScope::default()).unwrap();
        assert!(matches!(s.create_token(Some("ci"), Role::reader(), None, TokenScope::default()), Err(StoreError::NameTaken(_))));
        let listed = s.tokens().unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!((listed[0].id, listed[0].role.clone(), listed[0].hash), (rec.id, Role::signer(), new.hash));
        assert!(listed[0].usable_at(now()) && !listed[0].usable_at(now() + 61));
        assert!(s.revoke("ci").unwrap().revoked.is_some());
        assert!(!s.tokens().unwrap()[0].usable_at(now()));
        assert!(matches!(s.revoke("nope"), Err(StoreError::NoSuchToken(_))));
        drop(s);
        let bytes = std::fs::read(path(dir.path())).unwrap();
        // After `sgt_<16 hex>_`: the base64url secret may itself hold `_`.
        let secret = &new.plaintext[21..];
        assert!(!bytes.windows(secret.len()).any(|w| w == secret.as_bytes()), "no plaintext secret on disk");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(path(dir.path())).unwrap().permissions().mode() & 0o777, 0o600);
        }
    }

    #[test]
    fn a_store_made_before_scopes_gains_them_and_keeps_its_tokens_unlimited() {
        let dir = tempfile::tempdir().unwrap();
        let old = Connection::open(path(dir.path())).unwrap();
        old.execute_batch(
            "CREATE TABLE tokens (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, role TEXT NOT NULL,
                 hash BLOB NOT NULL, created INTEGER NOT NULL, expires INTEGER, revoked INTEGER);
             INSERT INTO tokens VALUES ('00112233445566ff', 'old', 'reader', zeroblob(32), 1, NULL, NULL);",
        )
        .unwrap();
        drop(old);
        let s = Store::open(dir.path()).unwrap();
        assert!(s.tokens().unwrap()[0].scope.is_unlimited());
        let scope: TokenScope = serde_json::from_str(r#"{"networks":["10.0.0.0/8"]}"#).unwrap();
        s.create_token(Some("new"), Role::reader(), None, scope.clone()).unwrap();
        drop(s);
        let again = Store::open(dir.path()).unwrap().tokens().unwrap();
        assert_eq!(*again[1].scope, scope, "opened twice: the column is added once, and the scope read back");
        // A scope that does not parse is a corrupt store, never an unlimited token.
        Connection::open(path(dir.path())).unwrap().execute("UPDATE tokens SET scope = '{\"networks\":5}' WHERE name = 'new'", []).unwrap();
        assert!(matches!(Store::open(dir.path()).unwrap().tokens(), Err(StoreError::CorruptScope { .. })));
    }

    #[test]
    fn bans_expire_and_lift() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path()).unwrap();
        let ip: ClientKey = "10.1.2.3".parse().unwrap();
        let other: ClientKey = "10.1.2.4".parse().unwrap();
        s.insert_ban(&BanRecord { client: ip, reason: "r".into(), since: now(), until: now() + 100 }).unwrap();
        s.insert_ban(&BanRecord { client: other, reason: "r".into(), since: now() - 10, until: now() - 1 }).unwrap();
        let bans = s.bans().unwrap();
        assert_eq!(bans.len(), 1);
        assert_eq!(bans[0].client, ip);
        assert!(s.lift(&ip).unwrap());
        assert!(!s.lift(&ip).unwrap());
        assert!(s.bans().unwrap().is_empty());
    }
}
