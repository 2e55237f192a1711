//! signet as a witness (c2sp.org/tlog-witness): it cosigns a log's checkpoint only once it
//! has checked that the checkpoint extends the last one it cosigned for that log.
//!
//! The order of the checks is the spec's, and so are the answers: an unknown origin is
//! 404; a checkpoint no trusted key signed is 403; an old size above the new one is 400; an
//! old size that is not the one the witness holds is 409 with the size it holds (the log
//! retries from there); the same size with another root is 409 too; a proof that fails is
//! 422. Only then is the state moved, durably, and only then is the cosignature made. A
//! witness that never cosigns two roots for one size is what stops a split view.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use signet_core::merkle::verify_consistency;
use signet_core::note::SignedNote;
use signet_core::notekey::{signature_line, NoteKeyType, VerifierKey};
use signet_keys::NoteSigner;
use signet_core::pubkey::PublicKey;

use crate::request::{AddCheckpoint, Malformed};
use crate::store::{Advanced, StoreError, TreeHead, WitnessStore};

/// A key a log signs its checkpoints with, under its origin.
#[derive(Debug, Clone)]
pub enum LogKey {
    /// A C2SP Ed25519 verifier key (`origin+id+base64`), as Tessera and Sunlight logs publish.
    Note(VerifierKey),
    /// Any key signet verifies (ECDSA P-256 for signet's and Rekor's logs), named by the
    /// first four bytes of SHA-256 of its SPKI, as Rekor v2 signs.
    Spki(PublicKey),
}

/// A log this witness cosigns for.
#[derive(Debug, Clone)]
pub struct WitnessedLog {
    pub origin: String,
    pub keys: Vec<LogKey>,
}

impl WitnessedLog {
    /// Whether any of the log's keys signed `note` under its origin (lines by other keys are ignored).
    fn signed(&self, note: &SignedNote) -> bool {
        self.keys.iter().any(|k| match k {
            LogKey::Note(vkey) => vkey.kind == NoteKeyType::Ed25519 && vkey.name == self.origin && vkey.verify(note).is_some(),
            LogKey::Spki(key) => note.verify(&self.origin, key).is_ok(),
        })
    }
}

/// Why a checkpoint was not cosigned, with the answer the spec gives it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error(transparent)]
    Malformed(#[from] Malformed),
    #[error("this witness does not witness the log {0:?}")]
    UnknownLog(String),
    #[error("no signature on the checkpoint verifies with a key this witness trusts for {0:?}")]
    Unsigned(String),
    #[error("old size {old} is above the checkpoint's size {new}")]
    OldAboveNew { old: u64, new: u64 },
    /// The old size is not the size of the latest cosigned checkpoint, or the size is the
    /// same and the root is not: answered 409 with the size the witness holds.
    #[error("the witness's latest cosigned checkpoint of this log has size {known}, not {old}")]
    Conflict { known: u64, old: u64 },
    #[error("the checkpoint of size {size} has another root than the one this witness cosigned at that size")]
    Fork { size: u64 },
    #[error("the consistency proof from size {old} to {new} does not verify: {why}")]
    BadProof { old: u64, new: u64, why: String },
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The witness's key did not sign (a token away): the checkpoint was checked and its
    /// state kept, so the same request with the size now held succeeds later.
    #[error("the witness key did not sign: {0}")]
    KeyUnavailable(String),
}

impl Refused {
    /// The HTTP status the spec gives this refusal.
    pub fn status(&self) -> u16 {
        match self {
            Refused::Malformed(_) | Refused::OldAboveNew { .. } => 400,
            Refused::Unsigned(_) => 403,
            Refused::UnknownLog(_) => 404,
            Refused::Conflict { .. } | Refused::Fork { .. } => 409,
            Refused::BadProof { .. } => 422,
            Refused::Store(_) | Refused::KeyUnavailable(_) => 503,
        }
    }

    /// For a 409: the size the witness holds, the body the spec asks for.
    pub fn known_size(&self) -> Option<u64> {
        match self {
            Refused::Conflict { known, .. } => Some(*known),
            Refused::Fork { size } => Some(*size),
            _ => None,
        }
    }

    /// A short, stable name for metrics and the audit record.
    pub fn reason(&self) -> &'static str {
        match self {
            Refused::Malformed(_) => "malformed",
            Refused::UnknownLog(_) => "unknown_log",
            Refused::Unsigned(_) => "bad_signature",
            Refused::OldAboveNew { .. } => "old_above_new",
            Refused::Conflict { .. } => "stale_old_size",
            Refused::Fork { .. } => "fork",
            Refused::BadProof { .. } => "bad_proof",
            Refused::Store(_) => "store_unavailable",
            Refused::KeyUnavailable(_) => "key_unavailable",
        }
    }
}

/// Counts by outcome, for `/metrics`.
#[derive(Debug, Default)]
pub struct WitnessStats {
    pub cosigned: AtomicU64,
    pub refused: [AtomicU64; 8],
}

pub const REFUSAL_REASONS: [&str; 8] =
    ["malformed", "unknown_log", "bad_signature", "old_above_new", "stale_old_size", "fork", "bad_proof", "store_unavailable"];

/// The witness: its key, the logs it witnesses, and its state.
pub struct Witness {
    signer: NoteSigner,
    logs: HashMap<String, WitnessedLog>,
    store: Arc<dyn WitnessStore>,
    pub stats: WitnessStats,
    /// The latest checkpoint cosigned for each log since start, with this witness's line.
    cosigned: parking_lot::Mutex<HashMap<String, Arc<str>>>,
}

impl Witness {
    pub fn new(signer: NoteSigner, logs: Vec<WitnessedLog>, store: Arc<dyn WitnessStore>) -> Witness {
        let logs = logs.into_iter().map(|l| (l.origin.clone(), l)).collect();
        Witness { signer, logs, store, stats: WitnessStats::default(), cosigned: Default::default() }
    }

    /// The witness's cosigning key, as logs and verifiers configure it.
    pub fn vkey(&self) -> &VerifierKey {
        self.signer.vkey()
    }

    pub fn logs(&self) -> impl Iterator<Item = &WitnessedLog> {
        self.logs.values()
    }

    /// The latest checkpoint of `origin` this witness cosigned since it started, with the
    /// signature lines it came with and this witness's cosignature.
    pub fn cosigned(&self, origin: &str) -> Option<Arc<str>> {
        self.cosigned.lock().get(origin).cloned()
    }

    /// The latest cosigned state of a log.
    pub async fn latest(&self, origin: &str) -> Result<Option<TreeHead>, StoreError> {
        self.store.latest(origin).await
    }

    /// Serves one `add-checkpoint` body: the cosignature lines, or why not.
    pub async fn add_checkpoint(&self, body: &[u8]) -> Result<String, Refused> {
        let outcome = self.check_and_cosign(body).await;
        match &outcome {
            Ok(_) => self.stats.cosigned.fetch_add(1, Ordering::Relaxed),
            Err(r) => {
                let i = REFUSAL_REASONS.iter().position(|n| *n == r.reason()).unwrap_or(0);
                self.stats.refused[i].fetch_add(1, Ordering::Relaxed)
            }
        };
        outcome
    }

    async fn check_and_cosign(&self, body: &[u8]) -> Result<String, Refused> {
        let request = AddCheckpoint::parse(body)?;
        let checkpoint = &request.note.checkpoint;
        let log = self.logs.get(&checkpoint.origin).ok_or_else(|| Refused::UnknownLog(checkpoint.origin.clone()))?;
        if !log.signed(&request.note) {
            return Err(Refused::Unsigned(checkpoint.origin.clone()));
        }
        let (old, new) = (request.old_size, checkpoint.size);
        if old > new {
            return Err(Refused::OldAboveNew { old, new });
        }
        let new_head = TreeHead { size: new, root: checkpoint.root_hash };
        let known = self.store.latest(&log.origin).await?;
        let checked_against = self.check(known, old, new_head, &request.proof)?;
        // The checkpoint held, sent again: nothing to store (a replay costs no disk write).
        let unchanged = checked_against == Some(new_head);
        match if unchanged { Advanced::Done } else { self.store.advance(&log.origin, checked_against, new_head).await? } {
            Advanced::Done => {}
            // Another request moved the state between the check and the write: this one was
            // checked against a state that is gone, so it is stale whatever it says.
            Advanced::Moved(now) => return Err(Refused::Conflict { known: now.map_or(0, |h| h.size), old }),
        }
        let cosignature = self.signer.sign(&request.note.text, now_secs()).map_err(|e| Refused::KeyUnavailable(e.to_string()))?;
        let line = signature_line(&cosignature);
        let lines: String = request.note.signatures.iter().map(signature_line).collect();
        let note: Arc<str> = format!("{}\n{lines}{line}", request.note.text).into();
        let mut cosigned = self.cosigned.lock();
        // Racing requests may finish out of order: keep the largest.
        let newer = cosigned.get(&log.origin).and_then(|n| SignedNote::parse(n).ok()).is_none_or(|n| n.checkpoint.size <= new);
        if newer {
            cosigned.insert(log.origin.clone(), note);
        }
        Ok(line)
    }

    /// Checks the request against the stored state; returns the state it was checked against.
    fn check(&self, known: Option<TreeHead>, old: u64, new: TreeHead, proof: &[[u8; 32]]) -> Result<Option<TreeHead>, Refused> {
        let known_size = known.map_or(0, |h| h.size);
        if old != known_size {
            return Err(Refused::Conflict { known: known_size, old });
        }
        let Some(known) = known else {
            // Nothing cosigned yet: the first checkpoint is taken on trust, with no proof.
            if !proof.is_empty() {
                return Err(Refused::BadProof { old, new: new.size, why: "the proof must be empty when the old size is 0".into() });
            }
            return Ok(None);
        };
        if new.size == known.size {
            if new.root != known.root {
                return Err(Refused::Fork { size: known.size });
            }
            if !proof.is_empty() {
                return Err(Refused::BadProof { old, new: new.size, why: "the proof must be empty between equal sizes".into() });
            }
            return Ok(Some(known));
        }
        if known.size == 0 {
            // An empty tree is a prefix of every tree; its proof is empty.
            return match proof.is_empty() {
                true => Ok(Some(known)),
                false => Err(Refused::BadProof { old, new: new.size, why: "the proof must be empty from size 0".into() }),
            };
        }
        verify_consistency(known.size, new.size, proof, &known.root, &new.root)
            .map_err(|e| Refused::BadProof { old, new: new.size, why: e.to_string() })?;
        Ok(Some(known))
    }
}

fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
