//! Retention: the chain cut into segments that can be archived and verified alone.
//!
//! The live log (`audit.sqlite`) grows by about 330 bytes a request. When it passes
//! `segment_max_bytes`, or its oldest record `segment_max_age_secs`, the records up to the
//! newest anchor are moved into a segment file of their own,
//! `audit-segments/audit-<first>-<last>.sqlite` (0600), with their anchors, and taken out of
//! the live log. A segment is cut at an anchored record only: the live log then starts
//! after that record, and keeps its anchor as its start, so that what remains still proves,
//! through the transparency log, where it begins. A segment can be moved elsewhere
//! (archived, or deleted under a retention policy) and checked alone, with
//! `signet audit verify --segment FILE`: its chain from its own start, its anchors, and its
//! start's anchor (none for the first, which starts at the genesis hash).
//!
//! The cut is written in this order: the segment file, as `<name>.partial`, a few MB per
//! synced transaction ([`copy_batches`]), renamed to its name when whole; then, in one short
//! transaction, the live log's new start (from then on, its chain is what follows it, and
//! the rows at or before it are left-overs that no reader takes); then those rows are
//! deleted a few at a time ([`collect`]). A crash before the rename leaves a partial file
//! that no reader lists and the next cut removes; one before the start moves leaves the
//! records in both, and the next cut writes the segment again; one after it leaves rows for
//! the next cut to collect.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension};

use super::place::Place;
use super::postgres::ChainDb;
use super::record::GENESIS;
use super::Anchor;
use crate::store::StoreError;

/// The segment files' directory, under the data dir.
pub const DIR: &str = "audit-segments";

/// Where a log file's chain starts: after record `seq`, whose hash was `head`. A file
/// without it starts at the beginning (seq 0, [`GENESIS`]).
pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS segment(start_seq INTEGER NOT NULL, start_head BLOB NOT NULL);";

/// When the live log is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Bytes of the live log's used pages (0: no limit).
    pub max_bytes: u64,
    /// Seconds since its oldest record (0: no limit).
    pub max_age_secs: u64,
}

/// Where the chain in a log file starts: (seq, head).
pub(super) fn start(conn: &Connection) -> rusqlite::Result<(u64, [u8; 32])> {
    let exists: Option<String> =
        conn.query_row("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'segment'", [], |r| r.get(0)).optional()?;
    if exists.is_none() {
        return Ok((0, GENESIS));
    }
    let row: Option<(i64, Vec<u8>)> =
        conn.query_row("SELECT start_seq, start_head FROM segment", [], |r| Ok((r.get(0)?, r.get(1)?))).optional()?;
    Ok(match row {
        None => (0, GENESIS),
        // A head of the wrong length can match no anchor: kept as zeros, it fails the check.
        Some((seq, head)) => (seq.max(0) as u64, <[u8; 32]>::try_from(head.as_slice()).unwrap_or([0; 32])),
    })
}

/// Whether the live chain at `place` is due to be cut under `policy`.
pub fn due(place: &Place, policy: Policy, now_ms: u64) -> Result<bool, StoreError> {
    if policy.max_bytes == 0 && policy.max_age_secs == 0 {
        return Ok(false);
    }
    let (size, oldest) = match place {
        Place::Sqlite { data_dir } => {
            let path = data_dir.join(super::FILE);
            let err = |source| StoreError::Sqlite { path: path.display().to_string(), source };
            let conn = signet_db::sqlite::open_inspect(&path)?;
            // Used pages, not the file's length: pages freed by a cut are reused, not returned.
            let pages: u64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0)).map_err(err)?;
            let free: u64 = conn.query_row("PRAGMA freelist_count", [], |r| r.get(0)).map_err(err)?;
            let page: u64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0)).map_err(err)?;
            let (start_seq, _) = start(&conn).map_err(err)?;
            let oldest: Option<Vec<u8>> = conn
                .query_row("SELECT records FROM audit WHERE last_seq > ?1 ORDER BY first_seq LIMIT 1", [start_seq as i64], |r| r.get(0))
                .optional()
                .map_err(err)?;
            (pages.saturating_sub(free) * page, oldest)
        }
        // The bytes its rows hold: PostgreSQL's pages are the database's to manage.
        Place::Postgres { db, .. } => db.size_and_oldest()?,
    };
    if policy.max_bytes > 0 && size >= policy.max_bytes {
        return Ok(true);
    }
    if policy.max_age_secs > 0 {
        let oldest = oldest.and_then(|records| {
            let line = records.split(|b| *b == b'\n').next()?.to_vec();
            serde_json::from_slice::<super::Record>(&line).ok().map(|r| r.time_ms)
        });
        if let Some(t) = oldest {
            return Ok(now_ms.saturating_sub(t) >= policy.max_age_secs.saturating_mul(1000));
        }
    }
    Ok(false)
}

/// Moves the records up to `at` (an anchor just stored with the live chain) into a segment
/// file, and starts the live chain after them. Its path, or `None` when no record is that old.
pub fn cut(place: &Place, at: &Anchor) -> Result<Option<PathBuf>, StoreError> {
    match place {
        Place::Sqlite { data_dir } => cut_file(data_dir, at),
        Place::Postgres { data_dir, db, .. } => cut_db(data_dir, db, at),
    }
}

/// A segment file being written: `<name>.partial` (0600) until it is whole and synced, then
/// renamed to its name, so that a crash mid-copy leaves no file under a segment's name.
struct NewSegment {
    file: PathBuf,
    partial: PathBuf,
    finished: bool,
}

impl NewSegment {
    /// A fresh, empty partial file for records `first..=last`. Partial files left by a cut
    /// that crashed are removed first.
    fn create(data_dir: &Path, first: u64, last: u64) -> Result<Self, StoreError> {
        let dir = data_dir.join(DIR);
        signet_core::files::ensure_private_dir(&dir).map_err(io_err(&dir))?;
        for entry in std::fs::read_dir(&dir).map_err(io_err(&dir))? {
            let path = entry.map_err(io_err(&dir))?.path();
            if path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("audit-") && n.ends_with(PARTIAL)) {
                remove_if_present(&path)?;
            }
        }
        let file = dir.join(format!("audit-{first:012}-{last:012}.sqlite"));
        // A rollback journal left beside a segment's name (by a cut that wrote the segment
        // in place and crashed) would be taken as hot and rolled into the file renamed there.
        remove_if_present(&file.with_extension("sqlite-journal"))?;
        let partial = dir.join(format!("audit-{first:012}-{last:012}{PARTIAL}"));
        signet_core::files::write_atomic(&partial, &[], 0o600).map_err(io_err(&partial))?;
        Ok(NewSegment { file, partial, finished: false })
    }

    /// The partial file's path, as SQLite takes it.
    fn partial_text(&self) -> Result<&str, StoreError> {
        self.partial.to_str().ok_or_else(|| StoreError::Io {
            path: self.partial.display().to_string(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path is not UTF-8"),
        })
    }

    /// Renames the whole, synced file to its name, and syncs the directory so the rename holds.
    fn finish(mut self) -> Result<PathBuf, StoreError> {
        std::fs::rename(&self.partial, &self.file).map_err(io_err(&self.file))?;
        self.finished = true;
        let dir = self.file.parent().unwrap_or(Path::new("."));
        std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io_err(dir))?;
        Ok(std::mem::take(&mut self.file))
    }
}

impl Drop for NewSegment {
    fn drop(&mut self) {
        if !self.finished {
            // A failed cut's partial file; the next cut would remove it too.
            let _ = std::fs::remove_file(&self.partial);
        }
    }
}

/// The suffix of a segment file still being written.
const PARTIAL: &str = ".sqlite.partial";

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.display().to_string();
    move |source| StoreError::Io { path, source }
}

fn remove_if_present(path: &Path) -> Result<(), StoreError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_err(path)(e)),
        _ => Ok(()),
    }
}

/// Opens a segment's file for writing without a rollback journal: until it is renamed, a
/// crash leaves nothing to roll back, only a partial file to remove.
fn without_journal(conn: &Connection, schema: &str) -> rusqlite::Result<()> {
    conn.query_row(&format!("PRAGMA {schema}.journal_mode = OFF"), [], |r| r.get::<_, String>(0)).map(drop)
}

/// The tables of a segment file, under `schema` (`main`, or an attached name).
fn segment_tables(schema: &str) -> String {
    format!(
        "PRAGMA {schema}.synchronous = FULL; \
         CREATE TABLE {schema}.audit(first_seq INTEGER PRIMARY KEY, last_seq INTEGER NOT NULL, records BLOB NOT NULL, hashes BLOB NOT NULL); \
         {anchors}; {segment}",
        anchors = super::anchor::SCHEMA.trim_end_matches(';').replace("EXISTS anchors", &format!("EXISTS {schema}.anchors")),
        segment = SCHEMA.trim_end_matches(';').replace("EXISTS segment", &format!("EXISTS {schema}.segment")),
    )
}

/// The cut of a chain in PostgreSQL: its rows up to `at` copied into a segment file and
/// synced, then deleted from the database with the start moved, in one transaction.
fn cut_db(data_dir: &Path, db: &ChainDb, at: &Anchor) -> Result<Option<PathBuf>, StoreError> {
    if db.anchors(at.seq)?.last() != Some(at) {
        return Err(StoreError::Corrupt {
            path: format!("audit chain {:?} in PostgreSQL", db.chain()),
            what: format!("a cut at record {} needs that record's anchor in the chain, and it is not there", at.seq),
        });
    }
    let (start_seq, start_head) = db.start()?;
    if at.seq <= start_seq {
        return Ok(None);
    }
    let segment = NewSegment::create(data_dir, start_seq + 1, at.seq)?;
    let partial = segment.partial.clone();
    let err = |source| StoreError::Sqlite { path: partial.display().to_string(), source };
    let mut conn = Connection::open(&partial).map_err(err)?;
    without_journal(&conn, "main").map_err(err)?;
    conn.execute_batch(&segment_tables("main")).map_err(err)?;
    // A page of batches per synced transaction, as for a live log's file (see COPY_BYTES).
    let mut after = start_seq;
    loop {
        let page = db.batches_after(after, at.seq, 256)?;
        let Some(last) = page.last() else { break };
        after = last.first;
        let tx = conn.transaction().map_err(err)?;
        for b in &page {
            tx.execute(
                "INSERT INTO audit(first_seq, last_seq, records, hashes) VALUES (?1, ?2, ?3, ?4)",
                params![b.first as i64, b.last as i64, b.records, b.hashes],
            )
            .map_err(err)?;
        }
        tx.commit().map_err(err)?;
        std::thread::sleep(PAUSE);
    }
    let tx = conn.transaction().map_err(err)?;
    for a in db.anchors(at.seq)? {
        tx.execute(
            "INSERT INTO anchors(seq, head, log_index, entry) VALUES (?1, ?2, ?3, ?4)",
            params![a.seq as i64, a.head.as_slice(), a.log_index as i64, a.entry],
        )
        .map_err(err)?;
    }
    if start_seq > 0 {
        tx.execute("INSERT INTO segment(start_seq, start_head) VALUES (?1, ?2)", params![start_seq as i64, start_head.as_slice()])
            .map_err(err)?;
    }
    tx.commit().map_err(err)?;
    drop(conn);
    let file = segment.finish()?;
    // Only now that the segment is on disk do its records leave the database.
    db.cut(at)?;
    Ok(Some(file))
}

/// The cut of `audit.sqlite`, through an attached segment file.
fn cut_file(data_dir: &Path, at: &Anchor) -> Result<Option<PathBuf>, StoreError> {
    cut_file_in_chunks(data_dir, at, COPY_BYTES, || std::thread::sleep(PAUSE))
}

/// [`cut_file`], copying `chunk` bytes per transaction and calling `between` after each.
fn cut_file_in_chunks(data_dir: &Path, at: &Anchor, chunk: u64, between: impl FnMut()) -> Result<Option<PathBuf>, StoreError> {
    let path = data_dir.join(super::FILE);
    let err = |source| StoreError::Sqlite { path: path.display().to_string(), source };
    let conn = signet_db::sqlite::open_beside(&path)?;
    conn.execute_batch(SCHEMA).map_err(err)?;
    let (start_seq, _) = start(&conn).map_err(err)?;
    // What a cut that crashed after moving the start left behind.
    collect(&conn, start_seq).map_err(err)?;
    let stored: Option<Vec<u8>> =
        conn.query_row("SELECT head FROM anchors WHERE seq = ?1", [at.seq as i64], |r| r.get(0)).optional().map_err(err)?;
    if stored.as_deref() != Some(at.head.as_slice()) {
        return Err(StoreError::Corrupt {
            path: path.display().to_string(),
            what: format!("a cut at record {} needs that record's anchor in the log, and it is not there", at.seq),
        });
    }
    if at.seq <= start_seq {
        return Ok(None);
    }
    let segment = NewSegment::create(data_dir, start_seq + 1, at.seq)?;
    conn.execute("ATTACH DATABASE ?1 AS seg", [segment.partial_text()?]).map_err(err)?;
    let copied = (|| -> rusqlite::Result<()> {
        without_journal(&conn, "seg")?;
        conn.execute_batch(&segment_tables("seg"))?;
        copy_batches(&conn, start_seq, at.seq, chunk, between)?;
        let tx = conn.unchecked_transaction()?;
        tx.execute("INSERT INTO seg.anchors SELECT * FROM main.anchors WHERE seq <= ?1", [at.seq as i64])?;
        tx.execute("INSERT INTO seg.segment SELECT * FROM main.segment", [])?;
        tx.commit()
    })();
    let detached = conn.execute("DETACH DATABASE seg", []);
    copied.map_err(|source| StoreError::Sqlite { path: segment.partial.display().to_string(), source })?;
    detached.map_err(err)?;
    let file = segment.finish()?;
    // Only now that the segment is on disk does the live log start after it.
    let tx = conn.unchecked_transaction().map_err(err)?;
    tx.execute("DELETE FROM anchors WHERE seq < ?1", [at.seq as i64]).map_err(err)?;
    tx.execute("DELETE FROM segment", []).map_err(err)?;
    tx.execute("INSERT INTO segment(start_seq, start_head) VALUES (?1, ?2)", params![at.seq as i64, at.head.as_slice()]).map_err(err)?;
    tx.commit().map_err(err)?;
    collect(&conn, at.seq).map_err(err)?;
    Ok(Some(file))
}

/// Bytes of batches copied into a segment per (synced) transaction. Copied in one, a large segment
/// goes to disk in one fsync, and the closed-mode writer's WAL syncs queue behind its writeback:
/// small copies keep the requests' tail latency (figures: docs/performance.md, "The measurements
/// behind the code's shape").
const COPY_BYTES: u64 = 2 << 20;
/// Rows deleted per transaction by [`collect`]: a batch each, up to about 70 KB under load.
const COLLECT_ROWS: i64 = 8;
/// The pause between two of a cut's transactions, in which the writer commits.
const PAUSE: std::time::Duration = std::time::Duration::from_millis(3);

/// Copies the live log's batches after `start`, up to `at`, into the attached `seg`, about
/// `chunk` bytes per transaction (each synced: `seg` has `synchronous = FULL`), and calls
/// `between` after each. The copy only reads `main`, so the writer goes on meanwhile.
fn copy_batches(conn: &Connection, start: u64, at: u64, chunk: u64, mut between: impl FnMut()) -> rusqlite::Result<()> {
    let (start, at) = (start as i64, at as i64);
    let mut after = -1i64;
    loop {
        // The last batch of the next chunk: length() reads a blob's size, not its bytes.
        let upto = {
            let mut sizes = conn.prepare_cached(
                "SELECT first_seq, length(records) + length(hashes) FROM main.audit \
                 WHERE first_seq > ?1 AND first_seq <= ?3 AND last_seq > ?2 AND last_seq <= ?3 ORDER BY first_seq",
            )?;
            let mut rows = sizes.query(params![after, start, at])?;
            let (mut upto, mut bytes) = (None, 0u64);
            while let Some(row) = rows.next()? {
                upto = Some(row.get::<_, i64>(0)?);
                bytes += row.get::<_, i64>(1)?.max(0) as u64;
                if bytes >= chunk {
                    break;
                }
            }
            upto
        };
        let Some(upto) = upto else { return Ok(()) };
        conn.execute(
            "INSERT INTO seg.audit SELECT * FROM main.audit \
             WHERE first_seq > ?1 AND first_seq <= ?4 AND last_seq > ?2 AND last_seq <= ?3",
            params![after, start, at, upto],
        )?;
        after = upto;
        between();
    }
}

/// Deletes the rows at or before the live log's start (`start`), a few per transaction.
/// Deleting a whole segment's rows in one transaction held the write lock while SQLite freed
/// every page of them, and every closed-mode answer waited behind it: about 0.57 s for a
/// 256 MiB segment here (the default), against about 1 ms per transaction of 8 rows.
fn collect(conn: &Connection, start: u64) -> rusqlite::Result<()> {
    loop {
        let deleted = conn.execute(
            // Bounded by the key: without `first_seq <= ?1` the last, empty round scanned the
            // whole table, with the write lock held.
            "DELETE FROM audit WHERE first_seq IN \
             (SELECT first_seq FROM audit WHERE first_seq <= ?1 AND last_seq <= ?1 ORDER BY first_seq LIMIT ?2)",
            params![start as i64, COLLECT_ROWS],
        )?;
        if deleted == 0 {
            return Ok(());
        }
        std::thread::sleep(PAUSE);
    }
}

/// The segment files under `data_dir`, oldest first.
pub fn list(data_dir: &Path) -> Result<Vec<PathBuf>, StoreError> {
    let dir = data_dir.join(DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(StoreError::Io { path: dir.display().to_string(), source }),
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("audit-") && n.ends_with(".sqlite")))
        .collect();
    // Zero-padded first seqs: the names sort in chain order.
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::super::chain::{now_ms, AuditLog};
    use super::super::verify::tests::entry;
    use super::super::verify::{verify, verify_all, verify_file, VerifyError};
    use super::super::{anchor, FILE};
    use super::*;
    use crate::config::AuditMode;

    /// Writes `n` records to the log and anchors its head (a stand-in entry: the chain's
    /// checks do not read it; `signet audit verify` checks entries against the log).
    fn write_and_anchor(dir: &Path, log: &AuditLog, n: usize) -> Anchor {
        for i in 0..n {
            log.record(entry(&format!("/r/{i}"), 200)).unwrap();
        }
        log.flush();
        let (seq, head) = log.head();
        let a = Anchor { seq, head, log_index: seq, entry: "{}".into() };
        anchor::store(&Place::sqlite(dir), &a).unwrap();
        a
    }

    #[test]
    fn a_cut_moves_records_into_a_segment_and_each_file_verifies_alone() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(dir.path(), AuditMode::Closed).unwrap();
        let first = write_and_anchor(dir.path(), &log, 30);
        let seg1 = cut(&Place::sqlite(dir.path()), &first).unwrap().expect("a segment");
        assert_eq!(seg1.file_name().unwrap(), "audit-000000000001-000000000030.sqlite");
        // The writer goes on after the cut, in the same live log.
        let second = write_and_anchor(dir.path(), &log, 20);
        log.record(entry("/unanchored", 200)).unwrap();
        log.flush();
        let seg2 = cut(&Place::sqlite(dir.path()), &second).unwrap().expect("a second segment");
        assert_eq!(seg2.file_name().unwrap(), "audit-000000000031-000000000050.sqlite");
        assert_eq!(cut(&Place::sqlite(dir.path()), &second).unwrap(), None, "nothing older than the start is left");

        let one = verify_file(&seg1).unwrap();
        assert_eq!((one.start, one.records, one.anchors.len(), one.unanchored()), (0, 30, 1, 0));
        let two = verify_file(&seg2).unwrap();
        assert_eq!((two.start, two.records, two.anchors.len(), two.unanchored()), (30, 50, 2, 0), "its start anchor and its end");
        let live = verify(&Place::sqlite(dir.path())).unwrap();
        assert_eq!((live.start, live.records, live.anchors.len(), live.unanchored()), (50, 51, 1, 1));
        assert_eq!(verify_all(&Place::sqlite(dir.path())).unwrap().len(), 3);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&seg1).unwrap().permissions().mode() & 0o777, 0o600);
        }

        // Archived elsewhere: the rest still verifies, from its anchored start.
        let archive = tempfile::tempdir().unwrap();
        std::fs::rename(&seg1, archive.path().join("old.sqlite")).unwrap();
        let rest = verify_all(&Place::sqlite(dir.path())).unwrap();
        assert_eq!(rest.first().map(|(_, v)| v.start), Some(30));
        assert_eq!(verify_file(&archive.path().join("old.sqlite")).unwrap().records, 30);

        // A reopened log goes on from its head, not from its start.
        drop(log);
        let log = AuditLog::open(dir.path(), AuditMode::Closed).unwrap();
        assert_eq!(log.head().0, 51);
    }

    #[test]
    fn a_start_without_its_anchor_or_files_that_do_not_join_are_caught() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(dir.path(), AuditMode::Closed).unwrap();
        let a = write_and_anchor(dir.path(), &log, 10);
        cut(&Place::sqlite(dir.path()), &a).unwrap().unwrap();
        write_and_anchor(dir.path(), &log, 5);
        let exec = |sql: &str| Connection::open(dir.path().join(FILE)).unwrap().execute_batch(sql).unwrap();

        // The start anchor deleted: where the live log begins is no longer proved.
        exec("CREATE TABLE saved AS SELECT * FROM anchors; DELETE FROM anchors WHERE seq = 10;");
        let e = verify(&Place::sqlite(dir.path())).unwrap_err().to_string();
        assert!(e.contains("record 10:") && e.contains("not proved"), "{e}");
        exec("INSERT INTO anchors SELECT * FROM saved WHERE seq = 10;");
        verify(&Place::sqlite(dir.path())).unwrap();

        // A start moved back over records taken out: the anchor no longer matches.
        exec("UPDATE segment SET start_seq = 5;");
        let e = verify(&Place::sqlite(dir.path())).unwrap_err().to_string();
        assert!(e.contains("record 5:") && e.contains("not proved"), "{e}");
        exec("UPDATE segment SET start_seq = 10;");

        // A segment missing from the middle: the files around it do not join.
        let b = write_and_anchor(dir.path(), &log, 3);
        cut(&Place::sqlite(dir.path()), &b).unwrap().unwrap();
        assert_eq!(verify_all(&Place::sqlite(dir.path())).unwrap().len(), 3);
        let middle = list(dir.path()).unwrap().remove(1);
        std::fs::remove_file(&middle).unwrap();
        let e = verify_all(&Place::sqlite(dir.path())).unwrap_err();
        assert!(matches!(e, VerifyError::Broken { seq: 19, .. }) && e.to_string().contains("do not join"), "{e}");
    }

    #[test]
    fn a_log_cut_at_its_last_record_reopens_at_its_head() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(dir.path(), AuditMode::Closed).unwrap();
        let a = write_and_anchor(dir.path(), &log, 10);
        cut(&Place::sqlite(dir.path()), &a).unwrap().unwrap();
        drop(log);
        // No batch is left in the live log: its start is its head, not the genesis.
        let log = AuditLog::open(dir.path(), AuditMode::Closed).unwrap();
        assert_eq!(log.head(), (a.seq, a.head));
        write_and_anchor(dir.path(), &log, 1);
        let files = verify_all(&Place::sqlite(dir.path())).unwrap();
        assert_eq!(files.last().map(|(_, v)| (v.start, v.records)), Some((10, 11)));
    }

    #[test]
    fn rows_left_by_a_cut_that_crashed_after_moving_the_start_are_no_part_of_the_chain() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(dir.path(), AuditMode::Closed).unwrap();
        let a = write_and_anchor(dir.path(), &log, 20);
        let seg1 = cut(&Place::sqlite(dir.path()), &a).unwrap().unwrap();
        let b = write_and_anchor(dir.path(), &log, 5);
        // The state a crash between the start's move and the collection leaves: the
        // segment's rows still in the live log, before its start.
        let live = Connection::open(dir.path().join(FILE)).unwrap();
        live.execute("ATTACH DATABASE ?1 AS seg", [seg1.to_str().unwrap()]).unwrap();
        live.execute_batch("INSERT INTO main.audit SELECT * FROM seg.audit; DETACH DATABASE seg;").unwrap();
        let rows = |c: &Connection| c.query_row("SELECT COUNT(*), MIN(first_seq) FROM audit", [], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Option<i64>>(1)?))).unwrap();
        assert_eq!(rows(&live).1, Some(1), "the left-overs are back");

        let v = verify(&Place::sqlite(dir.path())).unwrap();
        assert_eq!((v.start, v.records, v.unanchored()), (20, 25, 0), "the chain is what follows the start");
        assert_eq!(super::super::verify::tail(&Place::sqlite(dir.path()), 0, 100).unwrap().first().map(|(seq, _)| *seq), Some(21));
        drop(log);
        let log = AuditLog::open(dir.path(), AuditMode::Closed).unwrap();
        assert_eq!(log.head(), (b.seq, b.head), "reopened at its head");

        // The next cut collects them, and its segment starts where the first one ended.
        let c = write_and_anchor(dir.path(), &log, 3);
        let seg2 = cut(&Place::sqlite(dir.path()), &c).unwrap().unwrap();
        assert_eq!(seg2.file_name().unwrap(), "audit-000000000021-000000000028.sqlite");
        assert_eq!(verify_file(&seg2).unwrap().records, 28);
        assert_eq!(rows(&live).0, 0, "nothing is left in the live log");
        assert_eq!(verify_all(&Place::sqlite(dir.path())).unwrap().len(), 3);
    }

    #[test]
    fn a_cut_copies_in_synced_chunks_while_the_writer_commits_and_names_the_segment_when_whole() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(dir.path(), AuditMode::Closed).unwrap();
        let mut a = None;
        for round in 0..40 {
            a = Some(write_and_anchor(dir.path(), &log, 5 + round % 3));
        }
        let a = a.unwrap();
        let file = dir.path().join(DIR).join(format!("audit-000000000001-{:012}.sqlite", a.seq));
        let partial = dir.path().join(DIR).join(format!("audit-000000000001-{:012}{PARTIAL}", a.seq));
        let mut sizes = Vec::new();
        let seg = cut_file_in_chunks(dir.path(), &a, 4096, || {
            assert!(!file.exists(), "no file under the segment's name before it is whole");
            sizes.push(std::fs::metadata(&partial).expect("the partial file").len());
            // A closed-mode answer waits for its record's commit: the copy does not hold it.
            log.record(entry("/during-the-cut", 200)).unwrap();
            log.flush();
        })
        .unwrap()
        .unwrap();
        assert_eq!(seg, file);
        assert!(!partial.exists());
        assert!(sizes.len() >= 4, "a transaction per 4 KiB of batches, not one for the whole segment: {sizes:?}");
        assert!(sizes.windows(2).all(|w| w[1] > w[0] && w[1] - w[0] <= 4 * 4096), "each a few pages: {sizes:?}");
        let v = verify_file(&seg).unwrap();
        assert_eq!((v.records, v.unanchored()), (a.seq, 0));
        let live = verify(&Place::sqlite(dir.path())).unwrap();
        assert_eq!((live.start, live.records - live.start), (a.seq, sizes.len() as u64), "the records written during the copy");
    }

    #[test]
    fn a_partial_segment_left_by_a_crash_is_not_listed_and_the_next_cut_removes_it() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(dir.path(), AuditMode::Closed).unwrap();
        let a = write_and_anchor(dir.path(), &log, 12);
        signet_core::files::ensure_private_dir(&dir.path().join(DIR)).unwrap();
        let left = dir.path().join(DIR).join(format!("audit-000000000001-000000000009{PARTIAL}"));
        std::fs::write(&left, b"half a segment").unwrap();
        assert!(list(dir.path()).unwrap().is_empty());
        assert_eq!(verify_all(&Place::sqlite(dir.path())).unwrap().len(), 1);
        let seg = cut(&Place::sqlite(dir.path()), &a).unwrap().unwrap();
        assert!(!left.exists());
        assert_eq!(list(dir.path()).unwrap(), vec![seg]);
        assert_eq!(verify_all(&Place::sqlite(dir.path())).unwrap().len(), 2);
    }

    #[test]
    fn due_by_size_or_age() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(dir.path(), AuditMode::Closed).unwrap();
        write_and_anchor(dir.path(), &log, 50);
        let off = Policy { max_bytes: 0, max_age_secs: 0 };
        assert!(!due(&Place::sqlite(dir.path()), off, now_ms()).unwrap());
        assert!(due(&Place::sqlite(dir.path()), Policy { max_bytes: 1, max_age_secs: 0 }, now_ms()).unwrap());
        assert!(!due(&Place::sqlite(dir.path()), Policy { max_bytes: 1 << 30, max_age_secs: 0 }, now_ms()).unwrap());
        assert!(!due(&Place::sqlite(dir.path()), Policy { max_bytes: 0, max_age_secs: 60 }, now_ms()).unwrap());
        assert!(due(&Place::sqlite(dir.path()), Policy { max_bytes: 0, max_age_secs: 60 }, now_ms() + 61_000).unwrap());
    }
}
