//! Checking a stored chain: `signet audit verify --data-dir DIR`.
//!
//! The database is opened read-only, so a check never creates or changes anything. Every
//! record must follow the one before (seq + 1), carry its own seq, and have the hash that
//! chains its stored bytes after the previous hash. Each stored [`Anchor`] must name a
//! record of the chain and that record's hash; checking that the anchor's entry is in the
//! transparency log needs the log's trusted root, and is the caller's (`signet audit verify`).
//!
//! A file that starts after a cut ([`super::segment`]) starts from its start anchor: the
//! record and hash it says it follows must be those of an anchor it keeps, so that its start
//! too is proved by the transparency log. [`verify_all`] checks the segments and the live
//! log in turn, and that each starts where the one before it ended.

use std::path::{Path, PathBuf};

use rusqlite::Connection;

use super::anchor::{self, Anchor};
use super::place::Place;
use super::postgres::ChainDb;
use super::record::{self, Batch, Record};

/// How [`verify_all`] names the live chain when it is in PostgreSQL.
pub const LIVE_IN_POSTGRES: &str = "(live chain in PostgreSQL)";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The chain in this file follows record `start` (0: it starts at the beginning).
    pub start: u64,
    /// The last record's seq (`start` for a file that holds none).
    pub records: u64,
    /// The hash of the last record ([`super::record::GENESIS`] for an empty log).
    pub head: [u8; 32],
    /// The anchors, oldest first, each matching the chain (the start anchor first, if any).
    pub anchors: Vec<Anchor>,
}

impl Verified {
    /// Records after the last anchor, which no anchor covers yet.
    pub fn unanchored(&self) -> u64 {
        self.records - self.anchors.last().map_or(self.start, |a| a.seq.clamp(self.start, self.records))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("no audit log at {0} (it is created when `signet serve` starts with [guard.audit] enabled)")]
    Missing(String),
    #[error("audit log {path}: {source}")]
    Sqlite { path: String, source: rusqlite::Error },
    #[error("{chain:?} in PostgreSQL: {why}")]
    Postgres { chain: String, why: String },
    #[error("audit chain broken at record {seq}: {why}")]
    Broken { seq: u64, why: String },
}

/// The records after `after` (a seq), oldest first, as their stored JSON lines; at most the
/// last `last` of them. Read-only, like [`verify`]; it checks no hashes (that is `verify`'s
/// job), only that each batch splits into its records.
pub fn tail(place: &Place, after: u64, last: usize) -> Result<Vec<(u64, String)>, VerifyError> {
    let mut out: Vec<(u64, String)> = Vec::new();
    // Newest batches first, until enough records are in hand.
    let mut take = |b: Batch| -> bool {
        let lines: Vec<(u64, String)> = String::from_utf8_lossy(&b.records)
            .split('\n')
            .enumerate()
            .map(|(i, line)| (b.first + i as u64, line.to_string()))
            .filter(|(seq, _)| *seq > after)
            .collect();
        out.splice(0..0, lines);
        out.len() >= last
    };
    match place {
        Place::Sqlite { data_dir } => {
            let path = data_dir.join(super::FILE);
            let conn = open_read_only(&path)?;
            let err = |source| VerifyError::Sqlite { path: path.display().to_string(), source };
            let (start, _) = super::segment::start(&conn).map_err(err)?;
            let mut rows = conn.prepare("SELECT first_seq, last_seq, records FROM audit WHERE last_seq > ?1 ORDER BY first_seq DESC").map_err(err)?;
            let mut rows = rows.query([after.max(start) as i64]).map_err(err)?;
            while let Some(row) = rows.next().map_err(err)? {
                let records = row.get_ref(2).map_err(err)?.as_bytes().map(<[u8]>::to_vec).unwrap_or_default();
                let batch = Batch { first: row.get(0).map_err(err)?, last: row.get(1).map_err(err)?, records, hashes: Vec::new() };
                if take(batch) {
                    break;
                }
            }
        }
        Place::Postgres { db, .. } => {
            let mut before = u64::MAX;
            'pages: loop {
                let page = db.newest_batches(after, before, 256).map_err(|e| postgres(db, e))?;
                let Some(oldest) = page.last() else { break };
                before = oldest.first;
                for batch in page {
                    if take(batch) {
                        break 'pages;
                    }
                }
            }
        }
    }
    let skip = out.len().saturating_sub(last);
    Ok(out.split_off(skip))
}

fn open_read_only(path: &Path) -> Result<Connection, VerifyError> {
    if !path.exists() {
        return Err(VerifyError::Missing(path.display().to_string()));
    }
    signet_db::sqlite::open_inspect(path).map_err(|e| VerifyError::Sqlite { path: e.path, source: e.source })
}

fn postgres(db: &ChainDb, e: crate::store::StoreError) -> VerifyError {
    VerifyError::Postgres { chain: db.chain().to_string(), why: e.to_string() }
}

/// Checks the live chain at `place`.
pub fn verify(place: &Place) -> Result<Verified, VerifyError> {
    match place {
        Place::Sqlite { data_dir } => verify_file(&data_dir.join(super::FILE)),
        Place::Postgres { db, .. } => verify_db(db),
    }
}

/// Checks a chain on PostgreSQL, a page of batches at a time.
fn verify_db(db: &ChainDb) -> Result<Verified, VerifyError> {
    let (start, start_head) = db.start().map_err(|e| postgres(db, e))?;
    let anchors = db.anchors(u64::MAX).map_err(|e| postgres(db, e))?;
    let mut page: std::collections::VecDeque<Batch> = Default::default();
    // From the first row, not from the start: a row before the start is caught, as in a file.
    let mut after = 0;
    let verified = check(start, start_head, anchors, || {
        if page.is_empty() {
            page = db.batches_after(after, u64::MAX, 256).map_err(|e| postgres(db, e))?.into();
        }
        let next = page.pop_front();
        if let Some(b) = &next {
            after = b.first;
        }
        Ok(next)
    })?;
    if verified.records == 0 && verified.anchors.is_empty() {
        return Err(VerifyError::Missing(format!("audit chain {:?} in PostgreSQL (no record in it yet)", db.chain())));
    }
    Ok(verified)
}

/// Checks the segments under the data dir (those still there), then the live chain, and that
/// each starts where the one before it ended. A first file that starts after record 0
/// follows segments archived elsewhere; its start anchor vouches for where it begins. The
/// live chain is named by its file, or by [`LIVE_IN_POSTGRES`].
pub fn verify_all(place: &Place) -> Result<Vec<(PathBuf, Verified)>, VerifyError> {
    let segments = super::segment::list(place.data_dir()).map_err(|e| VerifyError::Broken { seq: 0, why: e.to_string() })?;
    let live = place.file().unwrap_or_else(|| PathBuf::from(LIVE_IN_POSTGRES));
    let mut out: Vec<(PathBuf, Verified)> = Vec::new();
    for path in segments.into_iter().chain([live.clone()]) {
        let v = match path == live {
            true => verify(place)?,
            false => verify_file(&path)?,
        };
        if let Some((before, prev)) = out.last() {
            if v.start != prev.records || v.anchors.first().map(|a| a.head) != Some(prev.head) {
                return Err(VerifyError::Broken {
                    seq: v.start + 1,
                    why: format!(
                        "{} starts after record {}, but {} ends at record {} with another hash: the files do not join{}",
                        path.display(),
                        v.start,
                        before.display(),
                        prev.records,
                        if v.start < prev.records { " (a cut was interrupted: the next one finishes it)" } else { "" }
                    ),
                });
            }
        }
        out.push((path, v));
    }
    Ok(out)
}

/// Checks one log file: the live log, or a segment.
pub fn verify_file(path: &Path) -> Result<Verified, VerifyError> {
    let conn = open_read_only(path)?;
    let err = |source| VerifyError::Sqlite { path: path.display().to_string(), source };
    let anchors = anchor::load(&conn).map_err(err)?;
    let (start, start_head) = super::segment::start(&conn).map_err(err)?;
    // Rows at or before the start are a cut's left-overs (see `segment`), not the chain.
    let mut rows = conn.prepare("SELECT first_seq, last_seq, records, hashes FROM audit WHERE last_seq > ?1 ORDER BY first_seq").map_err(err)?;
    let mut rows = rows.query([start as i64]).map_err(err)?;
    check(start, start_head, anchors, || {
        let Some(row) = rows.next().map_err(err)? else { return Ok(None) };
        let first: u64 = row.get(0).map_err(err)?;
        // Bytes whatever the column type: an edit through SQL may leave TEXT where a BLOB was.
        let bytes = |i: usize| -> Result<Vec<u8>, VerifyError> {
            let v = row.get_ref(i).map_err(err)?;
            v.as_bytes().map(<[u8]>::to_vec).map_err(|_| VerifyError::Broken {
                seq: first,
                why: format!("its batch's column {i} holds a {}, not bytes", v.data_type()),
            })
        };
        Ok(Some(Batch { first, last: row.get(1).map_err(err)?, records: bytes(2)?, hashes: bytes(3)? }))
    })
}

/// Checks a chain that follows record `start` (whose hash was `start_head`), given its
/// anchors and, from `next`, its batches in order.
fn check(
    start: u64,
    start_head: [u8; 32],
    anchors: Vec<Anchor>,
    mut next: impl FnMut() -> Result<Option<Batch>, VerifyError>,
) -> Result<Verified, VerifyError> {
    let mut next_anchor = anchors.iter().peekable();
    if let Some(early) = next_anchor.next_if(|a| a.seq < start) {
        return Err(VerifyError::Broken {
            seq: early.seq,
            why: format!("it is anchored in this file, which starts after record {start}: the file was put together from others"),
        });
    }
    if start > 0 && next_anchor.next_if(|a| a.seq == start && a.head == start_head).is_none() {
        return Err(VerifyError::Broken {
            seq: start,
            why: "this file's chain starts after it, but no anchor of its hash is kept here: where the file begins is not proved".into(),
        });
    }
    let (mut last, mut head) = (start, start_head);
    while let Some(Batch { first, last: end, records, hashes }) = next()? {
        if first != last + 1 {
            return Err(VerifyError::Broken {
                seq: first,
                why: format!("it follows record {last}: records {}..{} are missing", last + 1, first.saturating_sub(1)),
            });
        }
        let lines: Vec<&[u8]> = records.split(|b| *b == b'\n').collect();
        let count = end.checked_sub(first).map(|n| n + 1);
        if count != Some(lines.len() as u64) || hashes.len() != lines.len() * 32 {
            return Err(VerifyError::Broken {
                seq: first,
                why: format!(
                    "its batch says records {first}..{end} but holds {} records and {} hashes",
                    lines.len(),
                    hashes.len() / 32
                ),
            });
        }
        for (i, (json, stored)) in lines.iter().zip(hashes.chunks(32)).enumerate() {
            let seq = first + i as u64;
            let broken = |why: String| VerifyError::Broken { seq, why };
            let parsed: Record =
                serde_json::from_slice(json).map_err(|e| broken(format!("its stored record is not a record: {e}")))?;
            if parsed.seq != seq {
                return Err(broken(format!("its stored record says seq {}", parsed.seq)));
            }
            let expected = record::link(&head, json);
            if stored != expected {
                return Err(broken("its hash does not chain its contents after the record before: edited, replaced or reordered".into()));
            }
            head = expected;
            if let Some(a) = next_anchor.next_if(|a| a.seq <= seq) {
                if a.seq < seq || a.head != head {
                    return Err(VerifyError::Broken {
                        seq: a.seq,
                        why: format!(
                            "its hash is not the one anchored in the transparency log at index {}: the records up to it were rewritten after they were anchored",
                            a.log_index
                        ),
                    });
                }
            }
        }
        last = end;
    }
    if let Some(a) = next_anchor.next() {
        return Err(VerifyError::Broken {
            seq: a.seq,
            why: format!(
                "it was anchored in the transparency log at index {}, but the chain ends at record {last}: records {}..{} were deleted",
                a.log_index,
                last + 1,
                a.seq
            ),
        });
    }
    Ok(Verified { start, records: last, head, anchors })
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::chain::{now_ms, AuditLog};
    use super::super::queue::Entry;
    use super::*;
    use crate::config::AuditMode;

    /// A GET's record, as the layer would queue it.
    pub(in crate::audit) fn entry(path: &str, status: u16) -> Entry {
        Entry {
            time_ms: now_ms(),
            client: "ip:127.0.0.1".parse().unwrap(),
            method: http::Method::GET,
            path: super::super::record::PathText::new(path),
            status,
            micros: 42,
            request_id: None,
            role: None,
            route: None,
            reason: None,
            oidc: None,
            did: None,
            cert: None,
        }
    }

    #[test]
    fn tail_gives_the_last_records_in_order_and_what_follows_a_seq() {
        let (dir, v) = filled(25);
        let last = tail(&Place::sqlite(dir.path()), 0, 5).unwrap();
        assert_eq!(last.iter().map(|(s, _)| *s).collect::<Vec<_>>(), (v.records - 4..=v.records).collect::<Vec<_>>());
        for (seq, line) in &last {
            let r: Record = serde_json::from_str(line).unwrap();
            assert_eq!(r.seq, *seq);
        }
        assert!(tail(&Place::sqlite(dir.path()), v.records, 10).unwrap().is_empty());
        assert_eq!(tail(&Place::sqlite(dir.path()), v.records - 2, 10).unwrap().len(), 2);
        assert!(matches!(tail(&Place::sqlite(&dir.path().join("none")), 0, 1), Err(VerifyError::Missing(_))));
    }

    fn filled(n: usize) -> (tempfile::TempDir, Verified) {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(dir.path(), AuditMode::BestEffort).unwrap();
        for i in 0..n {
            log.record(entry(&format!("/api/v1/log/entries/{i}"), 200)).unwrap();
            if i % 2 == 0 {
                // Batches of one and two records: a batch boundary falls between 1 and 2, 3 and 4.
                log.flush();
            }
        }
        log.flush();
        let v = verify(&Place::sqlite(dir.path())).unwrap();
        (dir, v)
    }

    fn exec(dir: &Path, sql: &str) {
        Connection::open(dir.join(super::super::FILE)).unwrap().execute_batch(sql).unwrap();
    }

    #[test]
    fn an_intact_chain_verifies_and_survives_a_restart() {
        let (dir, v) = filled(5);
        assert_eq!(v.records, 5);
        let log = AuditLog::open(dir.path(), AuditMode::BestEffort).unwrap();
        log.record(entry("/healthz", 200)).unwrap();
        log.flush();
        let again = verify(&Place::sqlite(dir.path())).unwrap();
        assert_eq!(again.records, 6, "a reopened log continues the chain");
        assert_ne!(again.head, v.head);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(super::super::FILE)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn an_edit_a_deletion_and_a_swap_are_each_caught_at_their_record() {
        // Batches: [1], [2, 3], [4, 5].
        let (dir, _) = filled(5);
        exec(dir.path(), "UPDATE audit SET records = CAST(replace(CAST(records AS TEXT), 'entries/2\"', 'entries/9\"') AS BLOB)");
        let e = verify(&Place::sqlite(dir.path())).unwrap_err().to_string();
        assert!(e.contains("record 3:") && e.contains("does not chain"), "{e}");

        let (dir, _) = filled(5);
        exec(dir.path(), "DELETE FROM audit WHERE first_seq = 2");
        let e = verify(&Place::sqlite(dir.path())).unwrap_err().to_string();
        assert!(e.contains("record 4:") && e.contains("records 2..3 are missing"), "{e}");

        let (dir, _) = filled(5);
        exec(dir.path(), "UPDATE audit SET records = CAST(replace(CAST(records AS TEXT), CHAR(10), '') AS BLOB) WHERE first_seq = 4");
        let e = verify(&Place::sqlite(dir.path())).unwrap_err().to_string();
        assert!(e.contains("record 4:") && e.contains("holds 1 records"), "{e}");

        let (dir, _) = filled(5);
        exec(dir.path(), "UPDATE audit SET records = (SELECT records FROM audit WHERE first_seq = 2), hashes = (SELECT hashes FROM audit WHERE first_seq = 2) WHERE first_seq = 4");
        let e = verify(&Place::sqlite(dir.path())).unwrap_err().to_string();
        assert!(e.contains("record 4:") && e.contains("says seq 2"), "{e}");
    }

    #[test]
    fn a_missing_log_is_named_and_not_created() {
        let dir = tempfile::tempdir().unwrap();
        let e = verify(&Place::sqlite(dir.path())).unwrap_err();
        assert!(matches!(e, VerifyError::Missing(_)), "{e}");
        assert!(!dir.path().join(super::super::FILE).exists());
    }

    #[test]
    fn a_full_queue_is_recorded_in_the_chain() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(dir.path(), AuditMode::BestEffort).unwrap();
        log.count_lost(7);
        log.record(entry("/x", 200)).unwrap();
        log.flush();
        let conn = Connection::open(dir.path().join(super::super::FILE)).unwrap();
        let batch: Vec<u8> = conn.query_row("SELECT records FROM audit", [], |r| r.get(0)).unwrap();
        let notes: Vec<String> = String::from_utf8(batch).unwrap().lines().map(str::to_string).collect();
        assert_eq!(notes.len(), 2);
        assert!(notes[1].contains("lost 7 records") && notes[1].contains("\"client\":\"signet\""), "{notes:?}");
        assert_eq!(verify(&Place::sqlite(dir.path())).unwrap().records, 2);
    }
}
