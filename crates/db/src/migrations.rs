//! The PostgreSQL schema: one sequence of versions that every crate adds its tables to.
//!
//! All of signet's tables on PostgreSQL share one database and one `signet_schema` table of
//! applied versions. The crate that owns a table declares its migration beside the code that
//! reads it, and applies its own migrations when its store opens; `signet migrate` applies
//! them all. [`REGISTRY`] is the one list of who owns which version: two crates cannot take
//! the same number, and a database whose newest version is past it was written by a newer
//! signet, which this one refuses rather than write to a layout it does not know.

use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

/// One schema change. Released migrations are never edited; the next change is a new one.
pub struct Migration {
    pub version: i32,
    pub name: &'static str,
    pub sql: &'static str,
}

/// Every version there is, in order, with the crate (and store) that owns it.
pub const REGISTRY: &[(i32, &str)] = &[
    (1, "log"),
    (2, "log: the sequencer lease"),
    (3, "log: the queue"),
    (4, "guard: tokens and bans"),
    (5, "log: leaf tiles"),
    (6, "guard: token scopes"),
    (7, "guard: audit chains"),
    (8, "log: search by identity"),
    (9, "log: the TUF repository"),
    (10, "witness"),
    (11, "log: frozen trees"),
    (12, "log: search by signer's key"),
    (13, "log: attestations"),
];

/// The newest version this build knows.
pub fn newest() -> i32 {
    REGISTRY.iter().map(|(v, _)| *v).max().unwrap_or(0)
}

#[derive(Debug)]
pub enum MigrationError {
    /// The database holds a version this build does not know.
    TooNew { found: i32, known: i32 },
    /// A migration that [`REGISTRY`] does not list (a defect in the build, caught at open).
    Unregistered { version: i32, name: &'static str },
    Database(String),
}

impl std::fmt::Display for MigrationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MigrationError::TooNew { found, known } => write!(
                f,
                "the database's schema is at version {found}, newer than this signet knows (up to {known}); run a newer signet"
            ),
            MigrationError::Unregistered { version, name } => {
                write!(f, "migration {version} ({name}) is not in signet_db's registry")
            }
            MigrationError::Database(m) => write!(f, "PostgreSQL migration: {m}"),
        }
    }
}

impl std::error::Error for MigrationError {}

fn db(e: tokio_postgres::Error) -> MigrationError {
    MigrationError::Database(crate::pg::message(&e))
}

/// The versions applied to the database, in order; empty when signet never migrated it.
/// Changes nothing (`signet doctor`).
pub async fn applied(client: &Client) -> Result<Vec<i32>, MigrationError> {
    let exists: bool = client.query_one("SELECT to_regclass('signet_schema') IS NOT NULL", &[]).await.map_err(db)?.try_get(0).map_err(db)?;
    if !exists {
        return Ok(Vec::new());
    }
    let rows = client.query("SELECT version FROM signet_schema ORDER BY version", &[]).await.map_err(db)?;
    rows.iter().map(|r| r.try_get(0).map_err(db)).collect()
}

/// The registered versions that `applied` lacks.
pub fn missing(applied: &[i32]) -> Vec<i32> {
    REGISTRY.iter().map(|(v, _)| *v).filter(|v| !applied.contains(v)).collect()
}

/// Applies the migrations of `ours` that the database lacks, each in its own transaction
/// with its `signet_schema` row, and returns the versions applied. Two instances starting at
/// once apply each exactly once: the second one's insert of the same version waits on the
/// first's row, fails when it commits, rolls back and finds the version applied.
///
/// Takes a shared client (stores hand theirs around as `Arc<Client>`), so the transactions
/// are explicit `BEGIN`/`COMMIT`: nothing else may use the client meanwhile, which holds
/// while a store opens.
pub async fn apply(client: &Client, ours: &[Migration]) -> Result<Vec<i32>, MigrationError> {
    for m in ours {
        if !REGISTRY.iter().any(|(v, _)| *v == m.version) {
            return Err(MigrationError::Unregistered { version: m.version, name: m.name });
        }
    }
    let known = newest();
    let present = applied(client).await?;
    if let Some(&found) = present.last().filter(|&&v| v > known) {
        return Err(MigrationError::TooNew { found, known });
    }
    if ours.iter().all(|m| present.contains(&m.version)) {
        return Ok(Vec::new());
    }
    // Two instances creating the table at once can collide in the catalog; the loser retries.
    for attempt in 0..3 {
        match client
            .batch_execute(
                "CREATE TABLE IF NOT EXISTS signet_schema(\
                 version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
            )
            .await
        {
            Ok(()) => break,
            Err(e) if attempt < 2 && e.code().is_some() => continue,
            Err(e) => return Err(db(e)),
        }
    }
    let mut done = Vec::new();
    for m in ours {
        if present.contains(&m.version) {
            continue;
        }
        client.batch_execute("BEGIN").await.map_err(db)?;
        match one(client, m).await {
            Ok(true) => {
                tracing::info!(version = m.version, name = m.name, "PostgreSQL schema migrated");
                done.push(m.version);
            }
            // Another instance applied it first.
            Ok(false) => {}
            Err(e) => {
                let _ = client.batch_execute("ROLLBACK").await;
                return Err(e);
            }
        }
    }
    Ok(done)
}

/// Inside `BEGIN`: the version's row, its SQL and `COMMIT`; false (rolled back) when another
/// instance holds the row.
async fn one(client: &Client, m: &Migration) -> Result<bool, MigrationError> {
    match client.execute("INSERT INTO signet_schema(version, name) VALUES ($1, $2)", &[&m.version, &m.name]).await {
        Ok(_) => {}
        Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
            client.batch_execute("ROLLBACK").await.map_err(db)?;
            return Ok(false);
        }
        Err(e) => return Err(db(e)),
    }
    client.batch_execute(m.sql).await.map_err(db)?;
    client.batch_execute("COMMIT").await.map_err(db)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_counts_up_without_gaps_or_repeats() {
        let versions: Vec<i32> = REGISTRY.iter().map(|(v, _)| *v).collect();
        assert_eq!(versions, (1..=newest()).collect::<Vec<_>>());
        assert_eq!(missing(&[1, 2, 3, 5]), (4..=newest()).filter(|v| *v != 5).collect::<Vec<_>>());
        assert!(missing(&versions).is_empty());
    }
}
