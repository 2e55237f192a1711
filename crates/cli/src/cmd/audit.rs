//! `signet audit verify`: checks the hash chain of `<data dir>/audit.sqlite` and its anchors,
//! with the segments cut from it (`audit-segments/`) that are still there; `--segment FILE`
//! checks one segment alone, wherever it was archived.
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
    },
}

pub fn run(cmd: Audit) -> ExitCode {
    match cmd {
        Audit::Tail { data_dir, lines, follow } => {
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
        Audit::Verify { data_dir, segment } => {
            let checked = match &segment {
                Some(file) => audit::verify_file(file).map(|v| vec![(file.clone(), v)]),
                None => audit::verify_all(&data_dir),
            };
            match checked.map_err(|e| (e.to_string(), matches!(e, VerifyError::Missing(_)))).and_then(|files| {
                for (file, v) in &files {
                    anchors_hold(&data_dir, &v.anchors).map_err(|e| (format!("{}: {e}", file.display()), false))?;
                }
                Ok(files)
            }) {
                Ok(files) => {
                    report(&files);
                    ExitCode::SUCCESS
                }
                Err((e, missing)) => {
                    errln!("signet audit verify: {e}");
                    ExitCode::from(if missing { 2 } else { 1 })
                }
            }
        }
    }
}

/// What was checked: the records, the segments they span, the anchors.
fn report(files: &[(PathBuf, audit::Verified)]) {
    let (Some((_, first)), Some((_, last))) = (files.first(), files.last()) else { return };
    let records = last.records - first.start;
    outln!("audit chain ok: {records} records, head {}", hex::encode(last.head));
    if files.len() > 1 || first.start > 0 {
        let segments = files.iter().filter(|(path, _)| !path.ends_with(audit::FILE)).count();
        outln!("segments ok: {segments}; records {}..{} checked", first.start + 1, last.records);
    }
    if first.start > 0 {
        outln!(
            "records 1..{} are in segments archived elsewhere; the first file here starts at record {} of the chain, which the transparency log anchors",
            first.start,
            first.start + 1
        );
    }
    let anchors: usize = files.iter().map(|(_, v)| v.anchors.len()).sum();
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

/// Checks each anchor's log entry against the instance's trusted root and audit key.
fn anchors_hold(data_dir: &Path, anchors: &[Anchor]) -> Result<(), String> {
    if anchors.is_empty() {
        return Ok(());
    }
    let instance = signet_server::trust::instance(data_dir, None)?;
    let root_json = serde_json::to_vec(&instance.trusted_root()).map_err(|e| e.to_string())?;
    let root = TrustedRoot::from_json(&root_json).map_err(|e| format!("the instance's trusted root: {e}"))?;
    let key_path = data_dir.join("keys").join("audit.pem");
    let pkcs8 = std::fs::read(&key_path).map_err(|e| format!("{}: {e} (the audit key that signed the anchors)", key_path.display()))?;
    let block = signet_core::pem::decode_first(&pkcs8).map_err(|e| format!("{}: {e}", key_path.display()))?;
    let key = signet_core::keys::SigningKey::from_pkcs8(&block.der, &key_path.display().to_string()).map_err(|e| e.to_string())?;
    for a in anchors {
        anchor_holds(&root, key.spki_der(), a).map_err(|why| {
            format!("audit anchor at record {} (Rekor v2 log index {}) does not hold: {why}", a.seq, a.log_index)
        })?;
    }
    Ok(())
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
