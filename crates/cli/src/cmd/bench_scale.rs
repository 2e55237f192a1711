//! `signet bench scale`: one log of millions of entries on SQLite. How long it takes to open,
//! how much memory it holds open, how fast its lookups are, and what each entry costs on
//! disk (issue 18, "Indexes that fit any size").
//!
//! The log is filled through the storage API in large batches (real tiles, signed
//! checkpoints, bodies of a chosen size), which takes minutes where appending over HTTP would
//! take hours. The measurement then runs in a fresh process, so that its memory is the open
//! log's and not the filler's.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use signet_core::hash::sha256;
use signet_keys::Signer;
use signet_log::checkpoint::{Checkpoint, NoteSigner};
use signet_log::merkle;
use signet_log::storage::{Batch, NewEntry, SqliteStorage, Storage, StoredCheckpoint};
use signet_log::tree::{StoredNodes, Tree};
use signet_log::{BatchPolicy, Log, LogConfig};

#[derive(clap::Args)]
pub struct Args {
    /// Directory of the test log; the entries already in it are kept and added to.
    #[arg(long)]
    dir: PathBuf,
    /// Entries the log holds when it is measured.
    #[arg(long, default_value_t = 10_000_000)]
    entries: u64,
    /// Bytes of each entry's body (a Rekor v1 hashedrekord with a public key is ~700; with
    /// a certificate ~1,500).
    #[arg(long, default_value_t = 700)]
    body_bytes: usize,
    /// Lookups of each kind to time.
    #[arg(long, default_value_t = 10_000)]
    lookups: usize,
    /// MiB of tile cache for the opened log (`log.tile_cache_mb`).
    #[arg(long, default_value_t = 64)]
    tile_cache_mb: usize,
    /// Write the machine-readable result here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Measure only, in this process (the filling process runs itself again with this).
    #[arg(long, hide = true)]
    measure: bool,
}

const LOG: u8 = 1;
const ORIGIN: &str = "scale.bench/log";
const KEY_NAME: &str = "scale.bench";

pub fn run(a: Args) -> ExitCode {
    let result = if a.measure { measure(&a) } else { fill(&a).and_then(|()| remeasure(&a)) };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            errln!("signet bench scale: {e}");
            ExitCode::FAILURE
        }
    }
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

fn key(dir: &Path) -> Result<Arc<Signer>, String> {
    Signer::load_or_generate(&dir.join("log.pem"), signet_keys::Algorithm::EcdsaP256Sha256).map(Arc::new).map_err(|e| e.to_string())
}

/// Appends entries until the log holds `a.entries`, 4,096 per commit, as the sequencer would
/// store them (entries, changed tiles, a signed checkpoint), with the tree in bounded memory.
fn fill(a: &Args) -> Result<(), String> {
    std::fs::create_dir_all(&a.dir).map_err(|e| format!("{}: {e}", a.dir.display()))?;
    let storage = Arc::new(SqliteStorage::open(&db_path(&a.dir)).map_err(|e| e.to_string())?);
    let signer = NoteSigner::new(KEY_NAME, key(&a.dir)?);
    let size = storage.latest_checkpoint(LOG).map_err(|e| e.to_string())?.map_or(0, |c| c.size);
    let nodes = StoredNodes { storage: storage.clone(), log: LOG };
    let mut tree = Tree::open(Box::new(nodes), 0, size).map_err(|e| e.to_string())?;
    if size < a.entries {
        errln!("filling {} to {} entries ({} bytes each)", a.dir.display(), a.entries, a.body_bytes);
    }
    let started = Instant::now();
    while tree.size() < a.entries {
        let old = tree.size();
        let new = (old + 4096).min(a.entries);
        let entries: Vec<NewEntry> = (old..new)
            .map(|i| {
                let body = body(i, a.body_bytes);
                // A SET is a DER ECDSA P-256 signature, 70 to 72 bytes.
                NewEntry { index: i, leaf_hash: merkle::leaf_hash(&body), digest: Some(digest(i)), identity: None, public_key: None, body, stamp: Some(vec![0x30; 71]), integrated_time: None, attestation: None }
            })
            .collect();
        commit_entries(storage.as_ref(), &mut tree, &signer, (LOG, ORIGIN), old, entries)?;
        if new % 1_000_000 < 4096 {
            errln!("  {new} entries ({:.0} s)", started.elapsed().as_secs_f64());
        }
    }
    storage.flush_keys().map_err(|e| e.to_string())?;
    Ok(())
}

/// Commits `entries` (indices `old..`) to log `log` as the sequencer would: the tree extended,
/// its changed tiles, and a checkpoint signed under `origin`, in one batch. The benches that
/// build large logs through the storage API share it.
pub(crate) fn commit_entries(
    storage: &dyn Storage,
    tree: &mut Tree,
    signer: &NoteSigner,
    (log, origin): (u8, &str),
    old: u64,
    entries: Vec<NewEntry>,
) -> Result<(), String> {
    let new = old + entries.len() as u64;
    for e in &entries {
        tree.push(e.leaf_hash);
    }
    let root = tree.root(new).map_err(|e| e.to_string())?;
    let tiles = signet_log::sequencer::changed_tiles(tree, old, new).map_err(|e| e.to_string())?;
    let leaf_tiles = signet_log::sequencer::filled_leaf_tiles(tree, old, new).map_err(|e| e.to_string())?;
    let cp = signer.sign(Checkpoint { origin: origin.into(), size: new, root_hash: root }).map_err(|e| e.to_string())?;
    let batch = Batch { log, integrated_time: 1_764_000_000, entries, tiles, leaf_tiles, checkpoint: StoredCheckpoint { size: new, note: cp.note } };
    storage.commit(&batch).map_err(|e| e.to_string())?;
    tree.settle(new);
    Ok(())
}

fn remeasure(a: &Args) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["bench", "scale", "--measure", "--dir"]).arg(&a.dir);
    cmd.args(["--entries", &a.entries.to_string(), "--lookups", &a.lookups.to_string(), "--tile-cache-mb", &a.tile_cache_mb.to_string()]);
    if let Some(j) = &a.json {
        cmd.arg("--json").arg(j);
    }
    let status = cmd.status().map_err(|e| e.to_string())?;
    status.success().then_some(()).ok_or_else(|| format!("the measuring process failed: {status}"))
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

fn measure(a: &Args) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().map_err(|e| e.to_string())?;
    runtime.block_on(measure_async(a))
}

async fn measure_async(a: &Args) -> Result<(), String> {
    let (rss_before, anon_before) = rss();
    let started = Instant::now();
    let storage: Arc<dyn Storage> = Arc::new(SqliteStorage::open(&db_path(&a.dir)).map_err(|e| e.to_string())?);
    let cfg = LogConfig {
        id: LOG,
        origin: ORIGIN.into(),
        key_name: KEY_NAME.into(),
        key: key(&a.dir)?,
        batch: BatchPolicy::default(),
        stamper: None,
        max_pending: 0,
        tile_cache: a.tile_cache_mb.saturating_mul(64),
        note_key: None,
        genesis: None,
    };
    let log = Log::open(cfg, storage).await.map_err(|e| e.to_string())?;
    let open = started.elapsed();
    let (rss_open, anon_open) = rss();
    let size = log.head().checkpoint.size;
    if size == 0 {
        return Err("the log is empty".into());
    }
    // The same pseudo-random indices for every kind of lookup (xorshift).
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let picks: Vec<u64> = (0..a.lookups)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % size
        })
        .collect();
    let (mut by_leaf, mut absent, mut by_digest, mut proofs) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for &i in &picks {
        let leaf = merkle::leaf_hash(&body(i, a.body_bytes));
        let t = Instant::now();
        let found = log.find_leaf(&leaf).await.map_err(|e| e.to_string())?;
        by_leaf.push(t.elapsed());
        if found != Some(i) {
            return Err(format!("entry {i} was not found by its leaf hash (got {found:?})"));
        }
        let t = Instant::now();
        let none = log.find_leaf(&sha256(&leaf)).await.map_err(|e| e.to_string())?;
        absent.push(t.elapsed());
        if none.is_some() {
            return Err("a leaf hash the log does not hold was found".into());
        }
        let t = Instant::now();
        let page = log.indices_by_digest(&digest(i), None, 10).await.map_err(|e| e.to_string())?;
        by_digest.push(t.elapsed());
        if page.indices != [i] {
            return Err(format!("entry {i} was not found by its digest (got {:?})", page.indices));
        }
        let t = Instant::now();
        let proof = log.inclusion_proof(i, size).map_err(|e| e.to_string())?;
        let entry = log.entry_async(i).await.map_err(|e| e.to_string())?.ok_or_else(|| format!("entry {i} is missing"))?;
        proofs.push(t.elapsed());
        merkle::verify_inclusion(&merkle::leaf_hash(&entry.body), i, size, &proof, &log.head().checkpoint.root_hash)
            .map_err(|e| format!("the proof of entry {i} does not verify: {e}"))?;
    }
    let (rss_after, anon_after) = rss();
    let (cached, hits, misses) = log.tile_cache_stats();
    let disk: u64 = std::fs::read_dir(&a.dir)
        .map_err(|e| e.to_string())?
        .filter_map(Result::ok)
        // The database and its key index; not the WAL, whose size is bounded by the
        // checkpointer, not by the log.
        .filter(|e| matches!(e.file_name().to_str(), Some("log.sqlite" | "log.sqlite.keys")))
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum();
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let ((leaf50, leaf99), (abs50, abs99), (dig50, dig99), (proof50, proof99)) =
        (percentiles(by_leaf), percentiles(absent), percentiles(by_digest), percentiles(proofs));
    outln!("| Entries | Open | RSS (anon) before open | after open | after {} lookups of each kind | Find by leaf hash p50 / p99 | Absent leaf p99 | Find by digest p99 | Proof + entry read p99 | Tile cache (tiles, hit rate) | Disk per entry (database + key index) |", a.lookups);
    outln!("|---|---|---|---|---|---|---|---|---|---|---|");
    outln!(
        "| {size} | {:.2} s | {:.0} MiB ({:.0}) | {:.0} MiB ({:.0}) | {:.0} MiB ({:.0}) | {leaf50:.0} / {leaf99:.0} µs | {abs99:.0} µs | {dig99:.0} µs | {proof99:.0} µs (p50 {proof50:.0}) | {cached}, {:.0}% | {:.0} B |",
        open.as_secs_f64(),
        mib(rss_before),
        mib(anon_before),
        mib(rss_open),
        mib(anon_open),
        mib(rss_after),
        mib(anon_after),
        100.0 * hits as f64 / (hits + misses).max(1) as f64,
        disk as f64 / size as f64,
    );
    let _ = (abs50, dig50);
    if let Some(path) = &a.json {
        let v = serde_json::json!({
            "entries": size, "body_bytes": a.body_bytes, "open_s": open.as_secs_f64(),
            "rss_open_bytes": rss_open, "rss_anon_open_bytes": anon_open,
            "rss_after_bytes": rss_after, "rss_anon_after_bytes": anon_after,
            "leaf_p50_us": leaf50, "leaf_p99_us": leaf99, "absent_p99_us": abs99, "digest_p99_us": dig99,
            "proof_p50_us": proof50, "proof_p99_us": proof99, "disk_bytes": disk, "disk_bytes_per_entry": disk as f64 / size as f64,
            "tile_cache": {"tiles": cached, "hits": hits, "misses": misses},
        });
        std::fs::write(path, v.to_string()).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}
