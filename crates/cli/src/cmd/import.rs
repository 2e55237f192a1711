//! `signet import rekor`: brings a Rekor v1 log along (`signet_server::shards::import`).
//!
//! Offline, on a new data dir or database: every entry of one tree of the Rekor is fetched
//! (`POST /api/v1/log/entries/retrieve`, ten at a time, a few requests in flight), checked
//! ([`signet_log::rekor::copy`]), and copied in order; the root of all of them must be the
//! root of the tree head the Rekor signed ([`signet_log::import`]). Then the copy becomes
//! shard 0 of the Rekor v1 log, frozen, and signet's own log shard 1.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use signet_client::http::Http;
use signet_core::pubkey::PublicKey;
use signet_log::import::{CopiedEntry, Import};
use signet_log::rekor::copy::{check, Served};
use signet_server::shards::import::{Source, Target, IMPORTED_LOG};

#[derive(clap::Subcommand)]
pub enum ImportCmd {
    /// Copy every entry of one tree of a Rekor v1 log (Rekor, RHTAS) into a new instance, checking
    /// each, and proving all of them against the tree head the Rekor signed. The copy is then served
    /// as the first shard of this instance's Rekor v1 log, frozen, under the Rekor's tree ID and key:
    /// old bundles verify, their entries answer by UUID and index, and new entries follow it. Offline,
    /// before the instance's first start; a run cut short resumes where it stopped.
    Rekor(RekorArgs),
}

#[derive(clap::Args)]
pub struct RekorArgs {
    #[command(flatten)]
    instance: super::Instance,
    /// Storage URL of the new instance: sqlite://PATH or postgres://USER@HOST:PORT/DATABASE.
    #[arg(long)]
    storage: Option<String>,
    /// The Rekor's base URL.
    #[arg(long, value_name = "URL")]
    url: String,
    /// The tree to copy (the `treeID` of its `GET /api/v1/log`).
    #[arg(long, value_name = "ID")]
    tree_id: i64,
    /// The Rekor's public key (PEM): what its tree heads and SETs are checked with. Take it
    /// from the trusted root your clients use, not from the Rekor being copied.
    #[arg(long, value_name = "FILE")]
    public_key: std::path::PathBuf,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=64))]
    concurrency: u16,
}

pub fn run(cmd: ImportCmd) -> ExitCode {
    let ImportCmd::Rekor(args) = cmd;
    match rekor(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            errln!("signet import rekor: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Entries committed per batch of the copy.
const BATCH: u64 = 1000;
/// Rekor's limit per retrieve request.
const PER_REQUEST: u64 = 10;

fn rekor(args: RekorArgs) -> Result<(), String> {
    let cfg = args.instance.load_config(args.storage.clone())?;
    let base = args.url.trim_end_matches('/').to_string();
    let pem = std::fs::read(&args.public_key).map_err(|e| format!("{}: {e}", args.public_key.display()))?;
    let block = signet_core::pem::decode_first(&pem).map_err(|e| format!("{}: {e}", args.public_key.display()))?;
    if block.label != "PUBLIC KEY" {
        return Err(format!("{}: a {} block; expected the Rekor's PUBLIC KEY", args.public_key.display(), block.label));
    }
    let key = PublicKey::from_spki(&block.der).map_err(|e| format!("{}: {e}", args.public_key.display()))?;
    let http = Http::new(Duration::from_secs(60));

    // The tree head, checked before anything is written.
    let info = http.get_json("Rekor", &format!("{base}/api/v1/log"), None).map_err(|e| e.to_string())?;
    let (note, size) = tree_head(&info, args.tree_id)?;
    let parsed = signet_core::note::SignedNote::parse(&note).map_err(|e| format!("the Rekor's tree head: {e}"))?;
    let key_name = parsed
        .signatures
        .iter()
        .map(|s| s.name.clone())
        .find(|name| parsed.verify(name, &key).is_ok())
        .ok_or_else(|| format!("the Rekor's tree head is not signed by the key in {}", args.public_key.display()))?;
    let origin = parsed.checkpoint.origin.clone();
    if !origin.ends_with(&format!(" - {}", args.tree_id)) {
        return Err(format!("the Rekor's tree head names origin {origin:?}, not tree {}", args.tree_id));
    }
    let source = Source { url: base.clone(), tree_id: args.tree_id, spki: signet_core::b64::encode(&block.der), origin, key_name: key_name.clone() };

    let target = Target::hold(&cfg.data_dir, cfg.storage.as_deref()).map_err(|e| e.to_string())?;
    target.claim(&source).map_err(|e| e.to_string())?;
    let storage = target.storage();
    let started = Instant::now();
    let mut copy = match Import::open(storage.clone(), IMPORTED_LOG) {
        Ok(copy) => copy,
        // Copied and proven by a run before, which stopped before shard 1 was recorded.
        Err(signet_log::import::ImportError::Finished(_)) => return register(&cfg, &target, &source, size, started, 0, &block.der),
        Err(e) => return Err(e.to_string()),
    };
    let resumed = copy.size();
    if resumed > 0 {
        errln!("resuming after the {resumed} entries a run before copied");
    }
    let mut said = Instant::now();
    while copy.size() < size {
        let from = copy.size();
        let to = size.min(from + BATCH);
        let entries = fetch(&http, &base, args.tree_id, &key, from, to, args.concurrency)?;
        copy.append(entries).map_err(|e| e.to_string())?;
        if said.elapsed() >= Duration::from_secs(5) {
            said = Instant::now();
            let rate = (copy.size() - resumed) as f64 / started.elapsed().as_secs_f64();
            errln!("copied {} of {size} entries ({rate:.0}/s)", copy.size());
        }
    }
    let (spki, name) = (block.der.clone(), key_name.clone());
    copy.finish(&note, move |note| signet_core::note::verify(note, &name, &spki)).map_err(|e| e.to_string())?;
    register(&cfg, &target, &source, size, started, size - resumed, &block.der)
}

/// The copy of `size` entries made shard 0, and shard 1 started after it; prints what was done.
fn register(cfg: &signet_server::Config, target: &Target, source: &Source, size: u64, started: Instant, copied: u64, spki: &[u8]) -> Result<(), String> {
    let storage = target.storage();
    let copied_in = started.elapsed();
    let homes = signet_server::shards::KeyHomes::of(&cfg.keys);
    // Its key is valid for what it signed: up to its newest entry (a second past it).
    let last_time = match size {
        0 => signet_server::shards::now(),
        n => storage.entry(IMPORTED_LOG, n - 1).map_err(|e| e.to_string())?.map_or(0, |e| e.integrated_time),
    };
    let rotated = target.register(&cfg.data_dir, &homes, source, size, last_time + 1).map_err(|e| e.to_string())?;
    let (base, rate) = (&source.url, copied as f64 / copied_in.as_secs_f64().max(1e-9));
    outln!(
        "{}",
        json!({
            "imported": {"url": base, "treeID": source.tree_id.to_string(), "treeSize": size, "origin": source.origin, "logID": hex::encode(signet_core::hash::sha256(spki))},
            "copied": copied,
            "seconds": copied_in.as_secs_f64(),
            "entriesPerSecond": rate.round(),
            "next": {"shard": rotated.active.number, "treeID": rotated.active.tree_id.to_string(), "startIndex": rotated.active.start, "key": rotated.key},
        })
    );
    errln!(
        "copied and proved {copied} of the {size} entries of tree {} in {:.1} s ({rate:.0}/s); they are shard 0 of this instance's Rekor v1 log, frozen, and its own entries start at index {} (shard {}, key {}). Start the server, and export the trust documents again: they list the Rekor's key",
        source.tree_id,
        copied_in.as_secs_f64(),
        rotated.active.start,
        rotated.active.number,
        rotated.key
    );
    Ok(())
}

/// The signed tree head and size of tree `tree_id` in a Rekor's `GET /api/v1/log` answer.
fn tree_head(info: &Value, tree_id: i64) -> Result<(String, u64), String> {
    let id = tree_id.to_string();
    let inactive = info.get("inactiveShards").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    if info.get("treeID").and_then(Value::as_str) != Some(id.as_str()) {
        let trees: Vec<&str> = std::iter::once(info.get("treeID").and_then(Value::as_str).unwrap_or("?"))
            .chain(inactive.iter().filter_map(|s| s.get("treeID").and_then(Value::as_str)))
            .collect();
        return Err(format!("the Rekor has no active tree {tree_id}; its trees: {}", trees.join(", ")));
    }
    if !inactive.is_empty() {
        // Its entries' log indices would start after the inactive trees', which this instance's
        // shard 0 cannot: a sharded Rekor is not imported yet.
        return Err(format!("the Rekor has {} inactive trees before tree {tree_id}: a sharded Rekor cannot be imported yet, only one whose only tree this is", inactive.len()));
    }
    let note = info.get("signedTreeHead").and_then(Value::as_str).ok_or("the Rekor's GET /api/v1/log has no signedTreeHead")?;
    let size = info.get("treeSize").and_then(Value::as_u64).ok_or("the Rekor's GET /api/v1/log has no treeSize")?;
    Ok((note.to_string(), size))
}

/// Entries `from..to`, checked, in order: `PER_REQUEST` per request, `concurrency` requests
/// in flight.
fn fetch(http: &Http, base: &str, tree_id: i64, key: &PublicKey, from: u64, to: u64, concurrency: u16) -> Result<Vec<CopiedEntry>, String> {
    let chunks: Vec<(u64, u64)> = (from..to).step_by(PER_REQUEST as usize).map(|a| (a, to.min(a + PER_REQUEST))).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<Result<Vec<CopiedEntry>, String>>>> = chunks.iter().map(|_| std::sync::Mutex::new(None)).collect();
    let url = format!("{base}/api/v1/log/entries/retrieve");
    std::thread::scope(|scope| {
        for _ in 0..concurrency.min(chunks.len() as u16).max(1) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&(a, b)) = chunks.get(i) else { break };
                let got = fetch_chunk(http, &url, tree_id, key, a, b);
                let failed = got.is_err();
                if let Ok(mut slot) = results[i].lock() {
                    *slot = Some(got);
                }
                if failed {
                    next.store(chunks.len(), std::sync::atomic::Ordering::Relaxed);
                    break;
                }
            });
        }
    });
    let mut out = Vec::with_capacity((to - from) as usize);
    for (slot, &(a, _)) in results.into_iter().zip(&chunks) {
        match slot.into_inner().ok().flatten() {
            Some(Ok(entries)) => out.extend(entries),
            Some(Err(e)) => return Err(e),
            None => return Err(format!("entries from {a} were not fetched (another request failed first)")),
        }
    }
    Ok(out)
}

/// Entries `a..b` in one request, checked, in order; retried a few times on a failure of the
/// exchange (a Rekor under load answers 5xx now and then), never on a wrong answer.
fn fetch_chunk(http: &Http, url: &str, tree_id: i64, key: &PublicKey, a: u64, b: u64) -> Result<Vec<CopiedEntry>, String> {
    let body = json!({"logIndexes": (a..b).collect::<Vec<u64>>()});
    let mut tries = 0;
    let answer = loop {
        match http.post_json("Rekor", url, &body, None) {
            Ok(v) => break v,
            Err(_) if tries < 4 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(200 << tries));
            }
            Err(e) => return Err(e.to_string()),
        }
    };
    let list = answer.as_array().ok_or_else(|| format!("entries {a}..{b}: the Rekor's answer is not a list"))?;
    // Rekor answers one {uuid: entry} map per index asked for, in order.
    let mut by_index = std::collections::BTreeMap::new();
    for map in list {
        let Some(map) = map.as_object() else { return Err(format!("entries {a}..{b}: an item of the answer is not a map")) };
        for (uuid, entry) in map {
            let served: Served = serde_json::from_value(entry.clone()).map_err(|e| format!("entry {uuid}: {e}"))?;
            let index = served.log_index;
            if !(a..b).contains(&index) {
                return Err(format!("asked for entries {a}..{b}, got entry {index}"));
            }
            by_index.insert(index, check(uuid, &served, index, tree_id, key).map_err(|e| e.to_string())?);
        }
    }
    (a..b).map(|i| by_index.remove(&i).ok_or_else(|| format!("the Rekor did not answer entry {i}"))).collect()
}
