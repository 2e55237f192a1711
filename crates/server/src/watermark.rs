//! What this instance has served of each log, kept outside the logs' storage: a restored
//! database never forks a log silently.
//!
//! A database restored from a dump, a disk snapshot, or a replica that lost its last writes
//! holds each log as it was earlier, under the same keys. Appending to it would give the
//! indices acknowledged since then a second history. Nothing in the database says so (a
//! dump carries no mark), so each instance remembers, in its data dir, the newest durable
//! checkpoint it has seen of each log that takes appends: its size and root
//! ([`FILE`], written at most once a second and at shutdown). At start, a log whose storage
//! is behind that mark, or holds another root at its size, is refused appends with the
//! reason and the way out (`signet restore`, which continues each log in a new shard);
//! reads go on. A log is known by its origin and key, so a new shard is a new log.
//!
//! The mark trails the log by up to a second: entries acknowledged in the last second
//! before a backup are not covered by it. Witnesses cover what it misses, where configured
//! ([`crate::witnessing`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use signet_log::Log;

/// In the data dir.
pub const FILE: &str = "log-watermarks.json";
/// How often the marks are brought up to date.
const EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Watermarks {
    /// By [`identity`]: the newest durable checkpoint seen.
    logs: BTreeMap<String, Mark>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Mark {
    size: u64,
    /// Hex.
    root: String,
    /// Unix seconds when this instance first saw the size.
    seen_at: i64,
}

/// A log as clients know it: its origin and its key.
fn identity(log: &Log) -> String {
    let key = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, log.key().spki_der());
    format!("{} {}", log.origin(), hex::encode(&key.as_ref()[..8]))
}

pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE)
}

/// The data dir's marks; none if it has none yet. A file that does not parse is an error,
/// never taken for "no marks".
pub fn read(data_dir: &Path) -> Result<Watermarks, WatermarkError> {
    let path = path(data_dir);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| WatermarkError::Json { path, source }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Watermarks::default()),
        Err(source) => Err(WatermarkError::Io { path, source }),
    }
}

/// What reading the data dir's watermarks fails with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WatermarkError {
    #[error("{}: {source}", .path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: {source}; expected the marks signet writes there (move it away only if this data dir never served these logs)", .path.display())]
    Json { path: PathBuf, source: serde_json::Error },
}

impl Watermarks {
    /// Why `log` must take no appends, if its storage is behind what this instance served of
    /// it, or holds another tree at that size. Reads storage (the root at the mark's size).
    pub fn check(&self, log: &Log, what: &str, data_dir: &Path) -> Option<String> {
        let mark = self.logs.get(&identity(log))?;
        let stored = log.durable_size();
        let way_out = format!(
            "Reads go on. Stop every instance and run `signet restore --data-dir {}` with the same --storage (--force where the logs are in \
             the data dir) to continue each log in a new shard (docs/scaling.md, \"Restoring a backup\")",
            data_dir.display()
        );
        if stored < mark.size {
            return Some(format!(
                "the {what} log's storage holds {stored} entries, but this instance served it at {} entries (unix time {}, {}): the storage was \
                 restored from a backup or lost committed writes, and appending would give indices {stored}..{} a second history. {way_out}",
                mark.size,
                mark.seen_at,
                path(data_dir).display(),
                mark.size - 1
            ));
        }
        match log.root(mark.size) {
            Ok(root) if hex::encode(root) == mark.root => None,
            Ok(root) => Some(format!(
                "the {what} log's storage holds a tree of {} entries with root {}, but this instance served root {} at that size ({}): \
                 the log has two histories. {way_out}",
                mark.size,
                hex::encode(root),
                mark.root,
                path(data_dir).display()
            )),
            // Not known to be a restore: the next start checks again.
            Err(e) => {
                tracing::warn!(log = what, error = %e, "cannot check the log against this instance's watermark");
                None
            }
        }
    }

    /// Moves each log's mark up to its head; whether any moved. A mark never moves back,
    /// and never moves on a log whose appends are refused.
    fn advance(&mut self, logs: &[Log], now: i64) -> bool {
        let mut moved = false;
        for log in logs.iter().filter(|l| l.appends_refused().is_none()) {
            let head = log.head();
            let size = head.checkpoint.size;
            let mark = self.logs.entry(identity(log)).or_insert_with(|| Mark { size: 0, root: String::new(), seen_at: 0 });
            if size > mark.size || mark.root.is_empty() {
                *mark = Mark { size, root: hex::encode(head.checkpoint.root_hash), seen_at: now };
                moved = true;
            }
        }
        moved
    }

    fn write(&self, data_dir: &Path) -> std::io::Result<()> {
        let json = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        signet_core::files::write_atomic(&path(data_dir), &json, 0o600)
    }
}

/// Keeps the marks of the logs `logs()` names (read anew each time: a rotation changes
/// them) up to date, until the task is aborted; [`Keeper::write_now`] at shutdown.
pub struct Keeper {
    data_dir: PathBuf,
    marks: parking_lot::Mutex<Watermarks>,
}

impl Keeper {
    pub fn new(data_dir: PathBuf, marks: Watermarks) -> std::sync::Arc<Keeper> {
        std::sync::Arc::new(Keeper { data_dir, marks: parking_lot::Mutex::new(marks) })
    }

    pub async fn run(self: std::sync::Arc<Self>, logs: impl Fn() -> Vec<Log> + Send + 'static) {
        let mut failing = false;
        loop {
            tokio::time::sleep(EVERY).await;
            let me = self.clone();
            let logs = logs();
            let written = tokio::task::spawn_blocking(move || me.write_now(&logs)).await;
            match written {
                Ok(Ok(())) if failing => {
                    failing = false;
                    tracing::info!("writing the log watermarks again");
                }
                Ok(Ok(())) => {}
                Ok(Err(e)) if !failing => {
                    failing = true;
                    tracing::error!(path = %path(&self.data_dir).display(), error = %e, "cannot write the log watermarks; a restore of the storage may go unnoticed until this is fixed");
                }
                _ => {}
            }
        }
    }

    /// Advances the marks to `logs`' heads and writes them, if any moved.
    pub fn write_now(&self, logs: &[Log]) -> std::io::Result<()> {
        let mut marks = self.marks.lock();
        // Kept only once written: a failed write is tried again the next time.
        let mut next = marks.clone();
        if next.advance(logs, crate::shards::now()) {
            next.write(&self.data_dir)?;
            *marks = next;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    async fn log(dir: &Path, entries: u32) -> Log {
        let storage = Arc::new(signet_log::storage::SqliteStorage::open(&dir.join("db.sqlite")).unwrap());
        let cfg = signet_log::LogConfig {
            id: 1,
            origin: "test.example/log".into(),
            key_name: "test.example".into(),
            key: Arc::new(signet_keys::Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).unwrap()),
            batch: signet_log::BatchPolicy { max_entries: 16, max_delay: Duration::from_millis(1) },
            stamper: None,
            max_pending: 0,
            tile_cache: 8,
            entry_cache: 0,
            note_key: None,
            genesis: None,
        };
        let log = Log::open(cfg, storage).await.unwrap();
        for i in 0..entries {
            log.append(i.to_le_bytes().to_vec(), None).await.unwrap();
        }
        log
    }

    #[tokio::test]
    async fn a_mark_moves_only_forward_and_finds_a_log_behind_it() {
        let dir = tempfile::tempdir().unwrap();
        let log = log(dir.path(), 5).await;
        let keeper = Keeper::new(dir.path().to_path_buf(), read(dir.path()).unwrap());
        keeper.write_now(std::slice::from_ref(&log)).unwrap();
        let marks = read(dir.path()).unwrap();
        assert_eq!(marks.logs.values().map(|m| m.size).collect::<Vec<_>>(), [5]);
        assert_eq!(marks.check(&log, "test", dir.path()), None, "a log at its mark is no restore");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(path(dir.path())).unwrap().permissions().mode() & 0o777, 0o600);

        // The same log (origin and key) with fewer entries: what a restored database shows.
        let mut ahead = marks.clone();
        ahead.logs.values_mut().for_each(|m| m.size = 9);
        let why = ahead.check(&log, "test", dir.path()).unwrap();
        assert!(why.contains("holds 5 entries") && why.contains("indices 5..8"), "{why}");
        // ... and never moves the mark back.
        assert!(!ahead.clone().advance(std::slice::from_ref(&log), 0));
        // The same size with another root: two histories.
        let mut other = marks.clone();
        other.logs.values_mut().for_each(|m| m.root = hex::encode([7u8; 32]));
        assert!(other.check(&log, "test", dir.path()).unwrap().contains("two histories"));
        // A refused log's mark stays where it is.
        log.append(b"six".to_vec(), None).await.unwrap();
        log.refuse_appends("refused in this test");
        assert!(!marks.clone().advance(std::slice::from_ref(&log), 0));
    }

    #[test]
    fn marks_that_do_not_parse_are_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), Watermarks::default());
        std::fs::write(path(dir.path()), "{").unwrap();
        assert!(read(dir.path()).unwrap_err().to_string().contains("expected the marks signet writes"));
    }
}
