//! Transparency log entries: the log must be trusted, the entry included under a checkpoint
//! the log signed (RFC 9162 inclusion proof, C2SP signed note), and the SET, where present,
//! must be the log's signature over the entry.

use serde::Serialize;
use signet_core::merkle::{self, ProofError};
use signet_core::note::{NoteError, SignedNote};
use signet_core::pubkey::PublicKey;
use signet_core::{b64, hexfmt, jcs};

use crate::bundle::{InclusionProof, TlogEntry, Version};
use crate::error::{Result, VerifyError};
use crate::time::{self, format_unix};
use crate::trust_root::{LogKey, TrustedRoot};

/// Integrated times further ahead than this are rejected as "in the future".
const MAX_CLOCK_SKEW_S: i64 = 300;

/// A checked entry: its log, and the integrated time if a verified SET vouches for it.
pub struct CheckedEntry<'r> {
    pub log: &'r LogKey,
    pub integrated_time: Option<i64>,
}

/// The trusted log that `entry` names, with a usable key.
pub fn log_of<'r>(root: &'r TrustedRoot, entry: &TlogEntry) -> Result<(&'r LogKey, &'r PublicKey)> {
    let log = root.tlog(&entry.log_id).ok_or_else(|| {
        VerifyError::Tlog(format!("log ID {} is not a transparency log in the trusted root", b64::encode(&entry.log_id)))
    })?;
    let key = log.key.as_ref().map_err(|e| VerifyError::Tlog(format!("key of trusted log {} is unusable: {e}", log.base_url)))?;
    Ok((log, key))
}

/// Checks the inclusion proof, checkpoint and SET of `entry`. The body is checked against
/// the bundle separately (`body::check`).
pub fn verify_entry<'r>(root: &'r TrustedRoot, entry: &TlogEntry, version: Version) -> Result<CheckedEntry<'r>> {
    let (log, key) = log_of(root, entry)?;
    if let Some(proof) = &entry.inclusion_proof {
        verify_inclusion(entry, proof, key, version)?;
    }
    let mut integrated_time = None;
    if let Some(set) = &entry.set {
        verify_set(entry, set, key)?;
        if entry.integrated_time > 0 {
            integrated_time = Some(entry.integrated_time);
        }
    }
    if entry.integrated_time > 0 {
        if entry.integrated_time > time::now() + MAX_CLOCK_SKEW_S {
            return Err(VerifyError::Tlog(format!("integrated time {} is in the future", format_unix(entry.integrated_time))));
        }
        if !log.valid.contains(entry.integrated_time) {
            return Err(VerifyError::Tlog(format!(
                "integrated time {} is outside the validity of log {} ({})",
                format_unix(entry.integrated_time),
                log.base_url,
                log.valid
            )));
        }
    }
    Ok(CheckedEntry { log, integrated_time })
}

/// The name a log signs its checkpoints under: the origin line, without the Rekor v1
/// " - <tree ID>" suffix.
fn signer_name(origin: &str) -> &str {
    match origin.split_once(" - ") {
        Some((name, tree)) if !tree.is_empty() && tree.bytes().all(|c| c.is_ascii_digit()) => name,
        _ => origin,
    }
}

fn verify_inclusion(entry: &TlogEntry, proof: &InclusionProof, key: &PublicKey, version: Version) -> Result<()> {
    let ip = |m: String| VerifyError::InclusionProof(m);
    // The checkpoint first: its signature is what makes the root hash trustworthy.
    let checkpoint_root = match &proof.checkpoint {
        Some(envelope) => {
            let cp = |m: String| VerifyError::Checkpoint(m);
            let note = SignedNote::parse(envelope).map_err(|e| cp(e.to_string()))?;
            let name = signer_name(&note.checkpoint.origin);
            note.verify(name, key).map_err(|e| match e {
                NoteError::NoSignature(_) => cp(format!("no signature line by the log's key under the origin's name {name:?}")),
                NoteError::BadSignature => cp("the log's signature on the checkpoint does not verify".into()),
                NoteError::Malformed(m) => cp(format!("malformed: {m}")),
            })?;
            if note.checkpoint.size != proof.tree_size || note.checkpoint.root_hash != proof.root_hash {
                return Err(ip(format!(
                    "the proof's tree (size {}) and root hash do not match the checkpoint (size {})",
                    proof.tree_size, note.checkpoint.size
                )));
            }
            true
        }
        None => false,
    };
    let against = if checkpoint_root { "the checkpoint root" } else { "the proof's root hash" };
    let leaf = merkle::leaf_hash(&entry.body);
    merkle::verify_inclusion(&leaf, proof.log_index, proof.tree_size, &proof.hashes, &proof.root_hash).map_err(|e| match e {
        ProofError::RootMismatch => ip(format!("computed root does not match {against}")),
        other => ip(other.to_string()),
    })?;
    // Without a signed checkpoint the root hash is only the bundle's word.
    if !checkpoint_root && version >= Version::V02 {
        return Err(ip("the proof has no checkpoint, which v0.2+ bundles require".into()));
    }
    Ok(())
}

#[derive(Serialize)]
struct SetPayload<'a> {
    body: &'a str,
    #[serde(rename = "integratedTime")]
    integrated_time: i64,
    #[serde(rename = "logID")]
    log_id: String,
    #[serde(rename = "logIndex")]
    log_index: u64,
}

/// The SET is the log's signature over the canonical JSON of
/// {body, integratedTime, logID (hex), logIndex}.
fn verify_set(entry: &TlogEntry, set: &[u8], key: &PublicKey) -> Result<()> {
    if entry.integrated_time <= 0 {
        return Err(VerifyError::Set("the entry has a SET but no integrated time".into()));
    }
    let payload = jcs::to_vec(&SetPayload {
        body: &entry.body_b64,
        integrated_time: entry.integrated_time,
        log_id: hexfmt::encode(&entry.log_id),
        log_index: entry.log_index,
    });
    key.verify_message(&payload, set)
        .map_err(|_| VerifyError::Set("signature does not verify with the log's key".into()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn signer_name_strips_rekor_v1_tree_ids_only() {
        assert_eq!(super::signer_name("rekor.sigstore.dev - 2605736670972794746"), "rekor.sigstore.dev");
        assert_eq!(super::signer_name("log2025-alpha1.rekor.sigstage.dev"), "log2025-alpha1.rekor.sigstage.dev");
        assert_eq!(super::signer_name("a - b"), "a - b");
    }
}
