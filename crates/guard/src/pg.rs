//! One PostgreSQL connection driven for blocking callers: the guard's store and the audit
//! chain on PostgreSQL.
//!
//! Their callers are blocking (the guard's store thread, the audit writer, `signet admin`)
//! and may run on a thread inside a runtime (the server opens both from `spawn_blocking`),
//! so the process's database runtime drives the connection ([`signet_db::runtime`], shared
//! with the log's store) and each call waits on a channel.
//! A connection that broke (a database restart) is made anew on the next call, and its
//! [`Hello`] runs again on it.

use std::future::Future;
use std::sync::Arc;

use signet_db::connection::{OnConnect, Reconnecting};
use tokio_postgres::Client;

use crate::error::StoreError;

/// What a fresh connection must do before it serves a call: for the audit writer, take its
/// chain's lock (a session lock, gone with the connection it was taken on).
pub type Hello = OnConnect<StoreError>;

pub struct Pg {
    connection: Arc<Reconnecting<StoreError>>,
}

/// A driver error as its server message, without the driver's wrapping.
pub fn pg(e: tokio_postgres::Error) -> StoreError {
    StoreError::Postgres(signet_db::pg::message(&e))
}

impl Pg {
    /// Connects now, so that a wrong URL or a database that is down is an error at open.
    pub fn open(url: &str, hello: Option<Hello>) -> Result<Pg, StoreError> {
        let target = signet_db::pg::Target::parse(url)?;
        let pg = Pg { connection: Arc::new(Reconnecting::new(target, "the guard's store", hello)) };
        pg.block(|_| async { Ok(()) })?;
        Ok(pg)
    }

    /// Applies those of `ours` that the database lacks ([`signet_db::migrations`]).
    pub fn migrate(&self, ours: &'static [signet_db::migrations::Migration]) -> Result<Vec<i32>, StoreError> {
        self.block(move |c| async move { signet_db::migrations::apply(&c, ours).await.map_err(|e| StoreError::Postgres(e.to_string())) })
    }

    /// Runs `f` with the connection (made anew if it broke) on the database runtime, and
    /// waits for it.
    pub fn block<T, F, Fut>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Client>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        let connection = self.connection.clone();
        let outcome = async move { f(connection.client().await?).await };
        signet_db::runtime::block(outcome)?
    }
}
