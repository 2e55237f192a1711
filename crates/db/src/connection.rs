//! One PostgreSQL connection for a store, made at first use and again once it broke (a
//! database restart), with what a fresh connection must do first (apply a migration, take a
//! session lock) done before any caller sees it. The guard's stores and the witness's state
//! each keep one.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::Client;

use crate::error::DbError;
use crate::pg::{message, Target};

/// How long a connection may take before the caller is told the database is unreachable.
pub const CONNECT_WITHIN: Duration = Duration::from_secs(5);

/// What a fresh connection must do before it serves a call; its error is the caller's own.
pub type OnConnect<E> = Arc<dyn Fn(Arc<Client>) -> Pin<Box<dyn Future<Output = Result<(), E>> + Send>> + Send + Sync>;

pub struct Reconnecting<E> {
    target: Target,
    slot: tokio::sync::Mutex<Option<Arc<Client>>>,
    on_connect: Option<OnConnect<E>>,
    /// For the log line when a connection ends: whose it was.
    what: &'static str,
}

impl<E: From<DbError>> Reconnecting<E> {
    pub fn new(target: Target, what: &'static str, on_connect: Option<OnConnect<E>>) -> Reconnecting<E> {
        Reconnecting { target, slot: tokio::sync::Mutex::new(None), on_connect, what }
    }

    /// The connection: the last one while it is open, else a new one once `on_connect` has run
    /// on it. Callers wait for each other while a connection is being made.
    pub async fn client(&self) -> Result<Arc<Client>, E> {
        let mut slot = self.slot.lock().await;
        if let Some(c) = slot.as_ref().filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        let (client, driver) = tokio::time::timeout(CONNECT_WITHIN, self.target.connect())
            .await
            .map_err(|_| DbError::NoAnswer(CONNECT_WITHIN))?
            .map_err(|e| DbError::Connect(message(&e)))?;
        let what = self.what;
        tokio::spawn(async move {
            if let Err(e) = driver.await {
                tracing::warn!(error = %message(&e), "{what}: PostgreSQL connection closed");
            }
        });
        let client = Arc::new(client);
        if let Some(on_connect) = &self.on_connect {
            on_connect(client.clone()).await?;
        }
        *slot = Some(client.clone());
        Ok(client)
    }
}
