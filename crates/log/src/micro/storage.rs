//! The SQLite backend. `commit_256` is durable (WAL, `synchronous=FULL`), so it times the
//! disk under the temporary directory (`$TMPDIR`, else /tmp) as much as SQLite: on a tmpfs
//! it would time neither. Bodies are real Rekor v1 canonical bodies with a SET beside them.

use std::hint::black_box;
use std::time::{Duration, Instant};

use signet_core::micro::criterion::{Criterion, Throughput};
use signet_core::micro::{measure, Bench, Opts};

use crate::merkle::leaf_hash;
use crate::storage::{Batch, LeafTile, NewEntry, SqliteStorage, Storage, StoredCheckpoint, Tile};
use crate::tilecache::Expanded;

const BATCH: u64 = 256;
/// Commits into one database before the next starts afresh, so that a long measurement
/// does not fill the disk (32 × 256 entries of about 1 KiB: under 10 MiB, plus the WAL).
const COMMITS_PER_DB: u64 = 32;
const READ_ENTRIES: u64 = 16_384;

/// An open store in a temporary directory that goes away with it.
struct TempStore {
    storage: SqliteStorage,
    _dir: tempfile::TempDir,
}

fn open() -> TempStore {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let storage = SqliteStorage::open(&dir.path().join("micro.sqlite")).expect("SQLite opens");
    TempStore { storage, _dir: dir }
}

/// The batch of entries `start..start + 256`, as the sequencer writes it: the entries, the
/// leaf tile they fill (with its inner levels), a partial level-1 tile, and the checkpoint.
fn batch(start: u64, body: &[u8], set: &[u8]) -> Batch {
    let entries: Vec<NewEntry> = (start..start + BATCH)
        .map(|index| NewEntry {
            index,
            leaf_hash: leaf_hash(&index.to_be_bytes()),
            digest: Some(format!("sha256:{}", hex::encode(leaf_hash(&index.to_le_bytes()))).into_bytes()),
            identity: None,
            public_key: None,
            body: body.to_vec(),
            stamp: Some(set.to_vec()),
            integrated_time: None,
            attestation: None,
        })
        .collect();
    let tile1 = start / BATCH;
    let leaf_tile = Expanded::new(entries.iter().map(|e| e.leaf_hash).collect()).expect("256 leaves");
    Batch {
        log: 1,
        integrated_time: 1_700_000_000,
        tiles: vec![Tile { level: 1, index: tile1 / 256, hashes: vec![7; 32 * (tile1 % 256 + 1) as usize] }],
        leaf_tiles: vec![LeafTile { index: tile1, nodes: leaf_tile.to_bytes() }],
        entries,
        checkpoint: StoredCheckpoint { size: start + BATCH, note: "log.example.org\n".repeat(4) },
    }
}

/// A SET's worth of bytes: an ASN.1 ECDSA P-256 signature is about 71.
fn set() -> Vec<u8> {
    vec![0x30; 71]
}

pub fn commit(c: &mut Criterion, bench: &Bench) {
    let (body, set) = (super::v1_body(), set());
    let opts = Opts { throughput: Some(Throughput::Elements(BATCH)), slow: true };
    measure(c, bench, opts, |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            let mut store = open();
            for i in 0..iters {
                let n = i % COMMITS_PER_DB;
                if n == 0 && i > 0 {
                    store = open();
                }
                let batch = batch(n * BATCH, &body, &set);
                let start = Instant::now();
                store.storage.commit(&batch).expect("commit");
                spent += start.elapsed();
            }
            spent
        })
    });
}

pub fn entry_read(c: &mut Criterion, bench: &Bench) {
    let (body, set) = (super::v1_body(), set());
    let store = open();
    for start in (0..READ_ENTRIES).step_by(BATCH as usize) {
        store.storage.commit(&batch(start, &body, &set)).expect("commit");
    }
    let mut i = 0;
    measure(c, bench, Opts::default(), |b| {
        b.iter(|| {
            i = (i + 7919) % READ_ENTRIES;
            store.storage.entry(1, black_box(i)).expect("read").expect("present")
        })
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_commit_in_sequence_and_read_back() {
        let store = open();
        let body = b"{}".to_vec();
        store.storage.commit(&batch(0, &body, &set())).unwrap();
        store.storage.commit(&batch(BATCH, &body, &set())).unwrap();
        assert_eq!(store.storage.latest_checkpoint(1).unwrap().unwrap().size, 2 * BATCH);
        let e = store.storage.entry(1, 2 * BATCH - 1).unwrap().unwrap();
        assert_eq!((e.body, e.stamp), (body, Some(set())));
        assert_eq!(store.storage.leaf_tile(1, 1).unwrap().map(|t| t.len()), Some(crate::tilecache::TILE_BYTES));
    }
}
