//! Opening SQLite files the one way every embedded store does.
//!
//! Each store (the log and its key index, the guard's tokens and bans, the audit chain, the
//! witness's sizes) names what it needs ([`Writer`], [`Reader`]); the settings every one of
//! them shares live here:
//! - the file is created 0600 before SQLite opens it, so its WAL and shared-memory files,
//!   which copy the database file's mode, are private from their first byte, whatever the
//!   process's umask;
//! - WAL, and a busy timeout, so that a reader or `signet admin` beside the server waits
//!   for a lock rather than failing;
//! - errors that name the file ([`SqliteError`]);
//! - versioned schema changes in `user_version` ([`migrate`]).

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

/// How long a connection waits for another's lock before it fails with `SQLITE_BUSY`.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Readers map the whole file (up to this much): mapped pages skip the copy into SQLite's
/// page cache (docs/performance.md, "reads").
const MMAP_SIZE: u64 = 16 << 30;

/// A SQLite error and the file it came from.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct SqliteError {
    pub path: String,
    #[source]
    pub source: rusqlite::Error,
}

/// Turns SQLite's errors on `path` into [`SqliteError`]s.
pub fn on(path: &Path) -> impl Fn(rusqlite::Error) -> SqliteError + '_ {
    move |source| SqliteError { path: path.display().to_string(), source }
}

/// What a commit waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// The WAL is fsynced at every commit: committed is on disk (`synchronous=FULL`).
    Full,
    /// The WAL is fsynced at checkpoints only: a crash may lose the newest commits, never
    /// corrupt the file (`synchronous=NORMAL`).
    Normal,
}

/// Who copies the WAL back into the database file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checkpoints {
    /// SQLite, inside a commit, every thousand pages.
    Automatic,
    /// A thread of the store's own ([`open_checkpointer`]), so that the copy and its fsync
    /// never stall a commit.
    Manual,
}

/// The one connection that writes a file, and how.
#[derive(Debug, Clone, Copy)]
pub struct Writer {
    pub durability: Durability,
    pub checkpoints: Checkpoints,
    /// Page size for a new file (an existing file keeps its own).
    pub page_size: Option<u32>,
    /// The page cache, in KiB (SQLite's default: 2 MiB).
    pub cache_kib: Option<u32>,
    /// Whether reads go through a memory map.
    pub mmap: bool,
    /// The size the WAL is cut back to when it starts over.
    pub journal_size_limit: Option<u64>,
}

impl Writer {
    /// Durable commits, SQLite's checkpoints and page sizes: what a small store needs.
    pub const fn durable() -> Writer {
        Writer { durability: Durability::Full, checkpoints: Checkpoints::Automatic, page_size: None, cache_kib: None, mmap: false, journal_size_limit: None }
    }

    fn pragmas(&self) -> String {
        let mut p = String::new();
        // Before WAL: only a new file takes it, and WAL fixes the layout.
        if let Some(size) = self.page_size {
            p += &format!("PRAGMA page_size={size}; ");
        }
        p += "PRAGMA journal_mode=WAL; ";
        p += match self.durability {
            Durability::Full => "PRAGMA synchronous=FULL; ",
            Durability::Normal => "PRAGMA synchronous=NORMAL; ",
        };
        p += &format!("PRAGMA busy_timeout={}; ", BUSY_TIMEOUT.as_millis());
        if let Some(kib) = self.cache_kib {
            p += &format!("PRAGMA cache_size=-{kib}; ");
        }
        if self.mmap {
            p += &format!("PRAGMA mmap_size={MMAP_SIZE}; ");
        }
        if self.checkpoints == Checkpoints::Manual {
            p += "PRAGMA wal_autocheckpoint=0; ";
        }
        if let Some(limit) = self.journal_size_limit {
            p += &format!("PRAGMA journal_size_limit={limit}; ");
        }
        p
    }
}

/// A read-only connection of a pool.
#[derive(Debug, Clone, Copy)]
pub struct Reader {
    /// The page cache, in KiB: each pooled reader fills its own.
    pub cache_kib: u32,
}

/// Creates `path` empty and 0600 if it does not exist; an existing file is left as it is.
pub fn create_private(path: &Path) -> std::io::Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    opts.open(path).map(drop)
}

/// Opens (creating it 0600) the file a store writes, set up as `how` says.
pub fn open_writer(path: &Path, how: &Writer) -> Result<Connection, SqliteError> {
    create_private(path).map_err(|e| SqliteError { path: path.display().to_string(), source: io_error(e) })?;
    let conn = Connection::open(path).map_err(on(path))?;
    conn.execute_batch(&how.pragmas()).map_err(on(path))?;
    Ok(conn)
}

/// Opens an existing file read-only for a pool of readers: one connection per thread at a
/// time (no SQLite mutex), memory-mapped.
pub fn open_reader(path: &Path, how: &Reader) -> Result<Connection, SqliteError> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX).map_err(on(path))?;
    conn.execute_batch(&format!(
        "PRAGMA busy_timeout={}; PRAGMA mmap_size={MMAP_SIZE}; PRAGMA cache_size=-{};",
        BUSY_TIMEOUT.as_millis(),
        how.cache_kib
    ))
    .map_err(on(path))?;
    Ok(conn)
}

/// Opens an existing file read-only, for a command that inspects it (`signet doctor`,
/// `audit verify`, a backup's source): nothing is created or changed.
pub fn open_inspect(path: &Path) -> Result<Connection, SqliteError> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(on(path))?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(on(path))?;
    Ok(conn)
}

/// A further connection to a file that its store's writer set up: for the store's checkpoint
/// thread ([`Checkpoints::Manual`], which runs only [`checkpoint`]) or a rare maintenance
/// write. The file's own settings (WAL, its page size) hold; this one only waits for locks.
pub fn open_beside(path: &Path) -> Result<Connection, SqliteError> {
    let conn = Connection::open(path).map_err(on(path))?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(on(path))?;
    Ok(conn)
}

/// Copies what the WAL holds into the database file without waiting for readers or the
/// writer (PASSIVE): a busy turn only leaves more for the next.
pub fn checkpoint(conn: &Connection) -> rusqlite::Result<()> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
}

fn io_error(e: std::io::Error) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN), Some(format!("creating the file: {e}")))
}

/// A SQLite schema change: code rather than SQL alone, since some steps depend on what an
/// older release left (SQLite has no `ADD COLUMN IF NOT EXISTS`).
pub struct Migration {
    pub version: i32,
    pub apply: fn(&rusqlite::Transaction<'_>) -> rusqlite::Result<()>,
}

/// Why a file's schema could not be brought up to date.
#[derive(Debug, thiserror::Error)]
pub enum MigrationError {
    /// Written by a newer signet: refused rather than written in a layout this one does not know.
    #[error("{path}: {}", crate::migrations::MigrationError::TooNew { found: *found, known: *known })]
    TooNew { path: String, found: i32, known: i32 },
    #[error("{path}: schema migration: {source}")]
    Sqlite {
        path: String,
        #[source]
        source: rusqlite::Error,
    },
}

/// The newest version `all` knows.
pub fn newest(all: &[Migration]) -> i32 {
    all.iter().map(|m| m.version).max().unwrap_or(0)
}

/// Applies the migrations of `all` that the file lacks, each with its `user_version` bump in
/// one transaction; returns the versions applied.
pub fn migrate(conn: &mut Connection, path: &Path, all: &[Migration]) -> Result<Vec<i32>, MigrationError> {
    let shown = || path.display().to_string();
    let sq = |source| MigrationError::Sqlite { path: shown(), source };
    let known = newest(all);
    let mut applied = Vec::new();
    for m in all {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(sq)?;
        let have: i32 = tx.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(sq)?;
        if have > known {
            return Err(MigrationError::TooNew { path: shown(), found: have, known });
        }
        if have >= m.version {
            continue;
        }
        (m.apply)(&tx).map_err(sq)?;
        tx.execute_batch(&format!("PRAGMA user_version = {}", m.version)).map_err(sq)?;
        tx.commit().map_err(sq)?;
        applied.push(m.version);
    }
    Ok(applied)
}

/// The schema version of the file at `path`, read without changing anything.
pub fn schema_version(path: &Path) -> Result<i32, SqliteError> {
    open_inspect(path)?.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(on(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_new_file_and_its_wal_are_private_whatever_the_umask() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.sqlite");
        // The process's umask would make SQLite's own files 0644.
        let old = unsafe { libc_umask(0o022) };
        let conn = open_writer(&path, &Writer::durable()).unwrap();
        unsafe { libc_umask(old) };
        conn.execute_batch("CREATE TABLE t(v); INSERT INTO t VALUES (1);").unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&path.with_extension("sqlite-wal")), 0o600);
        let mode_of: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
        assert_eq!(mode_of, "wal");
    }

    extern "C" {
        #[link_name = "umask"]
        fn libc_umask(mask: u32) -> u32;
    }

    #[test]
    fn a_writer_takes_the_settings_it_names() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.sqlite");
        let how = Writer {
            durability: Durability::Normal,
            checkpoints: Checkpoints::Manual,
            page_size: Some(65536),
            cache_kib: Some(1024),
            mmap: false,
            journal_size_limit: Some(1 << 20),
        };
        let conn = open_writer(&path, &how).unwrap();
        let get = |p: &str| conn.query_row(&format!("PRAGMA {p}"), [], |r| r.get::<_, i64>(0)).unwrap();
        assert_eq!(get("synchronous"), 1);
        assert_eq!(get("wal_autocheckpoint"), 0);
        assert_eq!(get("page_size"), 65536);
        assert_eq!(get("cache_size"), -1024);
        assert_eq!(get("journal_size_limit"), 1 << 20);
        assert_eq!(get("busy_timeout"), 5000);
    }

    #[test]
    fn migrations_apply_once_in_order_and_a_newer_file_is_refused() {
        const ALL: &[Migration] = &[
            Migration { version: 1, apply: |tx| tx.execute_batch("CREATE TABLE a(v);") },
            Migration { version: 2, apply: |tx| tx.execute_batch("ALTER TABLE a ADD COLUMN w;") },
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.sqlite");
        let mut conn = open_writer(&path, &Writer::durable()).unwrap();
        assert_eq!(migrate(&mut conn, &path, &ALL[..1]).unwrap(), vec![1]);
        assert_eq!(migrate(&mut conn, &path, ALL).unwrap(), vec![2]);
        assert!(migrate(&mut conn, &path, ALL).unwrap().is_empty());
        assert_eq!(schema_version(&path).unwrap(), 2);
        let err = migrate(&mut conn, &path, &ALL[..1]).unwrap_err();
        assert!(matches!(err, MigrationError::TooNew { found: 2, known: 1, .. }), "{err}");
        assert!(err.to_string().contains("x.sqlite") && err.to_string().contains("newer signet"), "{err}");
    }

    #[test]
    fn a_missing_file_is_not_created_by_an_inspection() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("none.sqlite");
        let err = open_inspect(&path).unwrap_err();
        assert!(err.to_string().contains("none.sqlite"), "{err}");
        assert!(!path.exists());
    }
}
