//! The repository on disk, which is also its own state: `timestamp.json` names the current
//! snapshot, which names the current targets; the newest `N.root.json` is the root.
//!
//! Every change is written bottom-up (targets, then targets metadata, then snapshot, then
//! `timestamp.json` by an atomic rename), so a reader, or a crash, sees either the old
//! repository or the new one, never a timestamp naming files not yet written. Old versions
//! stay: a client that read the previous timestamp may still fetch what it named, and every
//! `N.root.json` must stay for clients to walk the root chain.

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::path::{Path, PathBuf};

use aws_lc_rs::rand::SystemRandom;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tough::editor::signed::SignedRole;
use tough::schema::decoded::{Decoded, Hex};
use tough::schema::{Hashes, KeyHolder, Metafile, Role as _, RoleKeys as ToughRoleKeys, Root, Signed, Snapshot, Target, Targets, Timestamp};
use tough::TargetName;

use super::keys::{HeldKey, Role, RoleKeys};
use super::error::TufError;
use super::Expiry;

/// The TUF specification version the metadata claims (tough's; python-tuf and go-tuf accept 1.x).
const SPEC_VERSION: &str = "1.0.0";

/// What [`Repository::publish`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Published {
    /// The targets already held these documents.
    Unchanged,
    /// New targets metadata, at this version.
    Targets(u64),
}

/// Where the repository stands: each role's version and expiry (Unix seconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub root: (u64, i64),
    pub targets: (u64, i64),
    pub snapshot: (u64, i64),
    pub timestamp: (u64, i64),
    /// Each target's name and length.
    pub target_names: Vec<(String, u64)>,
}

impl Status {
    pub fn of(&self, role: Role) -> (u64, i64) {
        match role {
            Role::Root => self.root,
            Role::Targets => self.targets,
            Role::Snapshot => self.snapshot,
            Role::Timestamp => self.timestamp,
        }
    }
}

/// The current signed metadata.
pub(super) struct Current {
    pub(super) root: Signed<Root>,
    pub(super) targets: Signed<Targets>,
    targets_bytes: Vec<u8>,
    pub(super) snapshot: Signed<Snapshot>,
    snapshot_bytes: Vec<u8>,
    pub(super) timestamp: Signed<Timestamp>,
}

pub struct Repository {
    dir: PathBuf,
}

pub(super) fn tough_err(e: impl std::fmt::Display) -> TufError {
    TufError::Tough(e.to_string())
}

pub(super) fn expires(now: jiff::Timestamp, role: Role, expiry: &Expiry) -> Result<jiff::Timestamp, TufError> {
    // Whole seconds: python-tuf parses `expires` as %Y-%m-%dT%H:%M:%SZ, with no fraction.
    let secs = now.as_second().saturating_add(i64::try_from(expiry.of(role).as_secs()).unwrap_or(i64::MAX / 2));
    jiff::Timestamp::from_second(secs).map_err(tough_err)
}

pub(super) fn next(version: NonZeroU64) -> NonZeroU64 {
    version.saturating_add(1)
}

fn metafile(version: NonZeroU64, bytes: &[u8]) -> Metafile {
    Metafile {
        length: Some(bytes.len() as u64),
        hashes: Some(Hashes { sha256: Decoded::<Hex>::from(signet_core::hash::sha256(bytes).to_vec()), _extra: HashMap::new() }),
        version,
        _extra: HashMap::new(),
    }
}

async fn sign<T: tough::schema::Role + Serialize>(role: T, root: &Root, keys: &RoleKeys, who: Role) -> Result<SignedRole<T>, TufError> {
    let key = keys.source(who)?;
    if let Some(needed) = root.roles.get(&who.tough()).map(|r| r.threshold.get()).filter(|t| *t > 1) {
        // One key here can never meet it: say where the signatures come from.
        return Err(TufError::Tough(format!(
            "the {} role needs {needed} signatures (the root names {} keys for it), more than the one key held here: sign it in a \
             ceremony (`signet tuf propose {}`, `signet tuf sign --key` by {needed} holders, `signet tuf publish`)",
            who.name(),
            root.roles.get(&who.tough()).map_or(0, |r| r.keyids.len()),
            who.name()
        )));
    }
    SignedRole::new(role, &KeyHolder::Root(root.clone()), &[key], &SystemRandom::new()).await.map_err(tough_err)
}

/// Targets metadata listing `documents`, each written (by its hash) into `dir`.
pub(super) fn targets_of(documents: &[(&str, Vec<u8>)], version: NonZeroU64, expires: jiff::Timestamp, dir: &Path) -> Result<Targets, TufError> {
    let mut targets = Targets::new(SPEC_VERSION.into(), version, expires);
    std::fs::create_dir_all(dir).map_err(|source| TufError::Io { path: dir.to_path_buf(), source })?;
    for (name, bytes) in documents {
        let digest = signet_core::hash::sha256(bytes);
        let path = dir.join(format!("{}.{name}", hex::encode(digest)));
        signet_core::files::write_atomic(&path, bytes, 0o644).map_err(|source| TufError::Io { path, source })?;
        let target = Target {
            length: bytes.len() as u64,
            hashes: Hashes { sha256: Decoded::<Hex>::from(digest.to_vec()), _extra: HashMap::new() },
            custom: HashMap::new(),
            _extra: HashMap::new(),
        };
        targets.targets.insert(TargetName::new(*name).map_err(tough_err)?, target);
    }
    Ok(targets)
}

impl Repository {
    pub fn at(dir: impl Into<PathBuf>) -> Repository {
        Repository { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// True once the repository has its first root.
    pub fn exists(&self) -> bool {
        self.dir.join("1.root.json").exists()
    }

    pub(super) fn write(&self, name: &str, bytes: &[u8]) -> Result<(), TufError> {
        let path = self.dir.join(name);
        signet_core::files::write_atomic(&path, bytes, 0o644).map_err(|source| TufError::Io { path, source })
    }

    pub(super) fn read<T: DeserializeOwned>(&self, name: &str) -> Result<(T, Vec<u8>), TufError> {
        let path = self.dir.join(name);
        let bytes = std::fs::read(&path).map_err(|source| TufError::Io { path: path.clone(), source })?;
        let parsed = serde_json::from_slice(&bytes).map_err(|e| TufError::Corrupt { path, msg: e.to_string() })?;
        Ok((parsed, bytes))
    }

    /// Makes a new repository: root version 1, signed by the root key, listing one key per
    /// role, then the first targets holding `documents`.
    pub async fn create(&self, keys: &RoleKeys, expiry: &Expiry, documents: &[(&str, Vec<u8>)], now: jiff::Timestamp) -> Result<(), TufError> {
        if self.exists() {
            return Err(TufError::Corrupt { path: self.dir.join("1.root.json"), msg: "a repository is already here".into() });
        }
        std::fs::create_dir_all(self.dir.join("targets")).map_err(|source| TufError::Io { path: self.dir.clone(), source })?;
        let mut root = Root {
            spec_version: SPEC_VERSION.into(),
            consistent_snapshot: true,
            version: NonZeroU64::MIN,
            expires: expires(now, Role::Root, expiry)?,
            keys: HashMap::new(),
            roles: HashMap::new(),
            _extra: HashMap::new(),
        };
        for role in Role::ALL {
            let key = keys.public(role)?;
            let id = key.key_id().map_err(tough_err)?;
            root.keys.insert(id.clone(), key);
            root.roles.insert(role.tough(), ToughRoleKeys { keyids: vec![id], threshold: NonZeroU64::MIN, _extra: HashMap::new() });
        }
        let signed_root = sign(root.clone(), &root, keys, Role::Root).await?;
        self.write_targets_chain(&root, keys, expiry, documents, now, (NonZeroU64::MIN, NonZeroU64::MIN, NonZeroU64::MIN)).await?;
        // The root last: until it exists, the repository does not (a crash before redoes it all).
        self.write("root.json", signed_root.buffer())?;
        self.write("1.root.json", signed_root.buffer())
    }

    /// Writes `documents` as target files, and targets metadata listing them at `version`,
    /// signed by the targets key.
    async fn write_targets(
        &self,
        root: &Root,
        keys: &RoleKeys,
        expiry: &Expiry,
        documents: &[(&str, Vec<u8>)],
        now: jiff::Timestamp,
        version: NonZeroU64,
    ) -> Result<SignedRole<Targets>, TufError> {
        let targets = targets_of(documents, version, expires(now, Role::Targets, expiry)?, &self.dir.join("targets"))?;
        let signed = sign(targets, root, keys, Role::Targets).await?;
        self.write(&signed.signed().signed.filename(true), signed.buffer())?;
        Ok(signed)
    }

    /// Signs targets holding `documents` at the given versions of targets, snapshot and
    /// timestamp, and writes them bottom-up.
    async fn write_targets_chain(
        &self,
        root: &Root,
        keys: &RoleKeys,
        expiry: &Expiry,
        documents: &[(&str, Vec<u8>)],
        now: jiff::Timestamp,
        (targets_v, snapshot_v, timestamp_v): (NonZeroU64, NonZeroU64, NonZeroU64),
    ) -> Result<(), TufError> {
        let signed = self.write_targets(root, keys, expiry, documents, now, targets_v).await?;
        self.write_snapshot_chain(root, keys, expiry, now, targets_v, signed.buffer(), snapshot_v, timestamp_v).await
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) async fn write_snapshot_chain(
        &self,
        root: &Root,
        keys: &RoleKeys,
        expiry: &Expiry,
        now: jiff::Timestamp,
        targets_v: NonZeroU64,
        targets_bytes: &[u8],
        snapshot_v: NonZeroU64,
        timestamp_v: NonZeroU64,
    ) -> Result<(), TufError> {
        let mut snapshot = Snapshot::new(SPEC_VERSION.into(), snapshot_v, expires(now, Role::Snapshot, expiry)?);
        snapshot.meta.insert("targets.json".into(), metafile(targets_v, targets_bytes));
        let signed_snapshot = sign(snapshot, root, keys, Role::Snapshot).await?;
        self.write(&signed_snapshot.signed().signed.filename(true), signed_snapshot.buffer())?;
        self.write_timestamp(root, keys, expiry, now, snapshot_v, signed_snapshot.buffer(), timestamp_v).await
    }

    #[allow(clippy::too_many_arguments)]
    async fn write_timestamp(
        &self,
        root: &Root,
        keys: &RoleKeys,
        expiry: &Expiry,
        now: jiff::Timestamp,
        snapshot_v: NonZeroU64,
        snapshot_bytes: &[u8],
        timestamp_v: NonZeroU64,
    ) -> Result<(), TufError> {
        let mut timestamp = Timestamp::new(SPEC_VERSION.into(), timestamp_v, expires(now, Role::Timestamp, expiry)?);
        timestamp.meta.insert("snapshot.json".into(), metafile(snapshot_v, snapshot_bytes));
        let signed = sign(timestamp, root, keys, Role::Timestamp).await?;
        self.write("timestamp.json", signed.buffer())
    }

    /// The newest root's file name: roots are never removed, so the chain has no gap.
    pub(super) fn newest_root_name(&self) -> String {
        let mut n = 1u64;
        while self.dir.join(format!("{}.root.json", n + 1)).exists() {
            n += 1;
        }
        format!("{n}.root.json")
    }

    /// The newest root's bytes, as published: what a client is given once to bootstrap from.
    pub fn newest_root(&self) -> Result<Vec<u8>, TufError> {
        let path = self.dir.join(self.newest_root_name());
        std::fs::read(&path).map_err(|source| TufError::Io { path, source })
    }

    pub(super) fn current(&self) -> Result<Current, TufError> {
        let (root, _) = self.read::<Signed<Root>>(&self.newest_root_name())?;
        let (timestamp, _) = self.read::<Signed<Timestamp>>("timestamp.json")?;
        let corrupt = |name: &str, msg: &str| TufError::Corrupt { path: self.dir.join(name), msg: msg.into() };
        let snapshot_v = timestamp.signed.meta.get("snapshot.json").ok_or_else(|| corrupt("timestamp.json", "it names no snapshot.json"))?.version;
        let snapshot_name = format!("{snapshot_v}.snapshot.json");
        let (snapshot, snapshot_bytes) = self.read::<Signed<Snapshot>>(&snapshot_name)?;
        let targets_v = snapshot.signed.meta.get("targets.json").ok_or_else(|| corrupt(&snapshot_name, "it names no targets.json"))?.version;
        let (targets, targets_bytes) = self.read::<Signed<Targets>>(&format!("{targets_v}.targets.json"))?;
        Ok(Current { root, targets, targets_bytes, snapshot, snapshot_bytes, timestamp })
    }

    /// Each role's version and expiry, and the targets.
    pub fn status(&self) -> Result<Status, TufError> {
        let c = self.current()?;
        let mut target_names: Vec<_> = c.targets.signed.targets.iter().map(|(n, t)| (n.raw().to_string(), t.length)).collect();
        target_names.sort();
        Ok(Status {
            root: (c.root.signed.version.get(), c.root.signed.expires.as_second()),
            targets: (c.targets.signed.version.get(), c.targets.signed.expires.as_second()),
            snapshot: (c.snapshot.signed.version.get(), c.snapshot.signed.expires.as_second()),
            timestamp: (c.timestamp.signed.version.get(), c.timestamp.signed.expires.as_second()),
            target_names,
        })
    }

    /// Publishes `documents` as the targets, unless the current targets hold exactly them.
    /// Needs the targets, snapshot and timestamp keys.
    pub async fn publish(&self, keys: &RoleKeys, expiry: &Expiry, documents: &[(&str, Vec<u8>)], now: jiff::Timestamp) -> Result<Published, TufError> {
        let c = self.current()?;
        let held = &c.targets.signed.targets;
        let same = held.len() == documents.len()
            && documents.iter().all(|(name, bytes)| {
                let digest = signet_core::hash::sha256(bytes);
                held.iter().any(|(n, t)| n.raw() == *name && t.length == bytes.len() as u64 && t.hashes.sha256.as_ref() == digest.as_slice())
            });
        if same {
            return Ok(Published::Unchanged);
        }
        // Every key first: a missing one must not leave new targets behind that no snapshot names.
        for role in [Role::Targets, Role::Snapshot, Role::Timestamp] {
            keys.source(role)?;
        }
        let versions = (self.next_targets_version(&c)?, next(c.snapshot.signed.version), next(c.timestamp.signed.version));
        self.write_targets_chain(&c.root.signed, keys, expiry, documents, now, versions).await?;
        Ok(Published::Targets(versions.0.get()))
    }

    /// The newest `N.targets.json` on disk (signed here, or copied in after an offline signing).
    fn newest_targets_version(&self) -> Result<u64, TufError> {
        let entries = std::fs::read_dir(&self.dir).map_err(|source| TufError::Io { path: self.dir.clone(), source })?;
        Ok(entries
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_suffix(".targets.json")).and_then(|v| v.parse::<u64>().ok()))
            .max()
            .unwrap_or(0))
    }

    /// Past every targets version on disk, so that a targets file signed offline and not
    /// yet adopted is never overwritten.
    pub(super) fn next_targets_version(&self, c: &Current) -> Result<NonZeroU64, TufError> {
        let newest = self.newest_targets_version()?.max(c.targets.signed.version.get());
        Ok(NonZeroU64::new(newest.saturating_add(1)).unwrap_or(NonZeroU64::MIN))
    }

    /// Signs new targets holding `documents` and writes them, without a snapshot or
    /// timestamp: the offline half of a publication ([`Repository::adopt`] is the other).
    pub async fn sign_targets(&self, keys: &RoleKeys, expiry: &Expiry, documents: &[(&str, Vec<u8>)], now: jiff::Timestamp) -> Result<u64, TufError> {
        let c = self.current()?;
        let version = self.next_targets_version(&c)?;
        self.write_targets(&c.root.signed, keys, expiry, documents, now, version).await?;
        Ok(version.get())
    }

    /// Takes up targets signed elsewhere (`signet tuf sign` on a copy, with the targets key
    /// offline): the newest `N.targets.json` past the current one, once its signature checks
    /// against the root and each of its targets is here with its hash, gets a snapshot and a
    /// timestamp. Returns its version, or None when there is nothing newer.
    pub async fn adopt(&self, keys: &RoleKeys, expiry: &Expiry, now: jiff::Timestamp) -> Result<Option<u64>, TufError> {
        let c = self.current()?;
        let newest = self.newest_targets_version()?;
        if newest <= c.targets.signed.version.get() {
            return Ok(None);
        }
        let name = format!("{newest}.targets.json");
        let (signed, bytes) = self.read::<Signed<Targets>>(&name)?;
        let corrupt = |msg: String| TufError::Corrupt { path: self.dir.join(&name), msg };
        c.root.signed.verify_role(&signed).map_err(|e| corrupt(format!("not signed by the root's targets key: {e}")))?;
        if signed.signed.version.get() != newest {
            return Err(corrupt(format!("its version is {}, its name says {newest}", signed.signed.version)));
        }
        if signed.signed.expires.as_second() <= now.as_second() {
            return Err(corrupt(format!("it expired at {}", signed.signed.expires)));
        }
        for (target, meta) in &signed.signed.targets {
            let file = format!("targets/{}.{}", hex::encode(&meta.hashes.sha256), target.raw());
            let held = std::fs::read(self.dir.join(&file)).map_err(|_| corrupt(format!("its target {file} is missing; copy targets/ too")))?;
            if held.len() as u64 != meta.length || signet_core::hash::sha256(&held).as_slice() != meta.hashes.sha256.as_ref() {
                return Err(corrupt(format!("its target {file} does not match its length and hash")));
            }
        }
        let versions = (signed.signed.version, next(c.snapshot.signed.version), next(c.timestamp.signed.version));
        self.write_snapshot_chain(&c.root.signed, keys, expiry, now, versions.0, &bytes, versions.1, versions.2).await?;
        Ok(Some(newest))
    }

    /// Replaces `role`'s key with `new_key`: a new root version lists it in place of the old
    /// one, signed by the root key (for the root role, by the old key and the new one, so
    /// that a client holding the old root accepts the new). Then the role's current
    /// metadata is signed again with the new key, since clients that take up the new root
    /// accept no other. `keys` must hold the current root key, and every key the re-signing
    /// needs (for targets: targets, snapshot and timestamp). Returns the new root's version.
    ///
    /// The caller keeps `new_key` where the role's key lives before calling this, and
    /// destroys the old one after: the root that lists the new key is written only here.
    pub async fn rotate_key(&self, role: Role, keys: &RoleKeys, new_key: HeldKey, expiry: &Expiry, now: jiff::Timestamp) -> Result<u64, TufError> {
        let c = self.current()?;
        if let Some(shared) = c.root.signed.roles.get(&role.tough()).filter(|r| r.keyids.len() > 1 || r.threshold.get() > 1) {
            // Replacing one key of several would silently drop the others and the threshold.
            return Err(TufError::Tough(format!(
                "the {} role has {} keys with a threshold of {}: change its keys in a ceremony (`signet tuf propose root`), not by rotating one",
                role.name(),
                shared.keyids.len(),
                shared.threshold
            )));
        }
        let old_root_key = keys.source(Role::Root)?;
        let new_public = new_key.public()?;
        let new_id = new_public.key_id().map_err(tough_err)?;
        let new_keys = keys.clone().with(new_key);
        // Every key the re-signing needs, before anything is written.
        let resign = match role {
            Role::Root => vec![],
            Role::Targets => vec![Role::Targets, Role::Snapshot, Role::Timestamp],
            Role::Snapshot => vec![Role::Snapshot, Role::Timestamp],
            Role::Timestamp => vec![Role::Timestamp],
        };
        for r in &resign {
            new_keys.source(*r)?;
        }

        let old = &c.root.signed;
        let mut root = old.clone();
        root.version = next(old.version);
        root.expires = expires(now, Role::Root, expiry)?;
        let old_ids = old.roles.get(&role.tough()).map(|r| r.keyids.clone()).unwrap_or_default();
        root.roles.insert(role.tough(), ToughRoleKeys { keyids: vec![new_id.clone()], threshold: NonZeroU64::MIN, _extra: HashMap::new() });
        root.keys.insert(new_id, new_public);
        // A key no role names any more leaves the root.
        for id in old_ids {
            if !root.roles.values().any(|r| r.keyids.contains(&id)) {
                root.keys.remove(&id);
            }
        }
        let rng = SystemRandom::new();
        let signed = match role {
            Role::Root => {
                let by_new = SignedRole::new(root.clone(), &KeyHolder::Root(root.clone()), &[new_keys.source(Role::Root)?], &rng).await.map_err(tough_err)?;
                let by_old = SignedRole::new(root.clone(), &KeyHolder::Root(old.clone()), &[old_root_key], &rng).await.map_err(tough_err)?;
                by_new.add_old_signatures(by_old.signed().signatures.clone()).map_err(tough_err)?
            }
            _ => SignedRole::new(root.clone(), &KeyHolder::Root(root.clone()), &[old_root_key], &rng).await.map_err(tough_err)?,
        };
        // What a client will check: the new root under the old one, and under itself.
        old.verify_role(signed.signed()).map_err(|e| TufError::Tough(format!("the new root does not verify under the old: {e}")))?;
        root.verify_role(signed.signed()).map_err(|e| TufError::Tough(format!("the new root does not verify under itself: {e}")))?;
        let version = root.version;
        self.write(&format!("{version}.root.json"), signed.buffer())?;
        self.write("root.json", signed.buffer())?;

        self.resign(role, &new_keys, expiry, now).await?;
        Ok(version.get())
    }

    /// Signs `role`'s current metadata again, as a new version, with the key `keys` holds for
    /// it (and the chain above it): the second half of [`Repository::rotate_key`], and what
    /// finishes a rotation that stopped between the two.
    pub async fn resign(&self, role: Role, keys: &RoleKeys, expiry: &Expiry, now: jiff::Timestamp) -> Result<(), TufError> {
        let c = self.current()?;
        let root = &c.root.signed;
        let (targets_v, snapshot_v, timestamp_v) = (c.targets.signed.version, c.snapshot.signed.version, c.timestamp.signed.version);
        let new_keys = keys;
        match role {
            Role::Root => {}
            Role::Targets => {
                let mut targets = c.targets.signed.clone();
                targets.version = self.next_targets_version(&c)?;
                // Signed now, so valid for the configured term from now, as every signing is.
                targets.expires = expires(now, Role::Targets, expiry)?;
                let v = targets.version;
                let signed = sign(targets, root, new_keys, Role::Targets).await?;
                self.write(&signed.signed().signed.filename(true), signed.buffer())?;
                self.write_snapshot_chain(root, new_keys, expiry, now, v, signed.buffer(), next(snapshot_v), next(timestamp_v)).await?;
            }
            Role::Snapshot => {
                self.write_snapshot_chain(root, new_keys, expiry, now, targets_v, &c.targets_bytes, next(snapshot_v), next(timestamp_v)).await?
            }
            Role::Timestamp => self.write_timestamp(root, new_keys, expiry, now, snapshot_v, &c.snapshot_bytes, next(timestamp_v)).await?,
        }
        Ok(())
    }

    /// Every key id the newest root names for `role`, hex, and its threshold.
    pub fn role_key_ids(&self, role: Role) -> Result<(Vec<String>, u64), TufError> {
        let c = self.current()?;
        Ok(match c.root.signed.roles.get(&role.tough()) {
            Some(r) => (r.keyids.iter().map(|id| hex::encode(id.as_ref())).collect(), r.threshold.get()),
            None => (Vec::new(), 1),
        })
    }

    /// The key id the newest root names for `role`, if exactly one.
    pub fn role_key_id(&self, role: Role) -> Result<Option<String>, TufError> {
        let c = self.current()?;
        Ok(match c.root.signed.roles.get(&role.tough()).map(|r| r.keyids.as_slice()) {
            Some([id]) => Some(hex::encode(id.as_ref())),
            _ => None,
        })
    }

    /// Signs again each role with less than half its validity left, and returns those it
    /// signed. The targets are re-signed only when their key is here; without it, an
    /// expiring targets is an error that says so. Root is never re-signed here.
    pub async fn refresh(&self, keys: &RoleKeys, expiry: &Expiry, now: jiff::Timestamp) -> Result<Vec<Role>, TufError> {
        let c = self.current()?;
        let due = |role: Role, expires: jiff::Timestamp| expires.as_second() - now.as_second() < (expiry.of(role).as_secs() / 2) as i64;
        let root = &c.root.signed;
        let (targets_v, snapshot_v, timestamp_v) = (c.targets.signed.version, c.snapshot.signed.version, c.timestamp.signed.version);
        if due(Role::Targets, c.targets.signed.expires) {
            for role in [Role::Targets, Role::Snapshot, Role::Timestamp] {
                keys.source(role)?;
            }
            let mut targets = c.targets.signed.clone();
            targets.version = self.next_targets_version(&c)?;
            targets.expires = expires(now, Role::Targets, expiry)?;
            let version = targets.version;
            let signed = sign(targets, root, keys, Role::Targets).await?;
            self.write(&signed.signed().signed.filename(true), signed.buffer())?;
            self.write_snapshot_chain(root, keys, expiry, now, version, signed.buffer(), next(snapshot_v), next(timestamp_v)).await?;
            return Ok(vec![Role::Targets, Role::Snapshot, Role::Timestamp]);
        }
        if due(Role::Snapshot, c.snapshot.signed.expires) {
            self.write_snapshot_chain(root, keys, expiry, now, targets_v, &c.targets_bytes, next(snapshot_v), next(timestamp_v)).await?;
            return Ok(vec![Role::Snapshot, Role::Timestamp]);
        }
        if due(Role::Timestamp, c.timestamp.signed.expires) {
            self.write_timestamp(root, keys, expiry, now, snapshot_v, &c.snapshot_bytes, next(timestamp_v)).await?;
            return Ok(vec![Role::Timestamp]);
        }
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests;
