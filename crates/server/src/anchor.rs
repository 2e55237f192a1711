//! Anchoring the audit chain in the Rekor v2 log ([`signet_guard::audit::anchor`]).
//!
//! Every `[guard.audit] anchor_interval_secs` (and once more at shutdown), when records were
//! written since the last anchor, the chain's head is signed with the audit key
//! (`keys/audit.pem`, P-256, made on first use) and appended to the Rekor v2 log as a
//! hashedrekord, straight through the log's API (not over HTTP, so anchoring writes no audit
//! record of its own and never anchors itself). The log's answer is stored beside the chain.
//!
//! After an anchor, when the live log is due under the retention policy, its records up to
//! that anchor move into a segment file ([`signet_guard::audit::segment`]).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use signet_core::{b64, hash::sha256};
use signet_keys::Signer;
use signet_guard::audit::{anchor, segment, Anchor, AuditLog};
use signet_log::rekor::v2;
use signet_log::{Log, Sequenced};
use crate::shards::active::ActiveShard;

pub mod error;

pub use error::AnchorError;

/// The audit key: `configured` (a file or a token's), or under the data dir, made on first
/// use, 0600 in a 0700 directory.
pub fn audit_key(data_dir: &Path, configured: Option<&signet_keys::KeySource>, pkcs11: &signet_keys::Pkcs11Settings) -> Result<Signer, AnchorError> {
    let p256 = [signet_keys::Algorithm::EcdsaP256Sha256];
    if let Some(source) = configured {
        return Ok(Signer::open(source, pkcs11, &p256, matches!(source, signet_keys::KeySource::File(_)))?);
    }
    let dir = data_dir.join("keys");
    signet_core::files::ensure_private_dir(&dir).map_err(|source| AnchorError::KeyDir { path: dir.clone(), source })?;
    Ok(Signer::load_or_generate(&dir.join("audit.pem"), p256[0])?)
}

/// The name of an instance's chain in PostgreSQL's shared audit tables: `[guard.audit]
/// chain`, else `audit-` and the first 16 hex digits of its audit key's id. The key is the
/// instance's own, so the name is too, and it stays the same across restarts and moves.
pub fn chain_name(configured: Option<&str>, key: &Signer) -> String {
    match configured {
        Some(name) => name.to_string(),
        None => format!("audit-{}", &hex::encode(key.key_id())[..16]),
    }
}

/// The chain name of the instance whose data dir is `data_dir`, for `signet audit`: its audit
/// key read, never made.
pub fn chain_name_of(data_dir: &Path, configured: Option<&str>) -> Result<String, AnchorError> {
    if let Some(name) = configured {
        return Ok(name.to_string());
    }
    let path = data_dir.join("keys").join("audit.pem");
    if !path.exists() {
        return Err(AnchorError::NoAuditKey { path });
    }
    Ok(chain_name(None, &Signer::load_or_generate(&path, signet_keys::Algorithm::EcdsaP256Sha256)?))
}

/// Anchors the chain's current head in `log`, unless nothing was written since `after` (the
/// last anchored seq). The new anchor, or `None`.
pub async fn anchor_once(audit: &AuditLog, log: &Log, key: &Signer, after: u64) -> Result<Option<Anchor>, AnchorError> {
    let (seq, head) = audit.head();
    if seq <= after {
        return Ok(None);
    }
    let statement = anchor::statement(seq, &head);
    let signature = key.sign(&statement).map_err(AnchorError::Sign)?;
    let request = json!({"hashedRekordRequestV002": {
        "digest": b64::encode(&sha256(&statement)),
        "signature": {"content": b64::encode(&signature), "verifier": {
            "publicKey": {"rawBytes": b64::encode(key.spki_der())},
            "keyDetails": "PKIX_ECDSA_P256_SHA_256",
        }},
    }});
    let entry = v2::parse_value(&request).map_err(AnchorError::Entry)?;
    let (index, checkpoint) = match log.append(entry.body.clone(), Some(entry.digest_key.into_bytes())).await {
        Ok(Sequenced::New { index, checkpoint, .. }) => (index, checkpoint),
        // The same head anchored before (a restart between anchor and store): prove that one.
        Ok(Sequenced::Duplicate { index }) => (index, log.head()),
        Err(e) => return Err(AnchorError::Append(e)),
    };
    let tle = crate::api::rekor_v2::entry_json(log, index, &entry.body, &checkpoint).map_err(AnchorError::Proof)?;
    let anchor = Anchor { seq, head, log_index: index, entry: tle.to_string() };
    let (place, stored) = (audit.place().clone(), anchor.clone());
    tokio::task::spawn_blocking(move || anchor::store(&place, &stored))
        .await
        .map_err(|source| AnchorError::Task { what: "storing the anchor", source })?
        .map_err(AnchorError::Store)?;
    audit.anchored(seq);
    Ok(Some(anchor))
}

/// Moves the records up to `at` into a segment file when the live log is due under `policy`.
pub async fn cut_if_due(audit: &AuditLog, at: &Anchor, policy: segment::Policy) -> Result<Option<std::path::PathBuf>, AnchorError> {
    let (place, at) = (audit.place().clone(), at.clone());
    tokio::task::spawn_blocking(move || {
        if !segment::due(&place, policy, signet_guard::audit::chain::now_ms())? {
            return Ok(None);
        }
        segment::cut(&place, &at)
    })
    .await
    .map_err(|source| AnchorError::Task { what: "cutting an audit segment", source })?
    .map_err(AnchorError::Cut)
}

/// Anchors every `every` until the task is dropped, and cuts a segment when one is due.
/// Failures are logged and retried at the next turn; the records stay unanchored (and
/// `audit verify` says so), or in the live log, until one succeeds.
pub async fn run(audit: Arc<AuditLog>, v2: Arc<ActiveShard>, key: Arc<Signer>, every: Duration, mut after: u64, policy: segment::Policy) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        // An anchor is an append like any other: a rotation of the log waits for it.
        let appending = v2.appending().await;
        let anchored = anchor_once(&audit, &v2.log(), &key, after).await;
        drop(appending);
        match anchored {
            Ok(Some(a)) => {
                tracing::debug!(seq = a.seq, log_index = a.log_index, "audit chain anchored");
                after = a.seq;
                match cut_if_due(&audit, &a, policy).await {
                    Ok(Some(file)) => tracing::info!(file = %file.display(), through = a.seq, "audit records moved into a segment"),
                    Ok(None) => {}
                    Err(e) => tracing::warn!(error = %e, "the audit log is due for a cut, which failed; retrying after the next anchor"),
                }
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "anchoring the audit chain failed; retrying at the next interval"),
        }
    }
}
