//! `signet bench scale`: one log of millions of entries on SQLite. How long it takes to open,
//! how much memory it holds open, how fast its lookups are, and what each entry costs on
//! disk (issue 18, "Indexes that fit any size").
//!
//! The log is filled through the storage API in large batches ([`crate::fill`]: real tiles,
//! signed checkpoints, bodies of a chosen size). The measurement then runs in a fresh process
//! ([`remeasure`]), so that its memory is the open log's and not the filler's.

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use signet_core::hash::sha256;
use signet_core::merkle::ProofError;
use signet_log::checkpoint::NoteSigner;
use signet_log::merkle;
use signet_log::storage::{NewEntry, SqliteStorage, Storage, StorageError};
use signet_log::tree::{StoredNodes, Tree};
use signet_log::{BatchPolicy, Log, LogConfig, OpenError};

use crate::fill::{self, FillError};

const LOG: u8 = 1;
const ORIGIN: &str = "scale.bench/log";
const KEY_NAME: &str = "scale.bench";

/// The log to build and measure.
#[derive(Debug, Clone)]
pub struct ScaleSpec {
    /// Directory of the test log; the entries already in it are kept and added to.
    pub dir: PathBuf,
    /// Entries the log holds when it is measured.
    pub entries: u64,
    /// Bytes of each entry's body.
    pub body_bytes: usize,
    /// Lookups of each kind to time.
    pub lookups: usize,
    /// MiB of tile cache for the opened log.
    pub tile_cache_mb: usize,
}

/// What `bench scale` fails with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScaleError {
    #[error(transparent)]
    Fill(#[from] FillError),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The tokio runtime could not be built.
    #[error("{0}")]
    Runtime(#[source] std::io::Error),
    #[error("the log is empty")]
    Empty,
    #[error("entry {index} was not found by its leaf hash (got {found:?})")]
    NotFoundByLeaf { index: u64, found: Option<u64> },
    #[error("a leaf hash the log does not hold was found")]
    AbsentFound,
    #[error("entry {index} was not found by its digest (got {got:?})")]
    NotFoundByDigest { index: u64, got: Vec<u64> },
    #[error("entry {index} is missing")]
    Missing { index: u64 },
    /// The log has no inclusion proof for an entry it holds.
    #[error(transparent)]
    Proof(#[from] ProofError),
    #[error("the proof of entry {index} does not verify: {source}")]
    ProofInvalid { index: u64, source: ProofError },
    /// The log's directory could not be listed, for its size on disk.
    #[error("{source}")]
    Disk { dir: PathBuf, source: std::io::Error },
    /// This executable could not be found or started again to measure.
    #[error("{0}")]
    Spawn(#[source] std::io::Error),
    #[error("the measuring process failed: {0}")]
    Measure(ExitStatus),
}

fn body(index: u64, len: usize) -> Vec<u8> {
    let mut s = format!("{{\"kind\":\"scale\",\"index\":{index},\"pad\":\"");
    let prefix = s.len();
    let mut h = sha256(&index.to_be_bytes());
    while s.len() + 2 < len {
        s.push_str(&hex::encode(h));
        h = sha256(&h);
    }
    s.truncate(len.saturating_sub(2).max(prefix));
    s.push_str("\"}");
    s.into_bytes()
}

fn digest(index: u64) -> Vec<u8> {
    format!("sha256:{}", hex::encode(sha256(&[b"artifact".as_slice(), &index.to_be_bytes()].concat()))).into_bytes()
}

fn db_path(dir: &Path) -> PathBuf {
    dir.join("log.sqlite")
}

/// Appends entries until the log holds `spec.entries`, 4,096 per commit, as the sequencer
/// would store them (entries, changed tiles, a signed checkpoint), with the tree in bounded
/// memory. `progress` gets a line as it goes.
pub fn fill(spec: &ScaleSpec, progress: &mut dyn FnMut(String)) -> Result<(), ScaleError> {
    fill::create_dir(&spec.dir)?;
    let storage = Arc::new(SqliteStorage::open(&db_path(&spec.dir))?);
    let signer = NoteSigner::new(KEY_NAME, fill::key(&spec.dir)?);
    let size = storage.latest_checkpoint(LOG)?.map_or(0, |c| c.size);
    let nodes = StoredNodes { storage: storage.clone(), log: LOG };
    let mut tree = Tree::open(Box::new(nodes), 0, size)?;
    if size < spec.entries {
        progress(format!("filling {} to {} entries ({} bytes each)", spec.dir.display(), spec.entries, spec.body_bytes));
    }
    let started = Instant::now();
    while tree.size() < spec.entries {
        let old = tree.size();
        let new = (old + fill::BATCH).min(spec.entries);
        let entries: Vec<NewEntry> = (old..new)
            .map(|i| {
                let body = body(i, spec.body_bytes);
                // A SET is a DER ECDSA P-256 signature, 70 to 72 bytes.
                NewEntry { index: i, leaf_hash: merkle::leaf_hash(&body), digest: Some(digest(i)), identity: None, public_key: None, body, stamp: Some(vec![0x30; 71]), integrated_time: None, attestation: None }
            })
            .collect();
        fill::commit_entries(storage.as_ref(), &mut tree, &signer, (LOG, ORIGIN), old, entries)?;
        if new % 1_000_000 < fill::BATCH {
            progress(format!("  {new} entries ({:.0} s)", started.elapsed().as_secs_f64()));
        }
    }
    storage.flush_keys()?;
    Ok(())
}

/// Runs [`measure`] in a fresh process: this executable again, as `bench scale --measure`,
/// which prints the table and writes `json` itself.
pub fn remeasure(spec: &ScaleSpec, json: Option<&Path>) -> Result<(), ScaleError> {
    let exe = std::env::current_exe().map_err(ScaleError::Spawn)?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["bench", "scale", "--measure", "--dir"]).arg(&spec.dir);
    cmd.args(["--entries", &spec.entries.to_string(), "--lookups", &spec.lookups.to_string(), "--tile-cache-mb", &spec.tile_cache_mb.to_string()]);
    // The bodies are made again to look their leaves up: the same size as filled.
    cmd.args(["--body-bytes", &spec.body_bytes.to_string()]);
    if let Some(j) = json {
        cmd.arg("--json").arg(j);
    }
    let status = cmd.status().map_err(ScaleError::Spawn)?;
    status.success().then_some(()).ok_or(ScaleError::Measure(status))
}

/// (VmRSS, RssAnon) of this process, in bytes.
fn rss() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("RssAnon:"))
}

/// p50 and p99 of `samples`, in microseconds.
fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| samples.get(((samples.len() as f64 - 1.0) * q) as usize).map_or(0.0, |d| d.as_secs_f64() * 1e6);
    (at(0.5), at(0.99))
}

/// The measurement of an open log. The JSON has what the reports quote; the table also the
/// memory before the log was opened.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleReport {
    pub entries: u64,
    pub body_bytes: usize,
    pub open_s: f64,
    #[serde(skip)]
    pub rss_before_bytes: u64,
    #[serde(skip)]
    pub rss_anon_before_bytes: u64,
    pub rss_open_bytes: u64,
    pub rss_anon_open_bytes: u64,
    pub rss_after_bytes: u64,
    pub rss_anon_after_bytes: u64,
    /// Lookups of each kind timed.
    #[serde(skip)]
    pub lookups: usize,
    pub leaf_p50_us: f64,
    pub leaf_p99_us: f64,
    pub absent_p99_us: f64,
    pub digest_p99_us: f64,
    pub proof_p50_us: f64,
    pub proof_p99_us: f64,
    /// The database and its key index; not the WAL, whose size is bounded by the
    /// checkpointer, not by the log.
    pub disk_bytes: u64,
    pub disk_bytes_per_entry: f64,
    pub tile_cache: TileCacheStats,
}

#[derive(Debug, Clone, Serialize)]
pub struct TileCacheStats {
    pub tiles: usize,
    pub hits: u64,
    pub misses: u64,
}

/// Opens the log in `spec.dir` and times its lookups, in this process.
pub fn measure(spec: &ScaleSpec) -> Result<ScaleReport, ScaleError> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().map_err(ScaleError::Runtime)?;
    runtime.block_on(measure_async(spec))
}

async fn measure_async(spec: &ScaleSpec) -> Result<ScaleReport, ScaleError> {
    let (rss_before, anon_before) = rss();
    let started = Instant::now();
    let storage: Arc<dyn Storage> = Arc::new(SqliteStorage::open(&db_path(&spec.dir))?);
    let cfg = LogConfig {
        id: LOG,
        origin: ORIGIN.into(),
        key_name: KEY_NAME.into(),
        key: fill::key(&spec.dir)?,
        batch: BatchPolicy::default(),
        stamper: None,
        max_pending: 0,
        tile_cache: spec.tile_cache_mb.saturating_mul(64),
        // The lookups time storage and the tile cache, not entries kept in memory.
        entry_cache: 0,
        note_key: None,
        genesis: None,
    };
    let log = Log::open(cfg, storage).await?;
    let open = started.elapsed();
    let (rss_open, anon_open) = rss();
    let size = log.head().checkpoint.size;
    if size == 0 {
        return Err(ScaleError::Empty);
    }
    // The same pseudo-random indices for every kind of lookup (xorshift).
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let picks: Vec<u64> = (0..spec.lookups)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % size
        })
        .collect();
    let (mut by_leaf, mut absent, mut by_digest, mut proofs) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for &i in &picks {
        let leaf = merkle::leaf_hash(&body(i, spec.body_bytes));
        let t = Instant::now();
        let found = log.find_leaf(&leaf).await?;
        by_leaf.push(t.elapsed());
        if found != Some(i) {
            return Err(ScaleError::NotFoundByLeaf { index: i, found });
        }
        let t = Instant::now();
        let none = log.find_leaf(&sha256(&leaf)).await?;
        absent.push(t.elapsed());
        if none.is_some() {
            return Err(ScaleError::AbsentFound);
        }
        let t = Instant::now();
        let page = log.indices_by_digest(&digest(i), None, 10).await?;
        by_digest.push(t.elapsed());
        if page.indices != [i] {
            return Err(ScaleError::NotFoundByDigest { index: i, got: page.indices });
        }
        let t = Instant::now();
        let proof = log.inclusion_proof(i, size)?;
        let entry = log.entry_async(i).await?.ok_or(ScaleError::Missing { index: i })?;
        proofs.push(t.elapsed());
        merkle::verify_inclusion(&merkle::leaf_hash(&entry.body), i, size, &proof, &log.head().checkpoint.root_hash)
            .map_err(|source| ScaleError::ProofInvalid { index: i, source })?;
    }
    let (rss_after, anon_after) = rss();
    let (cached, hits, misses) = log.tile_cache_stats();
    let disk: u64 = std::fs::read_dir(&spec.dir)
        .map_err(|source| ScaleError::Disk { dir: spec.dir.clone(), source })?
        .filter_map(Result::ok)
        .filter(|e| matches!(e.file_name().to_str(), Some("log.sqlite" | "log.sqlite.keys")))
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum();
    let ((leaf50, leaf99), (_, abs99), (_, dig99), (proof50, proof99)) =
        (percentiles(by_leaf), percentiles(absent), percentiles(by_digest), percentiles(proofs));
    Ok(ScaleReport {
        entries: size,
        body_bytes: spec.body_bytes,
        open_s: open.as_secs_f64(),
        rss_before_bytes: rss_before,
        rss_anon_before_bytes: anon_before,
        rss_open_bytes: rss_open,
        rss_anon_open_bytes: anon_open,
        rss_after_bytes: rss_after,
        rss_anon_after_bytes: anon_after,
        lookups: spec.lookups,
        leaf_p50_us: leaf50,
        leaf_p99_us: leaf99,
        absent_p99_us: abs99,
        digest_p99_us: dig99,
        proof_p50_us: proof50,
        proof_p99_us: proof99,
        disk_bytes: disk,
        disk_bytes_per_entry: disk as f64 / size as f64,
        tile_cache: TileCacheStats { tiles: cached, hits, misses },
    })
}

impl ScaleReport {
    /// One markdown row under its header, as docs/performance.md quotes it.
    pub fn table(&self) -> String {
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        let c = &self.tile_cache;
        format!(
            "| Entries | Open | RSS (anon) before open | after open | after {} lookups of each kind | Find by leaf hash p50 / p99 | Absent leaf p99 | Find by digest p99 | Proof + entry read p99 | Tile cache (tiles, hit rate) | Disk per entry (database + key index) |\n\
             |---|---|---|---|---|---|---|---|---|---|---|\n\
             | {} | {:.2} s | {:.0} MiB ({:.0}) | {:.0} MiB ({:.0}) | {:.0} MiB ({:.0}) | {:.0} / {:.0} µs | {:.0} µs | {:.0} µs | {:.0} µs (p50 {:.0}) | {}, {:.0}% | {:.0} B |\n",
            self.lookups,
            self.entries,
            self.open_s,
            mib(self.rss_before_bytes),
            mib(self.rss_anon_before_bytes),
            mib(self.rss_open_bytes),
            mib(self.rss_anon_open_bytes),
            mib(self.rss_after_bytes),
            mib(self.rss_anon_after_bytes),
            self.leaf_p50_us,
            self.leaf_p99_us,
            self.absent_p99_us,
            self.digest_p99_us,
            self.proof_p99_us,
            self.proof_p50_us,
            c.tiles,
            100.0 * c.hits as f64 / (c.hits + c.misses).max(1) as f64,
            self.disk_bytes_per_entry,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_have_the_asked_size_and_differ() {
        for len in [100, 700, 1500] {
            assert_eq!(body(7, len).len(), len);
        }
        assert_ne!(body(1, 700), body(2, 700));
        // Too short for the padding: the prefix stays whole.
        assert!(body(3, 10).starts_with(b"{\"kind\":\"scale\",\"index\":3,\"pad\":\""));
    }

    /// A small log filled, then measured in this process: every lookup finds its entry.
    #[test]
    fn a_filled_log_is_measured() {
        let dir = tempfile::tempdir().unwrap();
        let spec = ScaleSpec { dir: dir.path().join("log"), entries: 5000, body_bytes: 300, lookups: 50, tile_cache_mb: 1 };
        let mut lines = Vec::new();
        fill(&spec, &mut |l| lines.push(l)).unwrap();
        assert!(lines[0].starts_with("filling ") && lines[0].ends_with(" to 5000 entries (300 bytes each)"), "{lines:?}");
        let r = measure(&spec).unwrap();
        assert_eq!((r.entries, r.body_bytes, r.lookups), (5000, 300, 50));
        // The database may still be mostly in its WAL, which is not counted.
        assert!(r.disk_bytes > 0 && r.leaf_p99_us > 0.0 && r.tile_cache.tiles > 0, "{r:?}");
        let json = serde_json::to_value(&r).unwrap();
        assert!(json.get("rss_before_bytes").is_none() && json["tile_cache"]["tiles"].is_u64(), "{json}");
        let table = r.table();
        assert_eq!(table.lines().count(), 3);
        assert!(table.contains("after 50 lookups of each kind") && table.lines().nth(2).unwrap().starts_with("| 5000 | "), "{table}");
        // Filling again to the same size adds nothing.
        fill(&spec, &mut |l| panic!("{l}")).unwrap();
    }
}
