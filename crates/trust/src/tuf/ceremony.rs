//! The offline ceremony for the roles whose keys people hold: the root and the targets, each
//! signed by k of n keys, as Sigstore's own root is.
//!
//! 1. Propose ([`Repository::propose_root`], [`Repository::propose_targets`]): the next
//!    version, with no signature.
//! 2. Sign ([`Proposal::sign`]): each holder adds one signature, with a key in a file, on a
//!    token or in KMS, on any machine.
//! 3. Stage ([`Repository::stage`], after [`Repository::check`]): into `staged/`, which no
//!    client sees. The server's next round adopts what checks out ([`Repository::adopt_staged`]).
//!
//! A new root is taken up only with the threshold of the root it follows and its own (TUF
//! 5.3.4: that is what lets a client holding the old root walk to it); targets with the
//! threshold the root names for them.

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::path::{Path, PathBuf};

use serde::Serialize;
use signet_keys::Signer;
use tough::schema::key::Key;
use tough::schema::{Role as _, RoleKeys as ToughRoleKeys, Root, Signature, Signed, Targets};

use super::keys::{tuf_key, Role, RoleKeys};
use super::repo::{expires, next, targets_of, tough_err, Current, Repository};
use super::error::TufError;
use super::refusal::Refusal;
use super::Expiry;

/// Where staged metadata waits, inside the repository's directory.
const STAGED: &str = "staged";

/// Metadata proposed for signing: the next root, or the next targets.
#[derive(Debug, Clone)]
pub enum Proposal {
    Root(Signed<Root>),
    Targets(Signed<Targets>),
}

impl Proposal {
    /// Reads a root or targets file; `origin` names it in errors.
    pub fn parse(bytes: &[u8], origin: &str) -> Result<Proposal, TufError> {
        let bad = |msg: String| TufError::Corrupt { path: PathBuf::from(origin), msg };
        let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| bad(format!("not JSON: {e}")))?;
        match value["signed"]["_type"].as_str() {
            Some("root") => serde_json::from_value(value).map(Proposal::Root).map_err(|e| bad(e.to_string())),
            Some("targets") => serde_json::from_value(value).map(Proposal::Targets).map_err(|e| bad(e.to_string())),
            other => Err(bad(format!("signed._type is {other:?}; only root and targets are signed in a ceremony"))),
        }
    }

    pub fn read(path: &Path) -> Result<Proposal, TufError> {
        let bytes = std::fs::read(path).map_err(|source| TufError::Io { path: path.to_path_buf(), source })?;
        Proposal::parse(&bytes, &path.display().to_string())
    }

    /// The file as written: pretty JSON and a newline, its keys sorted, so that the same
    /// metadata is the same bytes on every machine it passes through (tough's maps would
    /// come out in a different order each time): what the holders signed is what is served.
    pub fn to_bytes(&self) -> Result<Vec<u8>, TufError> {
        let value = match self {
            Proposal::Root(r) => serde_json::to_value(r),
            Proposal::Targets(t) => serde_json::to_value(t),
        }
        .map_err(tough_err)?;
        let mut bytes = serde_json::to_vec_pretty(&value).map_err(tough_err)?;
        bytes.push(b'\n');
        Ok(bytes)
    }

    pub fn role(&self) -> Role {
        match self {
            Proposal::Root(_) => Role::Root,
            Proposal::Targets(_) => Role::Targets,
        }
    }

    pub fn version(&self) -> u64 {
        match self {
            Proposal::Root(r) => r.signed.version.get(),
            Proposal::Targets(t) => t.signed.version.get(),
        }
    }

    /// Its name in the repository: `N.root.json` or `N.targets.json`.
    pub fn file_name(&self) -> String {
        format!("{}.{}.json", self.version(), self.role().name())
    }

    fn signatures(&mut self) -> &mut Vec<Signature> {
        match self {
            Proposal::Root(r) => &mut r.signatures,
            Proposal::Targets(t) => &mut t.signatures,
        }
    }

    /// Adds `key`'s signature over the canonical form of what is signed, in place of any
    /// earlier one by the same key. Returns the key id, hex.
    pub fn sign(&mut self, key: &Signer) -> Result<String, TufError> {
        let public = tuf_key(key)?;
        let id = public.key_id().map_err(tough_err)?;
        let message = match self {
            Proposal::Root(r) => r.signed.canonical_form(),
            Proposal::Targets(t) => t.signed.canonical_form(),
        }
        .map_err(tough_err)?;
        let sig = key.sign(&message).map_err(|e| TufError::Tough(format!("signing {}: {e}", self.file_name())))?;
        let signatures = self.signatures();
        signatures.retain(|s| s.keyid != id);
        signatures.push(Signature { keyid: id.clone(), sig: sig.into() });
        Ok(hex::encode(id.as_ref()))
    }
}

/// How many of a role's keys validly signed, against its threshold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tally {
    pub role: &'static str,
    /// The key ids (hex) whose signatures verify and that the root names for the role.
    pub valid: Vec<String>,
    pub threshold: u64,
    /// How many keys the root names for the role.
    pub keys: usize,
}

impl Tally {
    pub fn met(&self) -> bool {
        self.valid.len() as u64 >= self.threshold
    }
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} valid signatures of the {} needed from the {} {} keys", self.valid.len(), self.threshold, self.keys, self.role)
    }
}

/// Counts the signatures on `signed` by keys `root` names for its role, each verified on its
/// own by tough (the same check a client makes, one key at a time).
pub fn tally<T: tough::schema::Role + Serialize + Clone>(root: &Root, signed: &Signed<T>) -> Tally {
    let role = root.roles.get(&T::TYPE);
    let mut valid = Vec::new();
    for signature in &signed.signatures {
        let id = hex::encode(signature.keyid.as_ref());
        if !role.is_some_and(|r| r.keyids.contains(&signature.keyid)) || valid.contains(&id) {
            continue;
        }
        let mut one = root.clone();
        one.roles.insert(T::TYPE, ToughRoleKeys { keyids: vec![signature.keyid.clone()], threshold: NonZeroU64::MIN, _extra: HashMap::new() });
        let alone = Signed { signed: signed.signed.clone(), signatures: vec![signature.clone()] };
        if one.verify_role(&alone).is_ok() {
            valid.push(id);
        }
    }
    Tally {
        role: Role::ALL.into_iter().find(|r| r.tough() == T::TYPE).map_or("delegated", Role::name),
        valid,
        threshold: role.map_or(1, |r| r.threshold.get()),
        keys: role.map_or(0, |r| r.keyids.len()),
    }
}

/// What a new root changes: each listed role's keys (replacing the ones it had) and thresholds.
/// Nothing listed: the same root, signed again with a later expiry.
#[derive(Debug, Default, Clone)]
pub struct RootChange {
    pub keys: Vec<(Role, Vec<Key>)>,
    pub thresholds: Vec<(Role, u64)>,
}

/// A root's roles as signet can serve them: each names keys the root lists, no key twice,
/// a threshold from 1 to its number of keys, and one key for the snapshot and timestamp (the
/// server signs those alone, every few hours).
fn check_roles(root: &Root) -> Result<(), Refusal> {
    for role in Role::ALL {
        let Some(r) = root.roles.get(&role.tough()) else { return Err(Refusal::NoRole(role.name())) };
        let name = role.name();
        if r.keyids.is_empty() {
            return Err(Refusal::RoleWithoutKeys(name));
        }
        if let Some(id) = r.keyids.iter().find(|id| !root.keys.contains_key(*id)) {
            return Err(Refusal::UnlistedKey { role: name, key: hex::encode(id.as_ref()) });
        }
        let mut ids = r.keyids.clone();
        ids.sort();
        ids.dedup();
        if ids.len() != r.keyids.len() {
            return Err(Refusal::KeyTwice(name));
        }
        if r.threshold.get() > r.keyids.len() as u64 {
            return Err(Refusal::ThresholdAboveKeys { role: name, threshold: r.threshold.get(), keys: r.keyids.len() });
        }
        if matches!(role, Role::Snapshot | Role::Timestamp) && (r.threshold.get() != 1 || r.keyids.len() != 1) {
            return Err(Refusal::ServerRole(name));
        }
    }
    Ok(())
}

/// `proposed` as the root after `old`: the next version, unexpired, well formed, and signed by
/// the thresholds of both.
pub fn check_root_after(old: &Root, proposed: &Signed<Root>, now: jiff::Timestamp) -> Result<(), Refusal> {
    let new = &proposed.signed;
    if new.version.get() != old.version.get().saturating_add(1) {
        return Err(Refusal::RootVersion { version: new.version.get(), old: old.version.get(), next: old.version.get().saturating_add(1) });
    }
    if new.expires.as_second() <= now.as_second() {
        return Err(Refusal::Expired(new.expires.to_string()));
    }
    if !new.consistent_snapshot {
        return Err(Refusal::NotConsistent);
    }
    check_roles(new)?;
    let by_old = tally(old, proposed);
    if !by_old.met() {
        return Err(Refusal::Threshold { tally: by_old.to_string(), of: format!("of the root it replaces (version {})", old.version) });
    }
    let by_new = tally(new, proposed);
    if !by_new.met() {
        return Err(Refusal::Threshold { tally: by_new.to_string(), of: "that it names itself".into() });
    }
    // tough's own check too, as clients make it.
    old.verify_role(proposed).map_err(|e| Refusal::Signatures(e.to_string()))?;
    new.verify_role(proposed).map_err(|e| Refusal::Signatures(e.to_string()))
}

/// `proposed` as targets under `root`, past version `after`: unexpired, signed by the
/// threshold, and each target file in `files` with its length and hash.
pub fn check_targets_under(root: &Root, proposed: &Signed<Targets>, after: u64, files: &Path, now: jiff::Timestamp) -> Result<(), Refusal> {
    let t = &proposed.signed;
    if t.version.get() <= after {
        return Err(Refusal::TargetsVersion { version: t.version.get(), after });
    }
    if t.expires.as_second() <= now.as_second() {
        return Err(Refusal::Expired(t.expires.to_string()));
    }
    let by = tally(root, proposed);
    if !by.met() {
        return Err(Refusal::Threshold { tally: by.to_string(), of: format!("that the root (version {}) names", root.version) });
    }
    root.verify_role(proposed).map_err(|e| Refusal::Signatures(e.to_string()))?;
    for (target, meta) in &t.targets {
        let name = format!("{}.{}", hex::encode(&meta.hashes.sha256), target.raw());
        let held = std::fs::read(files.join(&name)).map_err(|_| Refusal::TargetMissing(name.clone()))?;
        if held.len() as u64 != meta.length || signet_core::hash::sha256(&held).as_slice() != meta.hashes.sha256.as_ref() {
            return Err(Refusal::TargetMismatch(name));
        }
    }
    Ok(())
}

impl Repository {
    /// The next root: the current one with `change` made, a later expiry, and no signature.
    pub fn propose_root(&self, change: &RootChange, expiry: &Expiry, now: jiff::Timestamp) -> Result<Signed<Root>, TufError> {
        let c = self.current()?;
        let mut root = c.root.signed.clone();
        root.version = next(root.version);
        root.expires = expires(now, Role::Root, expiry)?;
        let before: Vec<_> = root.keys.keys().cloned().collect();
        for (role, keys) in &change.keys {
            let mut ids = Vec::new();
            for key in keys {
                let id = key.key_id().map_err(tough_err)?;
                if !ids.contains(&id) {
                    ids.push(id.clone());
                }
                root.keys.insert(id, key.clone());
            }
            let threshold = root.roles.get(&role.tough()).map_or(NonZeroU64::MIN, |r| r.threshold);
            root.roles.insert(role.tough(), ToughRoleKeys { keyids: ids, threshold, _extra: HashMap::new() });
        }
        for (role, threshold) in &change.thresholds {
            let threshold = NonZeroU64::new(*threshold).ok_or_else(|| TufError::Tough(format!("the {} threshold must be at least 1", role.name())))?;
            match root.roles.get_mut(&role.tough()) {
                Some(r) => r.threshold = threshold,
                None => return Err(TufError::Tough(format!("the root names no {} role", role.name()))),
            }
        }
        // A key no role names any more leaves the root.
        for id in before {
            if !root.roles.values().any(|r| r.keyids.contains(&id)) {
                root.keys.remove(&id);
            }
        }
        check_roles(&root).map_err(|why| TufError::Refused { name: format!("{}.root.json", root.version), why })?;
        Ok(Signed { signed: root, signatures: Vec::new() })
    }

    /// The next targets, listing `documents` (written by hash into `out/targets`), unsigned.
    pub fn propose_targets(&self, documents: &[(&str, Vec<u8>)], expiry: &Expiry, now: jiff::Timestamp, out: &Path) -> Result<Signed<Targets>, TufError> {
        let c = self.current()?;
        let version = self.next_targets_version(&c)?;
        let targets = targets_of(documents, version, expires(now, Role::Targets, expiry)?, &out.join("targets"))?;
        Ok(Signed { signed: targets, signatures: Vec::new() })
    }

    /// Where `signet tuf publish` stages metadata for the server to adopt.
    pub fn staged_dir(&self) -> PathBuf {
        self.dir().join(STAGED)
    }

    /// Checks `proposals` as they would be adopted together: the roots in order after the
    /// current one, then the targets under the last of them, their files in `targets/`.
    pub fn check(&self, proposals: &[Proposal], now: jiff::Timestamp) -> Result<(), TufError> {
        self.check_after(&self.current()?, proposals, now).map(|_| ())
    }

    /// [`Repository::check`] against `c`; the root that will be current after them.
    fn check_after(&self, c: &Current, proposals: &[Proposal], now: jiff::Timestamp) -> Result<Root, TufError> {
        let mut root = c.root.signed.clone();
        let mut sorted: Vec<&Proposal> = proposals.iter().collect();
        sorted.sort_by_key(|p| (p.role() != Role::Root, p.version()));
        let mut targets_given = false;
        for p in sorted {
            let refused = |why: Refusal| TufError::Refused { name: p.file_name(), why };
            match p {
                Proposal::Root(r) => {
                    check_root_after(&root, r, now).map_err(refused)?;
                    root = r.signed.clone();
                }
                Proposal::Targets(t) => {
                    if targets_given {
                        return Err(refused(Refusal::TwoTargets));
                    }
                    targets_given = true;
                    check_targets_under(&root, t, c.targets.signed.version.get(), &self.dir().join("targets"), now).map_err(refused)?;
                }
            }
        }
        if !targets_given && root.verify_role(&c.targets).is_err() {
            return Err(TufError::NotYet {
                name: format!("{}.root.json", root.version),
                why: format!(
                    "the published targets (version {}) are not signed by the targets keys it names: propose targets, have them \
                     signed by those keys, and publish both together",
                    c.targets.signed.version
                ),
            });
        }
        Ok(root)
    }

    /// Puts `proposal` where the server looks for metadata to adopt; clients do not see it.
    pub fn stage(&self, proposal: &Proposal) -> Result<PathBuf, TufError> {
        let dir = self.staged_dir();
        std::fs::create_dir_all(&dir).map_err(|source| TufError::Io { path: dir.clone(), source })?;
        let path = dir.join(proposal.file_name());
        // A refusal of an earlier attempt is history now.
        for old in [format!("{}.refused", proposal.file_name()), format!("{}.refused.why", proposal.file_name())] {
            let _ = std::fs::remove_file(dir.join(old));
        }
        signet_core::files::write_atomic(&path, &proposal.to_bytes()?, 0o644).map_err(|source| TufError::Io { path: path.clone(), source })?;
        Ok(path)
    }

    /// What is staged and not yet adopted nor refused: each file's name and modification time
    /// (empty when nothing is). The server tries again when this changes, not every poll.
    pub fn staged_stamp(&self) -> Vec<(String, std::time::SystemTime)> {
        let Ok(entries) = std::fs::read_dir(self.staged_dir()) else { return Vec::new() };
        let mut stamp: Vec<_> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().to_str()?.to_string();
                let staged = name.ends_with(".root.json") || name.ends_with(".targets.json");
                Some((name, e.metadata().ok()?.modified().ok()?)).filter(|_| staged)
            })
            .collect();
        stamp.sort();
        stamp
    }

    /// The staged metadata not yet adopted nor refused.
    pub fn staged(&self) -> Result<Vec<(PathBuf, Proposal)>, TufError> {
        let dir = self.staged_dir();
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(TufError::Io { path: dir, source }),
        };
        let mut out = Vec::new();
        for entry in entries {
            let path = entry.map_err(|source| TufError::Io { path: dir.clone(), source })?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if name.ends_with(".root.json") || name.ends_with(".targets.json") {
                match Proposal::read(&path) {
                    Ok(p) => out.push((path, p)),
                    Err(e) => {
                        let why = Refusal::Unreadable(e.to_string());
                        self.refuse(&path, &why);
                        return Err(TufError::Refused { name: name.to_string(), why });
                    }
                }
            }
        }
        out.sort_by_key(|(_, p)| (p.role() != Role::Root, p.version()));
        Ok(out)
    }

    /// Moves a staged file aside as `<name>.refused`, so it is not tried again every round.
    fn refuse(&self, path: &Path, why: &Refusal) {
        let aside = PathBuf::from(format!("{}.refused", path.display()));
        let _ = std::fs::rename(path, &aside);
        let _ = std::fs::write(PathBuf::from(format!("{}.why", aside.display())), format!("{why}\n"));
    }

    /// Takes up what is staged: each root that follows the current one with both thresholds,
    /// then the newest targets that the root's targets threshold signed, with a snapshot and
    /// timestamp; then signs again, with `keys`, what the new root no longer accepts (a
    /// snapshot or timestamp key it changed). Everything is checked before anything is written.
    /// Metadata that does not check out is moved aside (`.refused`, with a `.why`) and named in
    /// the error; staged metadata that needs a key this instance lacks stays for the next round.
    /// Returns the names adopted. Their staged files stay until [`Repository::forget_adopted`]:
    /// the server calls it once clients are served the new files, and `signet tuf publish
    /// --wait` waits for that.
    pub async fn adopt_staged(&self, keys: &RoleKeys, expiry: &Expiry, now: jiff::Timestamp) -> Result<Vec<String>, TufError> {
        let staged = self.staged()?;
        if staged.is_empty() {
            return Ok(Vec::new());
        }
        let c = self.current()?;
        // What is already published (or older) is dropped, and of several targets the newest
        // wins; the rest is checked as `signet tuf publish` checked it.
        let mut live: Vec<(PathBuf, Proposal)> = Vec::new();
        for (path, p) in staged {
            if is_published(&c, &p) {
                let _ = std::fs::remove_file(&path);
                continue;
            }
            if let Proposal::Targets(_) = p {
                if let Some(i) = live.iter().position(|(_, q)| q.role() == Role::Targets) {
                    let (older, _) = live.remove(i);
                    let _ = std::fs::remove_file(older);
                }
            }
            live.push((path, p));
        }
        let proposals: Vec<Proposal> = live.iter().map(|(_, p)| p.clone()).collect();
        let root = match self.check_after(&c, &proposals, now) {
            Ok(root) => root,
            Err(TufError::Refused { name, why }) => {
                if let Some((path, _)) = live.iter().find(|(_, p)| p.file_name() == name) {
                    self.refuse(path, &why);
                }
                return Err(TufError::Refused { name, why });
            }
            Err(e) => return Err(e),
        };
        let targets = live.iter().find_map(|(_, p)| match p {
            Proposal::Targets(t) => Some(t),
            Proposal::Root(_) => None,
        });
        // The snapshot and timestamp are signed here, with a key the new root names: check
        // that it is held before the root is written.
        let snapshot = targets.is_some() || root.verify_role(&c.snapshot).is_err();
        let timestamp = snapshot || root.verify_role(&c.timestamp).is_err();
        for role in [Role::Snapshot, Role::Timestamp].into_iter().filter(|r| if *r == Role::Snapshot { snapshot } else { timestamp }) {
            let named = root.roles.get(&role.tough()).map(|r| r.keyids.iter().map(|id| hex::encode(id.as_ref())).collect::<Vec<_>>()).unwrap_or_default();
            let held = keys.get(role).map(|k| k.key_id_hex()).transpose()?;
            if !held.is_some_and(|id| named.contains(&id)) {
                return Err(TufError::Tough(format!(
                    "the staged metadata needs a {} signature by the key root version {} names, which this instance does not hold; \
                     it stays staged until the instance has it ([keys] tuf_{})",
                    role.name(),
                    root.version,
                    role.name()
                )));
            }
        }

        let mut adopted = Vec::new();
        for (_, p) in live.iter().filter(|(_, p)| p.role() == Role::Root) {
            let bytes = p.to_bytes()?;
            self.write(&p.file_name(), &bytes)?;
            self.write("root.json", &bytes)?;
            adopted.push(p.file_name());
        }
        if let Some(t) = targets {
            let name = format!("{}.targets.json", t.signed.version);
            let bytes = Proposal::Targets(t.clone()).to_bytes()?;
            self.write(&name, &bytes)?;
            self.write_snapshot_chain(&root, keys, expiry, now, t.signed.version, &bytes, next(c.snapshot.signed.version), next(c.timestamp.signed.version)).await?;
            adopted.push(name);
        }
        // Whatever the new root no longer accepts (its snapshot or timestamp key changed).
        for _ in Role::ALL {
            if self.resign_unaccepted(keys, expiry, now).await?.is_none() {
                break;
            }
        }
        Ok(adopted)
    }

    /// Removes the staged files that are published (the current role's version is theirs or
    /// newer); true if any was. Until then `signet tuf publish --wait` keeps waiting, so a
    /// staged file gone means clients are served what it held.
    pub fn forget_adopted(&self) -> Result<bool, TufError> {
        let staged = self.staged()?;
        if staged.is_empty() {
            return Ok(false);
        }
        let c = self.current()?;
        let mut forgot = false;
        for (path, p) in staged {
            if is_published(&c, &p) {
                std::fs::remove_file(&path).map_err(|source| TufError::Io { path, source })?;
                forgot = true;
            }
        }
        Ok(forgot)
    }
}

/// True when `p`'s version, or a newer one, is the current one of its role.
fn is_published(c: &Current, p: &Proposal) -> bool {
    let current = match p {
        Proposal::Root(_) => c.root.signed.version.get(),
        Proposal::Targets(_) => c.targets.signed.version.get(),
    };
    p.version() <= current
}

#[cfg(test)]
mod tests;
