//! The backends every storage test runs against: SQLite always, and PostgreSQL when
//! `SIGNET_TEST_POSTGRES` names a server (`scripts/test` starts one). With
//! `SIGNET_TEST_REQUIRE_POSTGRES=1`, as `scripts/test` sets it, a missing server fails the
//! run instead of narrowing it to SQLite.

#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use signet_log::storage::{PostgresStorage, SqliteStorage, Storage, StorageUrl};

/// One backend's store, and what keeps it alive (a temporary directory or database).
pub struct Backend {
    pub name: &'static str,
    pub url: StorageUrl,
    pub storage: Arc<dyn Storage>,
    _dir: Option<tempfile::TempDir>,
}

impl Backend {
    /// Opens the same store again (a restart).
    pub fn reopen(&self) -> Arc<dyn Storage> {
        signet_log::storage::open(&self.url).unwrap()
    }
}

pub fn postgres_url() -> Option<String> {
    match std::env::var("SIGNET_TEST_POSTGRES") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            assert!(
                std::env::var("SIGNET_TEST_REQUIRE_POSTGRES").as_deref() != Ok("1"),
                "SIGNET_TEST_REQUIRE_POSTGRES=1 but SIGNET_TEST_POSTGRES is not set: start PostgreSQL with scripts/services"
            );
            eprintln!("SIGNET_TEST_POSTGRES is not set: PostgreSQL cases skipped (scripts/test runs them)");
            None
        }
    }
}

/// A new, empty database on the test server; its URL.
pub fn fresh_database(server: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let name = format!("signet_test_{}_{}_{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed), rand_suffix());
    let admin = server.to_string();
    let create = name.clone();
    // Its own thread and runtime: callers may be inside a tokio runtime already.
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let (client, conn) = tokio_postgres::connect(&admin, tokio_postgres::NoTls).await.expect("connect to the test PostgreSQL");
            tokio::spawn(conn);
            client.batch_execute(&format!("CREATE DATABASE {create}")).await.unwrap();
        });
    })
    .join()
    .unwrap();
    match server.rfind('/') {
        Some(slash) => format!("{}/{name}", &server[..slash]),
        None => panic!("SIGNET_TEST_POSTGRES {server:?} has no /DATABASE"),
    }
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos() as u64
}

/// Runs SQL on `url` from a thread of its own.
pub fn psql(url: &str, sql: &str) {
    let sql = sql.to_string();
    with_client(url, move |client| async move { client.batch_execute(&sql).await.unwrap() });
}

/// The one integer `sql` selects on `url` (a count).
pub fn psql_i64(url: &str, sql: &str) -> i64 {
    let sql = sql.to_string();
    with_client(url, move |client| async move { client.query_one(sql.as_str(), &[]).await.unwrap().get::<_, i64>(0) })
}

/// `f` with a client of `url`, on a thread and runtime of its own: callers may be inside a
/// tokio runtime already.
pub fn with_client<T, F, Fut>(url: &str, f: F) -> T
where
    T: Send + 'static,
    F: FnOnce(tokio_postgres::Client) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T>,
{
    let url = url.to_string();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
            tokio::spawn(conn);
            f(client).await
        })
    })
    .join()
    .unwrap()
}

/// A fresh store on each backend.
pub fn backends() -> Vec<Backend> {
    let dir = tempfile::tempdir().unwrap();
    let url = StorageUrl::Sqlite(dir.path().join("db.sqlite"));
    let sqlite = Backend { name: "sqlite", storage: signet_log::storage::open(&url).unwrap(), url, _dir: Some(dir) };
    let mut all = vec![sqlite];
    if let Some(server) = postgres_url() {
        let db = fresh_database(&server);
        let storage: Arc<dyn Storage> = Arc::new(PostgresStorage::open(&db).unwrap());
        all.push(Backend { name: "postgres", url: StorageUrl::Postgres(db), storage, _dir: None });
    }
    all
}

/// Only to name the type in tests that wrap SQLite.
pub type Sqlite = SqliteStorage;

/// Log 1 on `storage`, under a key of its own, in batches of up to 32 cut every 2 ms: for
/// the tests of what a log stores and finds.
pub async fn open_log(storage: Arc<dyn Storage>) -> signet_log::Log {
    signet_log::Log::open(
        signet_log::LogConfig {
            id: 1,
            origin: "test.example/log".into(),
            key_name: "test.example".into(),
            key: Arc::new(signet_keys::Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).unwrap()),
            batch: signet_log::BatchPolicy { max_entries: 32, max_delay: std::time::Duration::from_millis(2) },
            stamper: None,
            max_pending: 0,
            tile_cache: signet_log::DEFAULT_TILE_CACHE,
            entry_cache: signet_log::DEFAULT_ENTRY_CACHE,
            note_key: None,
            genesis: None,
        },
        storage,
    )
    .await
    .unwrap()
}
