//! One log, one poll: verify the new checkpoint, prove it consistent with the last one
//! seen, read the new entries, and prove that they are the ones the checkpoint signs.
//!
//! A misbehaving log (a fork, a tree that shrinks, a failed proof, entries that do not hash
//! to the signed root) is marked broken in the state: it raised its alert with the signed
//! evidence, and nothing more it serves can be believed. A bad signature is not that: anyone
//! on the path can forge a bad note, so it alerts (once per note) and the next poll retries.

use std::sync::Arc;
use std::time::{Duration, Instant};

use signet_core::hash::sha256;
use signet_core::merkle::verify_consistency;
use signet_core::note::Checkpoint;
use signet_core::pubkey::PublicKey;

use super::alert::{Alert, Alerts, Kind};
use super::error::MonitorError;
use super::scan::Scan;
use super::source::Source;
use super::state::{LogState, Seen, StateError, Store};
use super::watch::WatchList;

/// How often progress is saved during a long catch-up (and always after a match).
const SAVE_EVERY: Duration = Duration::from_secs(2);

/// A log to follow.
pub struct Followed {
    pub source: Source,
    pub keys: Keys,
}

/// The keys a log's checkpoints may be signed by.
#[derive(Clone)]
pub enum Keys {
    /// Given once (a trusted root, the command line).
    Fixed(Vec<PublicKey>),
    /// Asked for at every poll: a log inside this process, whose keys change when it rotates.
    Live(Arc<dyn Fn() -> Vec<PublicKey> + Send + Sync>),
}

impl Keys {
    fn now(&self) -> std::borrow::Cow<'_, [PublicKey]> {
        match self {
            Keys::Fixed(keys) => std::borrow::Cow::Borrowed(keys),
            Keys::Live(keys) => std::borrow::Cow::Owned(keys()),
        }
    }
}

impl From<Vec<PublicKey>> for Keys {
    fn from(keys: Vec<PublicKey>) -> Keys {
        Keys::Fixed(keys)
    }
}

/// What one poll did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Polled {
    pub size: u64,
    pub read: u64,
    pub matches: u64,
    /// Entries whose body could not be read (an unknown kind, a certificate that does not parse).
    pub unparsed: u64,
    /// Bytes of the entries read.
    pub bytes: u64,
    /// The log is broken or served a bad checkpoint.
    pub problem: bool,
}

pub struct Ctx<'a> {
    pub store: &'a Store,
    pub watch: &'a WatchList,
    pub alerts: &'a Alerts,
    pub workers: usize,
}

/// Polls `log` once. `Err` is a failure to fetch or to keep state (retried next poll);
/// what the log did wrong comes back as alerts and `problem`.
pub fn poll(log: &Followed, ctx: &Ctx) -> Result<Polled, MonitorError> {
    let url = log.source.id();
    let mut state = ctx.store.load(url)?;
    if let Some(why) = &state.broken {
        tracing::warn!(log = url, why, "not following this log: it was caught misbehaving (see its alert); remove its state file to start over");
        return Ok(Polled { problem: true, ..Polled::default() });
    }
    let (note, offset) = log.source.checkpoint()?;
    let alert = |kind, detail: String, origin: Option<&str>, evidence: Vec<String>| {
        let mut a = Alert::new(kind, url, origin, detail);
        a.evidence = evidence;
        ctx.alerts.emit(&a);
    };

    let keys = log.keys.now();
    let verified = match log.source.api {
        super::source::Api::Ct => super::keys::verify_sth(&note, &keys),
        super::source::Api::Tiles | super::source::Api::V1 => super::keys::verify(&note, &keys),
    };
    let (cp, signer) = match verified {
        Ok((cp, key)) => (cp, hex::encode(sha256(&key.spki_der))),
        Err(why) => {
            let id = hex::encode(sha256(note.as_bytes()));
            if state.last_bad.as_deref() != Some(id.as_str()) {
                alert(Kind::BadSignature, format!("checkpoint rejected: {why}"), state.origin.as_deref(), vec![note.clone()]);
                state.last_bad = Some(id);
                ctx.store.save(&state)?;
            }
            return Ok(Polled { problem: true, ..Polled::default() });
        }
    };
    if let Some(retired) = state.retired.iter().find(|r| r.key == signer) {
        // A tree the log left: it never grows again. Its last checkpoint again (a cache, a
        // lagging replica) is no news; anything else is a second history under that key.
        let same = retired.checkpoint.as_ref().is_some_and(|s| s.size == cp.size && s.root == hex::encode(cp.root_hash));
        if same {
            return Ok(Polled { size: cp.size, ..Polled::default() });
        }
        let why = format!("a checkpoint of size {} by the key of a tree the log rotated away from, which never grows again", cp.size);
        let evidence = retired.checkpoint.iter().map(|s| s.note.clone()).chain([note.clone()]).collect();
        alert(Kind::Inconsistent, why.clone(), Some(&cp.origin), evidence);
        state.broken = Some(why);
        ctx.store.save(&state)?;
        return Ok(Polled { problem: true, ..Polled::default() });
    }
    if let Some(old) = state.key.clone().filter(|k| *k != signer) {
        // Another of the log's trusted keys: the log rotated to a new tree (a new shard,
        // with an origin of its own or, for Rekor v2, the same one). Its entries start a new
        // range; the old tree is kept as retired, so that it can never grow unnoticed.
        let detail = format!("the log rotated to a new tree: checkpoints are now signed by key sha256:{signer}, not sha256:{old}");
        alert(Kind::Rotated, detail, Some(&cp.origin), state.checkpoint.iter().map(|s| s.note.clone()).chain([note.clone()]).collect());
        state.retired.push(super::state::Retired { key: old, origin: state.origin.take(), checkpoint: state.checkpoint.take() });
        state.set_range(&super::range::Range::default());
    }
    state.key = Some(signer);
    if let Some(why) = check_against(&state, &cp, log)? {
        let evidence = state.checkpoint.iter().map(|s| s.note.clone()).chain([note.clone()]).collect();
        let kind = if why.starts_with("origin") { Kind::OriginChanged } else { Kind::Inconsistent };
        alert(kind, why.clone(), Some(&cp.origin), evidence);
        state.broken = Some(why);
        ctx.store.save(&state)?;
        return Ok(Polled { problem: true, ..Polled::default() });
    }
    state.origin = Some(cp.origin.clone());
    state.last_bad = None;
    if state.checkpoint.as_ref().is_none_or(|s| s.size != cp.size) {
        state.checkpoint = Some(Seen { size: cp.size, root: hex::encode(cp.root_hash), note: note.clone() });
        ctx.store.save(&state)?;
    }
    ctx.alerts.metrics().verified(url, cp.size);

    let mut polled = Polled { size: cp.size, ..Polled::default() };
    let mut range = state.range()?;
    if range.size() > cp.size {
        return Err(StateError::AheadOfCheckpoint { read: range.size(), size: cp.size }.into());
    }
    let (from, started) = (range.size(), Instant::now());
    let mut saved = Instant::now();
    let scan = Scan { source: &log.source, watch: ctx.watch, size: cp.size, offset, workers: ctx.workers };
    let scanned = scan.run(from, cp.size, |page| {
        if page.start != range.size() {
            return Err(MonitorError::OutOfOrder { start: page.start, at: range.size() });
        }
        for leaf in &page.leaves {
            range.push(*leaf);
        }
        polled.read += page.leaves.len() as u64;
        polled.matches += page.hits.len() as u64;
        polled.unparsed += page.unparsed;
        polled.bytes += page.bytes;
        ctx.alerts.metrics().entries(url, page.leaves.len() as u64, page.unparsed);
        for hit in &page.hits {
            let mut a = Alert::new(Kind::Match, url, Some(&cp.origin), format!("entry {} matches the watch list", hit.index));
            a.entry = Some(hit.clone());
            ctx.alerts.emit(&a);
        }
        if !page.hits.is_empty() || saved.elapsed() >= SAVE_EVERY {
            state.set_range(&range);
            ctx.store.save(&state)?;
            saved = Instant::now();
        }
        Ok(())
    });
    // What was read is kept even when a fetch failed part-way: the next poll resumes there.
    state.set_range(&range);
    ctx.store.save(&state)?;
    scanned?;

    if range.size() == cp.size && range.root() != cp.root_hash {
        let why = format!("the log's entries 0..{} do not hash to the root its checkpoint signs", cp.size);
        alert(Kind::EntriesMismatch, why.clone(), Some(&cp.origin), vec![note]);
        state.broken = Some(why);
        ctx.store.save(&state)?;
        polled.problem = true;
    }
    if polled.read > 0 {
        let secs = started.elapsed().as_secs_f64();
        tracing::info!(log = url, from, to = cp.size, read = polled.read, matches = polled.matches, unparsed = polled.unparsed,
            per_second = (polled.read as f64 / secs.max(1e-9)) as u64, "caught up");
    }
    Ok(polled)
}

/// Why `cp` cannot follow what `state` saw, if it cannot (`Err` only when the proof could
/// not be fetched).
fn check_against(state: &LogState, cp: &Checkpoint, log: &Followed) -> Result<Option<String>, MonitorError> {
    if let Some(origin) = state.origin.as_ref().filter(|o| **o != cp.origin) {
        return Ok(Some(format!("origin changed from {origin:?} to {:?}: this is another log, or a rotated shard", cp.origin)));
    }
    let Some(old) = &state.checkpoint else { return Ok(None) };
    let old_root = hex::decode(&old.root).ok().and_then(|r| <[u8; 32]>::try_from(r).ok()).ok_or(StateError::Root)?;
    if cp.size < old.size {
        return Ok(Some(format!("the tree shrank: a checkpoint of size {} after one of size {}", cp.size, old.size)));
    }
    if cp.size == old.size {
        return Ok((cp.root_hash != old_root).then(|| format!("fork: two checkpoints of size {} with different roots", cp.size)));
    }
    if old.size == 0 {
        return Ok(None);
    }
    let proof = log.source.consistency_proof(old.size, cp.size)?;
    Ok(verify_consistency(old.size, cp.size, &proof, &old_root, &cp.root_hash)
        .err()
        .map(|e| format!("the checkpoint of size {} is not consistent with the one of size {}: {e}", cp.size, old.size)))
}
