//! `signet backup`: a consistent copy of a data dir, taken while the server runs.
//!
//! Each SQLite database is copied with SQLite's online backup API, which reads one
//! consistent snapshot while the server goes on committing; a plain file copy of a database
//! in WAL mode could catch a commit half-copied. Every other file (keys, certificates, the
//! published URL) is copied as it is, with its mode. The copy is made in a sibling directory
//! and renamed into place at the end, so a backup that fails leaves nothing that looks whole.
//!
//! A backup is marked as one ([`crate::restore`]): served as a data dir, it answers reads and
//! refuses appends until `signet restore --data-dir <backup>` continues each log in a new shard.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("{0} does not exist or is not a directory; expected the data dir of a signet instance")]
    NoDataDir(String),
    #[error("{0} already exists; a backup goes to a new directory, so that no older backup is overwritten")]
    Exists(String),
    #[error("{path}: {source}")]
    Io { path: String, source: io::Error },
    #[error("{path}: SQLite backup failed: {source}")]
    Sqlite { path: String, source: rusqlite::Error },
}

/// What a backup copied.
#[derive(Debug, Default)]
pub struct Report {
    pub databases: Vec<PathBuf>,
    pub files: usize,
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> BackupError + '_ {
    move |source| BackupError::Io { path: path.display().to_string(), source }
}

/// Files that belong to a running server, not to its state: its lock, and the WAL and
/// shared-memory files of the databases, whose contents the backup API already includes.
fn skipped(name: &str) -> bool {
    // A backup of a backup that was never restored gets its own mark, not the old one.
    name == crate::restore::MARKER
        || name == "signet.lock" || name.ends_with("-wal") || name.ends_with("-shm") || name.ends_with("-journal")
}

fn is_sqlite(path: &Path) -> bool {
    let mut magic = [0u8; 16];
    fs::File::open(path).and_then(|mut f| io::Read::read_exact(&mut f, &mut magic)).is_ok() && &magic == b"SQLite format 3\0"
}

/// Copies `data_dir` to `out`, which must not exist yet.
pub fn backup(data_dir: &Path, out: &Path) -> Result<Report, BackupError> {
    if !data_dir.is_dir() {
        return Err(BackupError::NoDataDir(data_dir.display().to_string()));
    }
    if out.exists() {
        return Err(BackupError::Exists(out.display().to_string()));
    }
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "backup".into());
    let partial = out.with_file_name(format!(".{name}.partial-{}", std::process::id()));
    let mut report = Report::default();
    // When the copy began: the original may have acknowledged entries from then on.
    let taken_at = crate::shards::now();
    let result = copy_dir(data_dir, &partial, &mut report).and_then(|()| {
        // The copy knows it is one, and refuses appends until `signet restore` (crate::restore).
        crate::restore::mark(&partial, data_dir, taken_at).map_err(io_err(&partial))?;
        fs::rename(&partial, out).map_err(io_err(out))?;
        if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::File::open(parent).and_then(|d| d.sync_all()).map_err(io_err(parent))?;
        }
        Ok(())
    });
    if result.is_err() {
        let _ = fs::remove_dir_all(&partial);
    }
    result.map(|()| report)
}

fn copy_dir(from: &Path, to: &Path, report: &mut Report) -> Result<(), BackupError> {
    signet_core::files::ensure_private_dir(to).map_err(io_err(to))?;
    let mut entries: Vec<_> = fs::read_dir(from).map_err(io_err(from))?.collect::<Result<_, _>>().map_err(io_err(from))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().map_err(io_err(&src))?;
        if kind.is_dir() {
            copy_dir(&src, &dst, report)?;
        } else if kind.is_file() && !skipped(&name) {
            if is_sqlite(&src) {
                backup_database(&src, &dst)?;
                report.databases.push(dst.clone());
            } else {
                fs::copy(&src, &dst).map_err(io_err(&src))?;
                report.files += 1;
            }
            // Everything in a data dir is private (issue 17); so is the copy, whatever the source's mode.
            fs::set_permissions(&dst, fs::Permissions::from_mode(0o600)).map_err(io_err(&dst))?;
            fs::File::open(&dst).and_then(|f| f.sync_all()).map_err(io_err(&dst))?;
        }
    }
    fs::File::open(to).and_then(|d| d.sync_all()).map_err(io_err(to))
}

/// One database, through SQLite's online backup API: a consistent snapshot of a database that
/// another process is writing.
fn backup_database(src: &Path, dst: &Path) -> Result<(), BackupError> {
    let sqlite = |path: &Path| {
        let path = path.display().to_string();
        move |source| BackupError::Sqlite { path, source }
    };
    let from = signet_db::sqlite::open_inspect(src).map_err(|e| sqlite(src)(e.source))?;
    let mut to = rusqlite::Connection::open(dst).map_err(sqlite(dst))?;
    {
        use rusqlite::backup::StepResult;
        let b = rusqlite::backup::Backup::new(&from, &mut to).map_err(sqlite(dst))?;
        // All pages in one step (-1): a copy made in several steps starts over whenever the
        // source commits between two of them, which a busy log does every few milliseconds; one
        // step holds one read snapshot for the whole copy instead. Busy or locked: try again,
        // for a bounded time.
        let mut tries = 0;
        loop {
            match b.step(-1).map_err(sqlite(src))? {
                StepResult::Done => break,
                StepResult::More => {}
                _ if tries < 500 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                _ => {
                    return Err(BackupError::Io {
                        path: src.display().to_string(),
                        source: io::Error::other("the database stayed busy for 5 s; try again"),
                    })
                }
            }
        }
    }
    // The copy is a plain database file; make sure no WAL beside it holds part of it.
    to.execute_batch("PRAGMA journal_mode=DELETE;").map_err(sqlite(dst))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backup_goes_to_a_new_directory_and_skips_runtime_files() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        fs::create_dir_all(data.join("keys")).unwrap();
        fs::write(data.join("keys/k.pem"), "key").unwrap();
        fs::write(data.join("signet.lock"), "123").unwrap();
        fs::write(data.join("x.sqlite-wal"), "wal").unwrap();
        let db = rusqlite::Connection::open(data.join("x.sqlite")).unwrap();
        db.execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE t(v); INSERT INTO t VALUES (42);").unwrap();

        let out = dir.path().join("b1");
        let report = backup(&data, &out).unwrap();
        assert_eq!((report.databases.len(), report.files), (1, 1));
        assert_eq!(fs::read_to_string(out.join("keys/k.pem")).unwrap(), "key");
        assert!(!out.join("signet.lock").exists() && !out.join("x.sqlite-wal").exists());
        // The copy knows it is a backup, and of what.
        let mark = crate::restore::marker(&out).unwrap().expect("the copy is marked");
        assert_eq!(mark.source, data.display().to_string());
        // A copy of that copy gets a mark of its own, not the first one's.
        let elsewhere = tempfile::tempdir().unwrap();
        let copy_of_copy = elsewhere.path().join("again");
        backup(&out, &copy_of_copy).unwrap();
        assert_eq!(crate::restore::marker(&copy_of_copy).unwrap().unwrap().source, out.display().to_string());
        let copy = rusqlite::Connection::open(out.join("x.sqlite")).unwrap();
        assert_eq!(copy.query_row("SELECT v FROM t", [], |r| r.get::<_, i64>(0)).unwrap(), 42);
        assert_eq!(fs::metadata(out.join("keys/k.pem")).unwrap().permissions().mode() & 0o777, 0o600);

        assert!(matches!(backup(&data, &out), Err(BackupError::Exists(_))));
        assert!(matches!(backup(&dir.path().join("nope"), &dir.path().join("b2")), Err(BackupError::NoDataDir(_))));
        // Nothing half-made is left behind by a refused backup.
        let leftovers: Vec<_> = fs::read_dir(dir.path()).unwrap().filter_map(|e| e.ok()).map(|e| e.file_name()).collect();
        assert_eq!(leftovers.len(), 2, "{leftovers:?}");
    }
}
