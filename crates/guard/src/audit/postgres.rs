//! Audit chains on PostgreSQL: one table shared by every instance, one chain per instance.
//!
//! The rows are those of `audit.sqlite` with the chain's name in front: `audit_batches`
//! (a batch of records and their hashes), `audit_anchors`, and `audit_starts` (where a chain
//! begins once segments were cut from it). The tables are this module's migration, version 7
//! of the database's one sequence ([`signet_db::migrations`]), applied when a chain opens and by
//! `signet migrate`.
//!
//! One writer per chain: the instance that writes a chain holds a session advisory lock on
//! its name, taken on every connection its writer makes. A second instance configured with
//! the same chain fails at start, and says which. Were the lock lost, the key (chain,
//! first_seq) would still refuse a second batch after the same record: a chain cannot fork.
//! Each batch is one transaction, committed (and, with PostgreSQL's default
//! `synchronous_commit = on`, flushed to its WAL) before its requests are answered.

use std::sync::Arc;

use signet_db::migrations::Migration;
use tokio_postgres::Client;

use super::record::{Anchor, Batch, GENESIS};
use crate::pg::{pg, Hello, Pg};
use crate::store::StoreError;

/// A chain on PostgreSQL, by name.
pub struct ChainDb {
    pg: Pg,
    chain: Arc<str>,
}

/// The audit chains' tables, version 7 of [`signet_db::migrations::REGISTRY`].
pub const MIGRATIONS: &[Migration] = &[Migration {
    version: 7,
    name: "audit chains, one per instance",
    // A chain's batches (as in audit.sqlite), its anchors, and where it starts once segments
    // were cut from it.
    sql: "
CREATE TABLE audit_batches(chain TEXT NOT NULL, first_seq BIGINT NOT NULL, last_seq BIGINT NOT NULL,
    records BYTEA NOT NULL, hashes BYTEA NOT NULL, PRIMARY KEY (chain, first_seq));
CREATE TABLE audit_anchors(chain TEXT NOT NULL, seq BIGINT NOT NULL, head BYTEA NOT NULL, log_index BIGINT NOT NULL,
    entry TEXT NOT NULL, PRIMARY KEY (chain, seq));
CREATE TABLE audit_starts(chain TEXT PRIMARY KEY, start_seq BIGINT NOT NULL, start_head BYTEA NOT NULL);
",
}];

/// The lock's key: the chain's name hashed by the server, in the space of 64-bit keys.
const LOCK: &str = "SELECT pg_try_advisory_lock(hashtextextended('signet audit chain ' || $1, 0))";

fn as_i64(n: u64) -> i64 {
    n.min(i64::MAX as u64) as i64
}

impl ChainDb {
    /// Connects to the chain `chain` for reading, anchoring and cutting.
    pub fn open(url: &str, chain: &str) -> Result<ChainDb, StoreError> {
        let pg = Pg::open(url, None)?;
        pg.migrate(MIGRATIONS)?;
        Ok(ChainDb { pg, chain: chain.into() })
    }

    /// Connects as the chain's one writer: fails when another instance writes it.
    pub fn open_writer(url: &str, chain: &str) -> Result<ChainDb, StoreError> {
        let name: Arc<str> = chain.into();
        let for_lock = name.clone();
        let hello: Hello = Arc::new(move |client: Arc<Client>| {
            let name = for_lock.clone();
            Box::pin(async move {
                let held: bool = client.query_one(LOCK, &[&&*name]).await.map_err(pg)?.try_get(0).map_err(pg)?;
                match held {
                    true => Ok(()),
                    false => Err(StoreError::Postgres(format!(
                        "audit chain {name:?} is being written by another instance; give each instance its own chain ([guard.audit] chain)"
                    ))),
                }
            })
        });
        let pg = Pg::open(url, Some(hello))?;
        pg.migrate(MIGRATIONS)?;
        Ok(ChainDb { pg, chain: name })
    }

    pub fn chain(&self) -> &str {
        &self.chain
    }

    /// The chain's last batch's last seq and hashes, if it has one.
    pub fn last_batch(&self) -> Result<Option<(u64, Vec<u8>)>, StoreError> {
        let chain = self.chain.clone();
        self.pg.block(move |c| async move {
            let row = c
                .query_opt("SELECT last_seq, hashes FROM audit_batches WHERE chain = $1 ORDER BY first_seq DESC LIMIT 1", &[&&*chain])
                .await
                .map_err(pg)?;
            row.map(|r| Ok((r.try_get::<_, i64>(0).map_err(pg)?.max(0) as u64, r.try_get(1).map_err(pg)?))).transpose()
        })
    }

    /// Where the chain starts: after (seq, head); (0, genesis) unless segments were cut.
    pub fn start(&self) -> Result<(u64, [u8; 32]), StoreError> {
        let chain = self.chain.clone();
        self.pg.block(move |c| async move {
            let row = c.query_opt("SELECT start_seq, start_head FROM audit_starts WHERE chain = $1", &[&&*chain]).await.map_err(pg)?;
            Ok(match row {
                None => (0, GENESIS),
                Some(r) => {
                    let head: Vec<u8> = r.try_get(1).map_err(pg)?;
                    // A head of the wrong length matches no anchor: zeros fail the check.
                    (r.try_get::<_, i64>(0).map_err(pg)?.max(0) as u64, <[u8; 32]>::try_from(head.as_slice()).unwrap_or([0; 32]))
                }
            })
        })
    }

    /// Stores one batch, in a transaction of its own.
    pub fn insert(&self, batch: Batch) -> Result<(), StoreError> {
        let chain = self.chain.clone();
        self.pg.block(move |c| async move {
            c.execute(
                "INSERT INTO audit_batches(chain, first_seq, last_seq, records, hashes) VALUES ($1, $2, $3, $4, $5)",
                &[&&*chain, &as_i64(batch.first), &as_i64(batch.last), &batch.records, &batch.hashes],
            )
            .await
            .map_err(pg)?;
            Ok(())
        })
    }

    /// Up to `limit` batches after the one starting at or before `after`, oldest first:
    /// those whose first seq is above `after`.
    pub fn batches_after(&self, after: u64, upto: u64, limit: i64) -> Result<Vec<Batch>, StoreError> {
        let chain = self.chain.clone();
        self.pg.block(move |c| async move {
            let rows = c
                .query(
                    "SELECT first_seq, last_seq, records, hashes FROM audit_batches \
                     WHERE chain = $1 AND first_seq > $2 AND last_seq <= $3 ORDER BY first_seq LIMIT $4",
                    &[&&*chain, &as_i64(after), &as_i64(upto), &limit],
                )
                .await
                .map_err(pg)?;
            rows.iter().map(batch).collect()
        })
    }

    /// Up to `limit` batches holding records after `after`, newest first (for `tail`).
    pub fn newest_batches(&self, after: u64, before_first: u64, limit: i64) -> Result<Vec<Batch>, StoreError> {
        let chain = self.chain.clone();
        self.pg.block(move |c| async move {
            let rows = c
                .query(
                    "SELECT first_seq, last_seq, records, hashes FROM audit_batches \
                     WHERE chain = $1 AND last_seq > $2 AND first_seq < $3 ORDER BY first_seq DESC LIMIT $4",
                    &[&&*chain, &as_i64(after), &as_i64(before_first), &limit],
                )
                .await
                .map_err(pg)?;
            rows.iter().map(batch).collect()
        })
    }

    pub fn store_anchor(&self, a: &Anchor) -> Result<(), StoreError> {
        let (chain, a) = (self.chain.clone(), a.clone());
        self.pg.block(move |c| async move {
            c.execute(
                "INSERT INTO audit_anchors(chain, seq, head, log_index, entry) VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (chain, seq) DO UPDATE SET head = EXCLUDED.head, log_index = EXCLUDED.log_index, entry = EXCLUDED.entry",
                &[&&*chain, &as_i64(a.seq), &a.head.as_slice(), &as_i64(a.log_index), &a.entry],
            )
            .await
            .map_err(pg)?;
            Ok(())
        })
    }

    /// The chain's anchors up to `upto`, by seq.
    pub fn anchors(&self, upto: u64) -> Result<Vec<Anchor>, StoreError> {
        let chain = self.chain.clone();
        self.pg.block(move |c| async move {
            let rows = c
                .query(
                    "SELECT seq, head, log_index, entry FROM audit_anchors WHERE chain = $1 AND seq <= $2 ORDER BY seq",
                    &[&&*chain, &as_i64(upto)],
                )
                .await
                .map_err(pg)?;
            rows.iter()
                .map(|r| {
                    let head: Vec<u8> = r.try_get(1).map_err(pg)?;
                    Ok(Anchor {
                        seq: r.try_get::<_, i64>(0).map_err(pg)?.max(0) as u64,
                        head: <[u8; 32]>::try_from(head.as_slice()).unwrap_or([0; 32]),
                        log_index: r.try_get::<_, i64>(2).map_err(pg)?.max(0) as u64,
                        entry: r.try_get(3).map_err(pg)?,
                    })
                })
                .collect()
        })
    }

    /// Bytes the chain's batches hold, and its oldest batch's records.
    pub fn size_and_oldest(&self) -> Result<(u64, Option<Vec<u8>>), StoreError> {
        let chain = self.chain.clone();
        self.pg.block(move |c| async move {
            let size: i64 = c
                .query_one(
                    "SELECT COALESCE(SUM(octet_length(records) + octet_length(hashes)), 0)::BIGINT FROM audit_batches WHERE chain = $1",
                    &[&&*chain],
                )
                .await
                .map_err(pg)?
                .try_get(0)
                .map_err(pg)?;
            let oldest = c
                .query_opt("SELECT records FROM audit_batches WHERE chain = $1 ORDER BY first_seq LIMIT 1", &[&&*chain])
                .await
                .map_err(pg)?
                .map(|r| r.try_get::<_, Vec<u8>>(0).map_err(pg))
                .transpose()?;
            Ok((size.max(0) as u64, oldest))
        })
    }

    /// After a segment holding records up to `at` was written: takes them out, keeps `at`'s
    /// anchor as the chain's start. One statement, so one transaction.
    pub fn cut(&self, at: &Anchor) -> Result<(), StoreError> {
        let (chain, at) = (self.chain.clone(), at.clone());
        self.pg.block(move |c| async move {
            c.execute(
                "WITH batches AS (DELETE FROM audit_batches WHERE chain = $1 AND last_seq <= $2), \
                      anchors AS (DELETE FROM audit_anchors WHERE chain = $1 AND seq < $2) \
                 INSERT INTO audit_starts(chain, start_seq, start_head) VALUES ($1, $2, $3) \
                 ON CONFLICT (chain) DO UPDATE SET start_seq = EXCLUDED.start_seq, start_head = EXCLUDED.start_head",
                &[&&*chain, &as_i64(at.seq), &at.head.as_slice()],
            )
            .await
            .map_err(pg)?;
            Ok(())
        })
    }
}

fn batch(r: &tokio_postgres::Row) -> Result<Batch, StoreError> {
    Ok(Batch {
        first: r.try_get::<_, i64>(0).map_err(pg)?.max(0) as u64,
        last: r.try_get::<_, i64>(1).map_err(pg)?.max(0) as u64,
        records: r.try_get(2).map_err(pg)?,
        hashes: r.try_get(3).map_err(pg)?,
    })
}
