//! The TUF repository that every instance on one database serves (`signet_server::tuf`):
//! its published files, one row each, written only by the sequencer-lease holder.
//!
//! A write is one transaction, fenced by the lease's epoch like a log commit, and it moves
//! `tuf_meta.generation` from the one the writer read (a compare-and-swap), so a reader never
//! sees a timestamp naming a snapshot that is not stored yet, and a stale writer writes
//! nothing. A versioned file, once stored, never changes: only `timestamp.json` and
//! `root.json` (the copy of the newest root) are replaced.

use std::future::Future;

use crate::storage::StorageError;
use super::fence::{check_fence, Lease};
use super::commit::COMMIT_DEADLINE;
use super::pool::{classify, writer};
use super::PostgresStorage;

/// One published file: its name under `/tuf/` and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TufFile {
    pub name: String,
    pub bytes: Vec<u8>,
}

/// Names a write may replace; every other name is a version, fixed once published.
fn replaceable(name: &str) -> bool {
    name == "timestamp.json" || name == "root.json"
}

impl PostgresStorage {
    /// The generation of the stored repository: 0 until the first write, one more per write.
    /// One primary-key read, cheap enough to poll every second.
    pub fn tuf_generation(&self) -> impl Future<Output = Result<i64, StorageError>> + Send + 'static {
        self.read_future(|c| async move { c.client.query_one("SELECT generation FROM tuf_meta WHERE id = 1", &[]).await?.try_get(0) })
    }

    /// The files written after generation `after` (every file, with 0), and the generation
    /// they bring a reader to. One statement, so one snapshot: the files and the generation
    /// agree even while a write commits.
    pub fn tuf_files_since(&self, after: i64) -> impl Future<Output = Result<(i64, Vec<TufFile>), StorageError>> + Send + 'static {
        let rows = self.read_future(move |c| async move {
            c.client
                .query(
                    "SELECT m.generation, f.name, f.bytes FROM tuf_meta m LEFT JOIN tuf_files f ON f.generation > $1 WHERE m.id = 1",
                    &[&after],
                )
                .await
        });
        async move { files_of(&rows.await?) }
    }

    /// Stores `files` as one new state of the repository, in one transaction, and returns the
    /// new generation. Only the sequencer-lease holder writes: the lease's epoch is checked
    /// under its row lock, as a log commit's is ([`StorageError::Fenced`] otherwise, also when
    /// this instance never held it). `expected` is the generation the writer brought its copy
    /// up to; if another write landed since, nothing is written ([`StorageError::Fenced`]).
    /// A versioned file that is stored with other bytes is refused ([`StorageError::Corrupt`]):
    /// a version, once published, is never reused.
    pub fn write_tuf_files(&self, expected: i64, files: &[TufFile]) -> impl Future<Output = Result<i64, StorageError>> + Send + 'static {
        let lease = self.fence.lock().clone();
        let files = files.to_vec();
        let task = lease.map(|lease| {
            self.spawn(Some(COMMIT_DEADLINE), move |pool| async move {
                let mut slot = pool.writer.lock().await;
                let client = writer(&pool, &mut slot).await?;
                write(client, &lease, expected, &files).await
            })
        });
        async move {
            let Some(task) = task else {
                return Err(StorageError::Fenced("this instance does not hold the sequencer lease, and only its holder publishes TUF metadata".into()));
            };
            task.await.map_err(|e| StorageError::Backend(format!("storing the TUF repository: {e}")))?
        }
    }
}

/// The generation and the files of one read of [`PostgresStorage::tuf_files_since`].
fn files_of(rows: &[tokio_postgres::Row]) -> Result<(i64, Vec<TufFile>), StorageError> {
    let mut generation = None;
    let mut files = Vec::new();
    for r in rows {
        generation = Some(r.try_get::<_, i64>(0).map_err(classify)?);
        let (name, bytes): (Option<String>, Option<Vec<u8>>) = (r.try_get(1).map_err(classify)?, r.try_get(2).map_err(classify)?);
        if let (Some(name), Some(bytes)) = (name, bytes) {
            files.push(TufFile { name, bytes });
        }
    }
    let generation = generation.ok_or_else(|| StorageError::Corrupt("tuf_meta has no row 1 (the schema's migration 9 makes it)".into()))?;
    Ok((generation, files))
}

async fn write(client: &mut tokio_postgres::Client, lease: &Lease, expected: i64, files: &[TufFile]) -> Result<i64, StorageError> {
    let tx = client.transaction().await.map_err(classify)?;
    check_fence(&tx, lease).await?;
    let row = tx.query_one("SELECT generation FROM tuf_meta WHERE id = 1 FOR UPDATE", &[]).await.map_err(classify)?;
    let stored: i64 = row.try_get(0).map_err(classify)?;
    if stored != expected {
        return Err(StorageError::Fenced(format!(
            "the shared TUF repository is at generation {stored}, and this write extends {expected}: another instance published meanwhile"
        )));
    }
    let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
    let held = tx.query("SELECT name, bytes FROM tuf_files WHERE name = ANY($1)", &[&names]).await.map_err(classify)?;
    for r in &held {
        let (name, bytes): (String, Vec<u8>) = (r.try_get(0).map_err(classify)?, r.try_get(1).map_err(classify)?);
        let new = files.iter().find(|f| f.name == name).map(|f| f.bytes.as_slice());
        if !replaceable(&name) && new.is_some_and(|b| b != bytes.as_slice()) {
            return Err(StorageError::Corrupt(format!(
                "TUF file {name} is already published with other bytes; a version is never reused (nothing was written)"
            )));
        }
    }
    let generation = expected + 1;
    let bytes: Vec<&[u8]> = files.iter().map(|f| f.bytes.as_slice()).collect();
    tx.execute(
        "INSERT INTO tuf_files(name, bytes, generation) SELECT n, b, $3 FROM UNNEST($1::TEXT[], $2::BYTEA[]) AS t(n, b) \
         ON CONFLICT (name) DO UPDATE SET bytes = EXCLUDED.bytes, generation = EXCLUDED.generation \
         WHERE tuf_files.bytes <> EXCLUDED.bytes",
        &[&names, &bytes, &generation],
    )
    .await
    .map_err(classify)?;
    tx.execute("UPDATE tuf_meta SET generation = $1 WHERE id = 1", &[&generation]).await.map_err(classify)?;
    tx.commit().await.map_err(classify)?;
    Ok(generation)
}
