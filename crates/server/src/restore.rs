//! A data dir that is a backup, and `signet restore`: serving a copy never forks its logs.
//!
//! A backup holds each log as it was when it was copied. The instance it was copied from may
//! have acknowledged entries after that, with their indices, under the same keys. A copy that
//! took appends as it is would give those indices other entries: a second history, which
//! every witness and monitor flags and which puts every bundle of the lost branch in doubt.
//!
//! So `signet backup` marks its copy ([`MARKER`]), and a server on a marked data dir refuses
//! every append with the reason and the way out, while reads go on (old entries stay readable
//! and provable) and `/readyz` says it is not ready for writes. `signet restore` then starts a
//! new shard of each log with a new key, offline, as `signet admin log rotate` does, and
//! replaces the mark with a record of what it did ([`RECORD`]). A restore cut short is
//! finished by running it again: the mark lists the logs already rotated.
//!
//! This covers the logs in a data dir (SQLite). On PostgreSQL the logs are in the database,
//! and a copy of a data dir is how another instance of the same logs is made, so the mark is
//! not read there; a dump of the database carries no mark of its own. There an instance
//! finds a restored database from what it served of each log ([`crate::watermark`]), and
//! `signet restore --storage postgres://…`, run by the operator with every instance
//! stopped, continues each log in a new shard without any mark (docs/scaling.md,
//! "Restoring a backup").

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::shards::{self, Kind, Rotated};

/// In a copy made by `signet backup`: when and from where.
pub const MARKER: &str = "backup.json";
/// After `signet restore`: the mark, with what the restore did.
pub const RECORD: &str = "restored.json";
/// [`Marker::source`] of a restore of the logs in PostgreSQL (a database restored from a dump).
pub const DATABASE: &str = "the logs in PostgreSQL";
/// [`Marker::source`] of a data dir restored without a mark (`signet restore --force`).
pub const UNMARKED: &str = "this data dir (restored without a backup mark)";

/// The contents of [`MARKER`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Marker {
    /// Unix seconds when the backup began.
    pub taken_at: i64,
    /// The data dir it was copied from.
    pub source: String,
    /// Logs that a restore has already moved to a new shard (a restore cut short).
    #[serde(default)]
    pub rotated: Vec<String>,
    /// Unix seconds when the restore finished; only in [`RECORD`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_at: Option<i64>,
}

impl Marker {
    /// The answer to every append while the mark is there.
    pub fn refusal(&self, data_dir: &Path) -> String {
        format!(
            "this instance serves a backup of {} taken at {} (unix seconds): the log it was copied from may have \
             acknowledged entries after that, and appending here would give their indices a second history. Reads go on. \
             Stop the server and run `signet restore --data-dir {}` to continue each log in a new shard (docs/scaling.md, \
             \"Restoring a backup\")",
            self.source,
            self.taken_at,
            data_dir.display()
        )
    }
}

/// Marks `copy` (a backup being written) as a backup of `source`.
pub fn mark(copy: &Path, source: &Path, taken_at: i64) -> std::io::Result<()> {
    let marker = Marker { taken_at, source: source.display().to_string(), rotated: Vec::new(), restored_at: None };
    write(&copy.join(MARKER), &marker)
}

fn write(path: &Path, marker: &Marker) -> std::io::Result<()> {
    let json = serde_json::to_vec_pretty(marker).map_err(std::io::Error::other)?;
    signet_core::files::write_atomic(path, &json, 0o600)
}

/// The data dir's mark, if it is an unrestored backup. A mark that does not parse is an
/// error, never taken for "not a backup".
pub fn marker(data_dir: &Path) -> Result<Option<Marker>, RestoreError> {
    let path = data_dir.join(MARKER);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|source| RestoreError::Marker { path, source }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(RestoreError::Io { path, source }),
    }
}

/// What reading a backup's mark, and `signet restore`, fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RestoreError {
    #[error("{}: {source}", .path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: {source}; expected the backup mark that `signet backup` writes", .path.display())]
    Marker { path: PathBuf, source: serde_json::Error },
    #[error("{} was restored already ({}); it takes appends", .data_dir.display(), .record.display())]
    RestoredAlready { data_dir: PathBuf, record: PathBuf },
    #[error("{} is not a backup made by `signet backup` (no backup.json); nothing to restore. If it was restored some other way (a disk snapshot), or its server refuses appends because its storage is behind what it served, run this with --force", .data_dir.display())]
    NotABackup { data_dir: PathBuf },
    #[error(transparent)]
    Storage(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Rotation(#[from] shards::ShardError),
}

/// What `signet restore` did.
#[derive(Debug)]
pub struct Report {
    pub marker: Marker,
    /// The logs moved to a new shard by this run.
    pub rotated: Vec<Rotated>,
    /// Logs that were never created in the backup, so had nothing to continue.
    pub absent: Vec<Kind>,
    pub record: PathBuf,
}

/// `signet restore`: a new shard for each log of the backup in `data_dir`, then the mark
/// becomes the record. The server must be stopped (each rotation takes the data dir's lock).
///
/// Without a mark, the operator's word makes it one: always on PostgreSQL (a database
/// restored from a dump carries no mark), and with `force` on a data dir (restored from a
/// disk snapshot, or found behind its watermarks, [`crate::watermark`]).
pub fn restore(data_dir: &Path, storage: Option<&str>, force: bool, homes: &shards::KeyHomes) -> Result<Report, RestoreError> {
    let url = signet_log::storage::StorageUrl::parse(storage, data_dir).map_err(|e| crate::config::ConfigError::Invalid(e.to_string()))?;
    let on_postgres = matches!(url, signet_log::storage::StorageUrl::Postgres(_));
    let mark_io = |path: PathBuf| move |source| RestoreError::Io { path, source };
    let marker = match marker(data_dir)? {
        Some(marker) => marker,
        // Marked first, so that a restore cut short goes on where it stopped.
        None if on_postgres || force => {
            let marker = Marker {
                taken_at: shards::now(),
                source: if on_postgres { DATABASE.into() } else { UNMARKED.into() },
                rotated: Vec::new(),
                restored_at: None,
            };
            write(&data_dir.join(MARKER), &marker).map_err(mark_io(data_dir.join(MARKER)))?;
            marker
        }
        None => {
            return Err(match data_dir.join(RECORD).exists() {
                true => RestoreError::RestoredAlready { data_dir: data_dir.to_path_buf(), record: data_dir.join(RECORD) },
                false => RestoreError::NotABackup { data_dir: data_dir.to_path_buf() },
            })
        }
    };
    let mut marker = marker;
    let (mut rotated, mut absent) = (Vec::new(), Vec::new());
    for kind in Kind::ALL {
        if marker.rotated.iter().any(|k| k == kind.cli_name()) {
            continue;
        }
        match shards::rotate_kind(data_dir, storage, kind, homes)? {
            shards::Rotation::Done(r) => rotated.push(r),
            shards::Rotation::NotCreated(_) => absent.push(kind),
        }
        marker.rotated.push(kind.cli_name().to_string());
        write(&data_dir.join(MARKER), &marker).map_err(mark_io(data_dir.join(MARKER)))?;
    }
    marker.restored_at = Some(shards::now());
    let record = data_dir.join(RECORD);
    write(&record, &marker).map_err(mark_io(record.clone()))?;
    std::fs::remove_file(data_dir.join(MARKER)).map_err(mark_io(data_dir.join(MARKER)))?;
    std::fs::File::open(data_dir).and_then(|d| d.sync_all()).map_err(mark_io(data_dir.to_path_buf()))?;
    Ok(Report { marker, rotated, absent, record })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_reads_back_and_a_bad_one_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(marker(dir.path()).unwrap().is_none());
        mark(dir.path(), Path::new("/var/lib/signet"), 1_800_000_000).unwrap();
        let m = marker(dir.path()).unwrap().unwrap();
        assert_eq!((m.taken_at, m.source.as_str()), (1_800_000_000, "/var/lib/signet"));
        let why = m.refusal(dir.path());
        assert!(why.contains("signet restore --data-dir") && why.contains("/var/lib/signet"), "{why}");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(dir.path().join(MARKER)).unwrap().permissions().mode() & 0o777, 0o600);
        std::fs::write(dir.path().join(MARKER), "{").unwrap();
        assert!(marker(dir.path()).unwrap_err().to_string().contains("expected the backup mark"));
    }

    #[test]
    fn a_data_dir_that_is_no_backup_is_not_restored() {
        let dir = tempfile::tempdir().unwrap();
        assert!(restore(dir.path(), None, false, &shards::KeyHomes::default()).unwrap_err().to_string().contains("not a backup"));
        std::fs::write(dir.path().join(RECORD), "{}").unwrap();
        assert!(restore(dir.path(), None, false, &shards::KeyHomes::default()).unwrap_err().to_string().contains("restored already"));
    }
}
