//! `signet audit verify`: checks the hash chain of `<data dir>/audit.sqlite` and its anchors,
//! with the segments cut from it (`audit-segments/`) that are still there; `--segment FILE`
//! checks one segment alone, wherever it was archived. With `--storage postgres://…`, the live
//! chain is the instance's chain in PostgreSQL's shared audit tables.
//! `signet audit tail`: prints the last records, and with `--follow` those that come after.
//!
//! Exit 0 when every record chains and every anchor holds; 1 at the first record or anchor
//! that does not (it is named), or when the file cannot be read as an audit log; 2 when
//! there is no audit log to check.
//!
//! An anchor holds when its log entry is the audit key's signature over the statement of
//! the chain's head at its record, and the entry is included in the Rekor v2 log under a
//! checkpoint that the log's key (from the instance's trusted root) signed.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::Value;
use signet_core::note::SignedNote;
use signet_core::{b64, hash::sha256, pubkey::{HashAlg, PublicKey}};
use signet_guard::audit::{self, anchor, Anchor, VerifyError};
use signet_verify::bundle::{TlogEntry, Version};
use signet_verify::TrustedRoot;

#[derive(clap::Subcommand)]
pub enum Audit {
    /// Check every record of the audit log against the chain; exit 1 on tampering.
    Verify {
        /// The server's data dir (it holds audit.sqlite, the trusted root and the audit key).
        #[arg(long, default_value = "signet-data")]
        data_dir: PathBuf,
        /// Check this segment file alone (an archived one), against its own anchors.
        #[arg(long)]
        segment: Option<PathBuf>,
        /// Also check the anchors against the Rekor v2 log as it is now, at this base URL:
        /// its signed checkpoint must extend each anchor's (a consistency proof from its tiles).
        #[arg(long)]
        log: Option<String>,
        #[command(flatten)]
        shared: Shared,
    },
    /// Print the last records, one JSON object per line, oldest first.
    Tail {
        /// The server's data dir (it holds audit.sqlite).
        #[arg(long, default_value = "signet-data")]
        data_dir: PathBuf,
        /// How many records.
        #[arg(short = 'n', long, default_value_t = 20)]
        lines: usize,
        /// Keep printing records as the server writes them (every 0.5 s), until interrupted.
        #[arg(short, long)]
        follow: bool,
        #[command(flatten)]
        shared: Shared,
    },
}

/// Where the live chain is when the instance runs on PostgreSQL.
#[derive(clap::Args)]
pub struct Shared {
    /// The instances' PostgreSQL (`storage = "postgres://…"`): the live chain is there, not in
    /// audit.sqlite (segments are still files in the data dir).
    #[arg(long, value_name = "URL")]
    storage: Option<String>,
    /// The chain's name in PostgreSQL: `[guard.audit] chain`, if the instance sets one (by
    /// default, the name made from the audit key in the data dir).
    #[arg(long, requires = "storage")]
    chain: Option<String>,
}

/// The live chain of the instance at `data_dir`: audit.sqlite, or its chain in PostgreSQL.
fn place(data_dir: &Path, shared: &Shared) -> Result<audit::Place, String> {
    let Some(url) = &shared.storage else { return Ok(audit::Place::sqlite(data_dir)) };
    if !url.starts_with("postgres://") && !url.starts_with("postgresql://") {
        return Err(format!("--storage {url:?}: the audit chain leaves the data dir only for PostgreSQL (postgres://…)"));
    }
    let chain = signet_server::anchor::chain_name_of(data_dir, shared.chain.as_deref()).map_err(|e| e.to_string())?;
    audit::Place::postgres(data_dir, url, &chain).map_err(|e| e.to_string())
}

pub fn run(cmd: Audit) -> ExitCode {
    match cmd {
        Audit::Tail { data_dir, lines, follow, shared } => {
            let data_dir = match place(&data_dir, &shared) {
                Ok(place) => place,
                Err(e) => {
                    errln!("signet audit tail: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let mut after = 0;
            let mut want = lines;
            if lines == 0 {
                // Only what comes next: start after the current last record.
                after = audit::tail(&data_dir, 0, 1).ok().and_then(|r| r.last().map(|(seq, _)| *seq)).unwrap_or(0);
            }
            loop {
                match audit::tail(&data_dir, after, want) {
                    Ok(records) => {
                        for (seq, line) in records {
                            outln!("{line}");
                            after = seq;
                        }
                    }
                    Err(e) => {
                        errln!("signet audit tail: {e}");
                        return ExitCode::from(if matches!(e, VerifyError::Missing(_)) { 2 } else { 1 });
                    }
                }
                if !follow {
                    return ExitCode::SUCCESS;
                }
                want = usize::MAX;
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
        }
        Audit::Verify { data_dir, segment, log, shared } => match verify(&data_dir, &shared, segment.as_deref(), log.as_deref()) {
            Ok(()) => ExitCode::SUCCESS,
            Err((e, code)) => {
                errln!("signet audit verify: {e}");
                ExitCode::from(code)
            }
        },
    }
}

/// Checks the chain's files, then their anchors (each once, with the trusted root and the
/// audit key read once), then, with `log`, the anchors against the live log. The error and
/// its exit code: 2 when there is no audit log, 1 otherwise.
fn verify(data_dir: &Path, shared: &Shared, segment: Option<&Path>, log: Option<&str>) -> Result<(), (String, u8)> {
    let files = match segment {
        Some(file) => audit::verify_file(file).map(|v| vec![(file.to_path_buf(), v)]),
        None => audit::verify_all(&place(data_dir, shared).map_err(|e| (e, 1))?),
    }
    .map_err(|e| (e.to_string(), if matches!(e, VerifyError::Missing(_)) { 2 } else { 1 }))?;
    // A file's start anchor is the end anchor of the one before: checked once.
    let mut anchors: Vec<(&Path, &Anchor)> =
        files.iter().flat_map(|(file, v)| v.anchors.iter().map(move |a| (file.as_path(), a))).collect();
    anchors.dedup_by_key(|(_, a)| a.seq);
    let root = match (anchors.is_empty(), log) {
        (true, None) => None,
        _ => Some(trusted_root(data_dir).map_err(|e| (e, 1))?),
    };
    if let Some(root) = &root {
        anchors_hold(data_dir, root, &anchors).map_err(|e| (e, 1))?;
    }
    report(&files, anchors.len());
    if let (Some(url), Some(root)) = (log, &root) {
        let (size, checked, retired) = anchors_online(root, &anchors, url).map_err(|e| (e, 1))?;
        outln!("anchors online: {checked} consistent with the checkpoint of {url} (size {size})");
        if retired > 0 {
            outln!("anchors online: {retired} in a Rekor v2 log rotated out since (frozen, not served): checked offline only");
        }
    }
    Ok(())
}

/// What was checked: the records, the segments they span, the anchors.
fn report(files: &[(PathBuf, audit::Verified)], anchors: usize) {
    let (Some((_, first)), Some((_, last))) = (files.first(), files.last()) else { return };
    let records = last.records - first.start;
    outln!("audit chain ok: {records} records, head {}", hex::encode(last.head));
    if files.len() > 1 || first.start > 0 {
        let live = |path: &Path| path.ends_with(audit::FILE) || path == Path::new(audit::verify::LIVE_IN_POSTGRES);
        let segments = files.iter().filter(|(path, _)| !live(path)).count();
        outln!("segments ok: {segments}; records {}..{} checked", first.start + 1, last.records);
    }
    if first.start > 0 {
        outln!(
            "records 1..{} are in segments archived elsewhere; the first file here starts at record {} of the chain, which the transparency log anchors",
            first.start,
            first.start + 1
        );
    }
    match last.anchors.last() {
        Some(a) => outln!(
            "anchors ok: {anchors}, the last at record {} (Rekor v2 log index {}); {} records after it not yet anchored",
            a.seq,
            a.log_index,
            last.unanchored()
        ),
        None => outln!("anchors: none; {} records not yet anchored", last.unanchored()),
    }
}

/// Checks each anchor's log entry against the trusted root and the instance's audit key.
fn anchors_hold(data_dir: &Path, root: &TrustedRoot, anchors: &[(&Path, &Anchor)]) -> Result<(), String> {
    if anchors.is_empty() {
        return Ok(());
    }
    let key_path = data_dir.join("keys").join("audit.pem");
    let pkcs8 = std::fs::read(&key_path).map_err(|e| format!("{}: {e} (the audit key that signed the anchors)", key_path.display()))?;
    let block = signet_core::pem::decode_first(&pkcs8).map_err(|e| format!("{}: {e}", key_path.display()))?;
    let key = signet_keys::Signer::from_pkcs8(&block.der, &key_path.display().to_string(), &[signet_keys::Algorithm::EcdsaP256Sha256]).map_err(|e| e.to_string())?;
    for (file, a) in anchors {
        anchor_holds(root, key.spki_der(), a).map_err(|why| {
            format!("{}: audit anchor at record {} (Rekor v2 log index {}) does not hold: {why}", file.display(), a.seq, a.log_index)
        })?;
    }
    Ok(())
}

/// The instance's trusted root, as clients read it.
fn trusted_root(data_dir: &Path) -> Result<TrustedRoot, String> {
    let instance = signet_server::trust::instance(data_dir, None).map_err(|e| e.to_string())?;
    let root_json = serde_json::to_vec(&instance.trusted_root()).map_err(|e| e.to_string())?;
    TrustedRoot::from_json(&root_json).map_err(|e| format!("the instance's trusted root: {e}"))
}

fn anchor_holds(root: &TrustedRoot, audit_spki: &[u8], a: &Anchor) -> Result<(), String> {
    let entry = TlogEntry::from_json(a.entry.as_bytes()).map_err(|e| e.to_string())?;
    if entry.log_index != a.log_index {
        return Err(format!("its stored entry is at index {}", entry.log_index));
    }
    signet_verify::tlog::verify_entry(root, &entry, Version::V03).map_err(|e| format!("its log entry: {e}"))?;
    let body: Value = serde_json::from_slice(&entry.body).map_err(|e| format!("its log entry's body: {e}"))?;
    let spec = &body["spec"]["hashedRekordV002"];
    let digest = spec["data"]["digest"].as_str().and_then(|d| b64::decode(d).ok()).ok_or("its log entry carries no digest")?;
    if digest != sha256(&anchor::statement(a.seq, &a.head)) {
        return Err("its log entry is not the statement of this record's hash".into());
    }
    let verifier = &spec["signature"]["verifier"]["publicKey"]["rawBytes"];
    let spki = verifier.as_str().and_then(|k| b64::decode(k).ok()).ok_or("its log entry names no public key")?;
    if spki != audit_spki {
        return Err("its log entry is signed by another key than the instance's audit key".into());
    }
    let signature = spec["signature"]["content"].as_str().and_then(|c| b64::decode(c).ok()).ok_or("its log entry holds no signature")?;
    let key = PublicKey::from_spki(&spki).map_err(|e| e.to_string())?;
    key.verify_digest(HashAlg::Sha256, &digest, &signature).map_err(|_| "the audit key's signature does not verify".to_string())
}

/// Checks the anchors against the log as it is now: its checkpoint at `url`, signed by the
/// key of the trusted root, must be consistent with the checkpoint each anchor was proved
/// under, by a consistency proof built from the log's tiles. An anchor proved under a
/// checkpoint of a log that later forked from it (a split view) fails here. Anchors in a log
/// whose key was rotated out are counted apart (the third number).
fn anchors_online(root: &TrustedRoot, anchors: &[(&Path, &Anchor)], url: &str) -> Result<(u64, usize, usize), String> {
    let url = url.trim_end_matches('/');
    let http = signet_client::http::Http::default();
    let get = |path: &str| -> Result<Vec<u8>, String> {
        http.get("Rekor v2 log", &format!("{url}/api/v2/{path}"), 1 << 20).map(|r| r.body).map_err(|e| e.to_string())
    };
    let note_text = String::from_utf8(get("checkpoint")?).map_err(|_| "the log's checkpoint is not text".to_string())?;
    let note = SignedNote::parse(&note_text).map_err(|e| format!("the log's checkpoint: {e}"))?;
    let live = note.checkpoint.clone();
    let fetch = |path: &str| get(path);
    let tree = signet_log::remote::TileNodes::new(live.size, &fetch);
    let (mut checked, mut retired, mut verified_for): (usize, usize, Option<Vec<u8>>) = (0, 0, None);
    for (_, a) in anchors {
        let entry = TlogEntry::from_json(a.entry.as_bytes()).map_err(|e| format!("anchor at record {}: {e}", a.seq))?;
        // The live checkpoint must be signed by the log each anchor is in: checked once per log.
        if verified_for.as_deref() != Some(entry.log_id.as_slice()) {
            let (log, key) = signet_verify::tlog::log_of(root, &entry).map_err(|e| format!("anchor at record {}: {e}", a.seq))?;
            if let Err(e) = note.verify(&live.origin, key) {
                // A log rotated out (its key's window has ended) is frozen and no longer
                // served: its anchors were checked offline against the trusted root above.
                if log.valid.end.is_some() {
                    retired += 1;
                    continue;
                }
                return Err(format!("the checkpoint of {url} is not signed by the log that holds the anchors: {e}"));
            }
            verified_for = Some(entry.log_id.clone());
        }
        let proof = entry.inclusion_proof.as_ref().ok_or_else(|| format!("anchor at record {} keeps no inclusion proof", a.seq))?;
        let (size, old_root) = (proof.tree_size, proof.root_hash);
        if size > live.size {
            return Err(format!(
                "anchor at record {} was proved under a checkpoint of size {size}, but {url} now has {}: the log was rolled back, or this is another log",
                a.seq, live.size
            ));
        }
        let consistency = tree.consistency_proof(size).map_err(|e| format!("reading {url}'s tiles: {e}"))?;
        signet_log::merkle::verify_consistency(size, live.size, &consistency, &old_root, &live.root_hash).map_err(|e| {
            format!(
                "anchor at record {} was proved under a checkpoint of size {size} that {url}'s checkpoint of size {} does not extend: {e}",
                a.seq, live.size
            )
        })?;
        checked += 1;
    }
    Ok((live.size, checked, retired))
}
