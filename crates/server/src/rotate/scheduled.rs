//! A TSA or intermediate rotation scheduled on a running cluster: `signet trust rotate
//! --at TIME`, no instance stopped.
//!
//! Clients must hold the new key before it signs anything, and keep the old one for what it
//! signed. So a rotation is made ahead of its time and published at once:
//!
//! 1. `signet trust rotate --at` writes the new key and certificate beside the current ones
//!    (`keys/<key>.next.pem` or a token's URI, `ca/next/<name>.pem`) and the rotation into
//!    `ca/rotations.json` as [`Next`]. The server may be running; nothing it uses changes.
//! 2. Each instance's [`watch`] finds it within [`LOOK_EVERY`]: it rebuilds the trust
//!    documents (the old window ending at the hand-over, the new one starting there) and
//!    publishes them through TUF, and loads the new key beside the old
//!    ([`signet_ca::handover`]). On PostgreSQL it also puts the rotation into the database
//!    (a file key sealed with `keys/shard-seal.key`), where every other instance takes it
//!    into its own data dir ([`adopt_shared`]) and does the same.
//! 3. From the hand-over second on, each signature is made by the key whose window holds the
//!    time it states. Then the files are promoted ([`promote_due`]): the old certificate to
//!    `ca/retired/`, the new one in its place, the old key file destroyed. A start after the
//!    hand-over promotes first.
//!
//! An intermediate's old window ends a leaf's lifetime after the hand-over, not at it: a
//! certificate issued the second before is logged, and so observed, up to ten minutes later.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use signet_core::{files, hash::sha256, pem};

use super::{read, read_der, write, Authority, ManifestLock, NewKey, Report, Rotated, Successor};
use crate::state::AppState;

/// How often each instance looks for a scheduled rotation, here and in the database.
pub const LOOK_EVERY: Duration = Duration::from_secs(2);

/// The least time ahead a rotation may be scheduled: every instance must have published
/// the new key (its look, the database's, TUF's) before it signs.
pub const LEAD: Duration = Duration::from_secs(10);

/// A rotation published ahead of the second it starts to sign.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Next {
    /// The new certificate, under `ca/`.
    pub cert: String,
    /// The new key: a path under the data dir, or a token's or KMS key's URI.
    pub key: String,
    /// The first second it signs (RFC 3339).
    pub from: String,
    /// The end of the retired key's window (RFC 3339).
    pub old_to: String,
    /// When this instance published it (and, on PostgreSQL, handed it to the others).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<String>,
}

impl Next {
    pub fn from_unix(&self) -> Result<i64, String> {
        unix(&self.from)
    }
}

fn unix(rfc3339: &str) -> Result<i64, String> {
    rfc3339.parse::<jiff::Timestamp>().map(|t| t.as_second()).map_err(|e| format!("{}: not an RFC 3339 time: {e}", rfc3339))
}

fn rfc3339(unix: i64) -> String {
    jiff::Timestamp::from_second(unix).map_or_else(|_| "1970-01-01T00:00:00Z".into(), |t| t.to_string())
}

fn now_unix() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// Where a scheduled rotation keeps the new certificate and (a file) key until it is due.
fn next_files(authority: Authority) -> (String, String) {
    let key_stem = authority.files().1.trim_end_matches(".pem");
    (format!("next/{}.pem", authority.name()), format!("keys/{key_stem}.next.pem"))
}

/// Schedules `authority`'s rotation for `from`; see the module's comment. `root_key` is the
/// CA root key, as for [`super::rotate`]. The data dir may be in use.
pub fn schedule(data_dir: &Path, authority: Authority, root_key: &signet_ca::x509::CaKey, new_key: &NewKey, from: jiff::Timestamp) -> Result<Report, String> {
    let from = from.as_second();
    let earliest = now_unix() + LEAD.as_secs() as i64;
    if from < earliest {
        return Err(format!(
            "--at {} is less than {} s away: every instance must publish the new key before it signs; give a later time",
            rfc3339(from),
            LEAD.as_secs()
        ));
    }
    let ca = data_dir.join("ca");
    let (cert_file, _) = authority.files();
    let root_der = read_der(&ca.join("root.pem"))?;
    let old_cert = read_der(&ca.join(cert_file))?;
    super::check_root_key(&root_der, root_key)?;
    let _manifest = ManifestLock::take(data_dir)?;
    let mut rotations = read(data_dir)?;
    if let Some(next) = authority.record(&mut rotations).as_ref().and_then(|r| r.next.as_ref()) {
        return Err(format!("a rotation of the {} is already scheduled for {}; schedule the next after it", authority.title(), next.from));
    }
    let Successor { pkcs8, cert } = super::successor(authority, root_key, &root_der, &old_cert, new_key)?;
    let (cert_name, key_file) = next_files(authority);
    let old_to = match authority {
        Authority::Tsa => from,
        Authority::Intermediate => from + signet_ca::authority::LEAF_VALIDITY.as_secs() as i64,
    };
    let key = match (&pkcs8, new_key) {
        (Some(pkcs8), _) => {
            let path = data_dir.join(&key_file);
            files::write_atomic(&path, pem::encode("PRIVATE KEY", pkcs8).as_bytes(), 0o600).map_err(|e| format!("{}: {e}", path.display()))?;
            key_file
        }
        (None, NewKey::Elsewhere { source, .. }) => source.to_string(),
        (None, NewKey::File) => return Err("a new file key was not made (a bug)".into()),
    };
    write_cert(data_dir, &cert_name, &cert)?;
    let instance_start = crate::trust::instance_valid_from(&root_der)?;
    let rotated = authority.record(&mut rotations).get_or_insert_with(|| Rotated::starting(instance_start));
    let retired_window = (rotated.current_from.clone(), rfc3339(old_to));
    rotated.next = Some(Next { cert: cert_name.clone(), key: key.clone(), from: rfc3339(from), old_to: rfc3339(old_to), published: None });
    write(data_dir, &rotations)?;
    Ok(Report {
        authority: authority.name(),
        new_key: key,
        retired_cert: format!("ca/{cert_file}"),
        retired_window,
        new_cert: format!("ca/{cert_name}"),
        new_from: rfc3339(from),
    })
}

fn write_cert(data_dir: &Path, name: &str, der: &[u8]) -> Result<(), String> {
    let path = data_dir.join("ca").join(name);
    if let Some(dir) = path.parent() {
        files::ensure_private_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    files::write_atomic(&path, pem::encode("CERTIFICATE", der).as_bytes(), 0o644).map_err(|e| format!("{}: {e}", path.display()))
}

/// Promotes every scheduled rotation whose second has come: the old certificate to
/// `ca/retired/` with its window, the new one in its place, its key where the old one was
/// (a file key; the old file is destroyed). Each step can be run again: a promotion cut
/// short finishes at the next call.
pub fn promote_due(data_dir: &Path, now: i64) -> Result<Vec<Authority>, String> {
    let _manifest = ManifestLock::take(data_dir)?;
    let mut rotations = read(data_dir)?;
    let mut promoted = Vec::new();
    for authority in Authority::ALL {
        let Some(rotated) = authority.record(&mut rotations).as_mut() else { continue };
        let Some(next) = rotated.next.clone() else { continue };
        if next.from_unix()? > now {
            continue;
        }
        promote(data_dir, authority, rotated, &next)?;
        promoted.push(authority);
    }
    if !promoted.is_empty() {
        write(data_dir, &rotations)?;
    }
    Ok(promoted)
}

fn promote(data_dir: &Path, authority: Authority, rotated: &mut Rotated, next: &Next) -> Result<(), String> {
    let ca = data_dir.join("ca");
    let (cert_file, key_file) = authority.files();
    let retired_name = format!("retired/{}-{}.pem", authority.name(), next.from_unix()?);
    let retired_path = ca.join(&retired_name);
    // Copied once: a rerun finds the new certificate in ca/<cert_file> already.
    if !retired_path.exists() {
        let old = read_der(&ca.join(cert_file))?;
        files::ensure_private_dir(&ca.join("retired")).map_err(|e| format!("{}: {e}", ca.display()))?;
        files::write_atomic(&retired_path, pem::encode("CERTIFICATE", &old).as_bytes(), 0o600).map_err(|e| format!("{}: {e}", retired_path.display()))?;
    }
    let next_cert = ca.join(&next.cert);
    if next_cert.exists() {
        let new = read_der(&next_cert)?;
        write_cert(data_dir, cert_file, &new)?;
    }
    let key_path = data_dir.join("keys").join(key_file);
    let current_key = match super::key_source(data_dir, &next.key)? {
        signet_keys::KeySource::File(from) if from.starts_with(data_dir) => {
            // The new key file takes the old one's place, which destroys it.
            if from.exists() {
                std::fs::rename(&from, &key_path).map_err(|e| format!("{} to {}: {e}", from.display(), key_path.display()))?;
            }
            format!("keys/{key_file}")
        }
        _ => {
            // On a token or in KMS: the old key file, if it was the one signing, could still sign.
            if rotated.key.as_deref().is_none_or(|k| k == format!("keys/{key_file}")) {
                super::destroy(&key_path)?;
            }
            next.key.clone()
        }
    };
    rotated.retired.push(super::Retired { cert: retired_name, valid_from: rotated.current_from.clone(), valid_to: next.old_to.clone() });
    rotated.current_from = next.from.clone();
    rotated.key = Some(current_key);
    rotated.next = None;
    let _ = std::fs::remove_file(&next_cert);
    Ok(())
}

/// The database's record of a rotation, for the instances that did not schedule it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Shared {
    /// SHA-256 (hex) of the certificate it replaces: an instance with another one missed a
    /// rotation, and must not take this one.
    follows: String,
    /// The new certificate (PEM).
    cert: String,
    /// The new key's URI, or its PKCS#8 sealed with the shard seal key.
    key: SharedKey,
    from: String,
    old_to: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum SharedKey {
    Uri(String),
    Sealed(serde_json::Value),
}

/// The storage meta key of an authority's `n`th rotation (from 1).
fn shared_name(authority: Authority, n: usize) -> String {
    format!("trust.{}.rotation.{n}", authority.name())
}

/// The number the next rotation of `authority` gets: one more than it has retired.
fn number(rotations: &mut super::Rotations, authority: Authority) -> usize {
    authority.record(rotations).as_ref().map_or(0, |r| r.retired.len()) + 1
}

/// On shared storage: puts this data dir's scheduled rotation into the database for the
/// other instances, unless it is there already. Another rotation under the same number
/// (scheduled through another instance) is refused.
pub fn offer_shared(store: &dyn signet_log::storage::Storage, seal: Option<&crate::shards::sealed::SealKey>, data_dir: &Path, authority: Authority) -> Result<(), String> {
    let mut rotations = read(data_dir)?;
    let n = number(&mut rotations, authority);
    let Some(next) = authority.record(&mut rotations).as_ref().and_then(|r| r.next.clone()) else { return Ok(()) };
    let name = shared_name(authority, n);
    let cert = read_der(&data_dir.join("ca").join(&next.cert))?;
    let current = read_der(&data_dir.join("ca").join(authority.files().0))?;
    let key = match super::key_source(data_dir, &next.key)? {
        signet_keys::KeySource::File(path) => {
            let seal = seal.ok_or_else(|| {
                "this instance cannot hand the new key to the others: its keys/shard-seal.key is missing or is not the one the database's instances share (its start-up log says which)".to_string()
            })?;
            let block = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let pkcs8 = pem::decode_first(&block).map_err(|e| format!("{}: {e}", path.display()))?.der;
            let sealed = seal.seal(&name, &pkcs8)?;
            SharedKey::Sealed(serde_json::from_slice(&sealed).map_err(|e| e.to_string())?)
        }
        _ => SharedKey::Uri(next.key.clone()),
    };
    let ours = Shared {
        follows: hex::encode(sha256(&current)),
        cert: pem::encode("CERTIFICATE", &cert),
        key,
        from: next.from.clone(),
        old_to: next.old_to.clone(),
    };
    let bytes = serde_json::to_vec(&ours).map_err(|e| e.to_string())?;
    let stored = store.get_or_init_meta(&name, &bytes).map_err(|e| e.to_string())?;
    let theirs: Shared = serde_json::from_slice(&stored).map_err(|e| format!("the database's {name}: {e}"))?;
    // A seal is randomised: the same rotation offered twice differs only there.
    if theirs.cert != ours.cert || theirs.from != ours.from {
        return Err(format!(
            "the database already holds rotation {n} of the {}, scheduled through another instance for {}: this data dir's, for {}, cannot be handed on; remove it (ca/rotations.json's \"next\") and let this instance take the database's",
            authority.title(),
            theirs.from,
            ours.from
        ));
    }
    Ok(())
}

/// On shared storage: takes a rotation another instance scheduled into this data dir, as
/// if scheduled here. True if it took one.
pub fn adopt_shared(store: &dyn signet_log::storage::Storage, seal: Option<&crate::shards::sealed::SealKey>, data_dir: &Path, authority: Authority) -> Result<bool, String> {
    let _manifest = ManifestLock::take(data_dir)?;
    let mut rotations = read(data_dir)?;
    if authority.record(&mut rotations).as_ref().is_some_and(|r| r.next.is_some()) {
        return Ok(false);
    }
    let n = number(&mut rotations, authority);
    let name = shared_name(authority, n);
    let Some(bytes) = store.meta(&name).map_err(|e| e.to_string())? else { return Ok(false) };
    let shared: Shared = serde_json::from_slice(&bytes).map_err(|e| format!("the database's {name}: {e}"))?;
    let (cert_file, _) = authority.files();
    let current = read_der(&data_dir.join("ca").join(cert_file))?;
    if shared.follows != hex::encode(sha256(&current)) {
        return Err(format!(
            "the database holds rotation {n} of the {}, which follows another certificate than this data dir's ca/{cert_file}: this data dir missed an earlier rotation; copy ca/ and keys/ from an instance that has it",
            authority.title()
        ));
    }
    let cert = pem::decode_first(shared.cert.as_bytes()).map_err(|e| format!("the database's {name}: {e}"))?.der;
    let (cert_name, key_file) = next_files(authority);
    let key = match shared.key {
        SharedKey::Uri(uri) => uri,
        SharedKey::Sealed(record) => {
            let seal = seal.ok_or_else(|| {
                format!("the {}'s new key is sealed in the database, but this data dir's keys/shard-seal.key is missing or is not the one its instances share: copy theirs here", authority.title())
            })?;
            let pkcs8 = seal.open(&name, record.to_string().as_bytes())?;
            let path = data_dir.join(&key_file);
            files::write_atomic(&path, pem::encode("PRIVATE KEY", &pkcs8).as_bytes(), 0o600).map_err(|e| format!("{}: {e}", path.display()))?;
            key_file
        }
    };
    write_cert(data_dir, &cert_name, &cert)?;
    let root_der = read_der(&data_dir.join("ca").join("root.pem"))?;
    let instance_start = crate::trust::instance_valid_from(&root_der)?;
    let rotated = authority.record(&mut rotations).get_or_insert_with(|| Rotated::starting(instance_start));
    rotated.next = Some(Next { cert: cert_name, key, from: shared.from, old_to: shared.old_to, published: None });
    write(data_dir, &rotations)?;
    Ok(true)
}

/// Records that this instance published `authority`'s scheduled rotation from `from`.
fn mark_published(data_dir: &Path, authority: Authority, from: i64) -> Result<(), String> {
    let _manifest = ManifestLock::take(data_dir)?;
    let mut rotations = read(data_dir)?;
    let Some(next) = authority.record(&mut rotations).as_mut().and_then(|r| r.next.as_mut()) else { return Ok(()) };
    if next.from_unix()? != from || next.published.is_some() {
        return Ok(());
    }
    next.published = Some(rfc3339(now_unix()));
    write(data_dir, &rotations)
}

/// At start, before the keys are opened: a rotation another instance of the database
/// scheduled, then every one whose second has come, promoted.
pub fn at_start(store: Option<(&dyn signet_log::storage::Storage, Option<&crate::shards::sealed::SealKey>)>, data_dir: &Path) -> Result<(), String> {
    if !super::manifest_path(data_dir).parent().is_some_and(Path::exists) {
        return Ok(());
    }
    if let Some((store, seal)) = store {
        for authority in Authority::ALL {
            adopt_shared(store, seal, data_dir, authority)?;
        }
    }
    for authority in promote_due(data_dir, now_unix())? {
        tracing::info!(authority = authority.name(), "a scheduled rotation's time has come: its key signs from now on");
    }
    Ok(())
}

/// The scheduled rotations not yet due, with their first second, for the hand-overs a
/// start sets up before anything signs.
pub fn pending(data_dir: &Path) -> Result<Vec<(Authority, i64)>, String> {
    let mut rotations = read(data_dir)?;
    let mut out = Vec::new();
    for authority in Authority::ALL {
        if let Some(next) = authority.record(&mut rotations).as_ref().and_then(|r| r.next.as_ref()) {
            out.push((authority, next.from_unix()?));
        }
    }
    Ok(out)
}

/// What the watch needs besides the state.
pub struct Watch {
    pub data_dir: std::path::PathBuf,
    pub pkcs11: signet_keys::Pkcs11Settings,
    /// On PostgreSQL: the store the instances share, and the seal key of their file keys.
    pub shared: Option<(Arc<dyn signet_log::storage::Storage>, Option<Arc<crate::shards::sealed::SealKey>>)>,
}

/// Looks for scheduled rotations every [`LOOK_EVERY`] for as long as the server runs, and
/// carries each through: publish, load, hand over, promote. On PostgreSQL it also takes up
/// the log keys other instances prepared ([`crate::shards::prepared`]).
pub fn watch(state: Arc<AppState>, w: Watch) -> tokio::task::JoinHandle<()> {
    let w = Arc::new(w);
    tokio::spawn(async move {
        // Per authority: the rotation published (its first second), and the last failure said.
        let mut published: [Option<i64>; 2] = [None, None];
        let mut failing: [Option<String>; 2] = [None, None];
        let mut prepared_failing: Option<String> = None;
        loop {
            match crate::shards::prepared::follow_all(&state).await {
                Ok(true) => crate::api::rekor_v1::republish(&state).await,
                Ok(false) => prepared_failing = None,
                Err(e) => {
                    if prepared_failing.as_deref() != Some(e.as_str()) {
                        tracing::error!(error = %e, "cannot take up a log key another instance prepared; retrying");
                        prepared_failing = Some(e);
                    }
                }
            }
            for (i, authority) in Authority::ALL.into_iter().enumerate() {
                let looked = look(&state, &w, authority, &mut published[i]).await;
                match looked {
                    Ok(()) => failing[i] = None,
                    Err(e) => {
                        if failing[i].as_deref() != Some(e.as_str()) {
                            tracing::error!(authority = authority.name(), error = %e, "a scheduled rotation cannot go on yet; retrying");
                            failing[i] = Some(e);
                        }
                    }
                }
            }
            tokio::time::sleep(LOOK_EVERY).await;
        }
    })
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, String> + Send + 'static) -> Result<T, String> {
    tokio::task::spawn_blocking(f).await.map_err(|e| format!("a rotation step failed unexpectedly: {e}"))?
}

async fn look(state: &Arc<AppState>, w: &Arc<Watch>, authority: Authority, published: &mut Option<i64>) -> Result<(), String> {
    let next = {
        let w = w.clone();
        blocking(move || {
            if let Some((store, seal)) = &w.shared {
                if adopt_shared(store.as_ref(), seal.as_deref(), &w.data_dir, authority)? {
                    tracing::info!(authority = authority.name(), "took up a rotation scheduled through another instance");
                }
            }
            let mut rotations = read(&w.data_dir)?;
            Ok(authority.record(&mut rotations).as_ref().and_then(|r| r.next.clone()))
        })
        .await?
    };
    let Some(next) = next else { return Ok(()) };
    let from = next.from_unix()?;
    // Published first, whether or not this instance can load the key: the others may.
    if *published != Some(from) {
        if let Some((store, seal)) = &w.shared {
            let (store, seal, data_dir) = (store.clone(), seal.clone(), w.data_dir.clone());
            blocking(move || offer_shared(store.as_ref(), seal.as_deref(), &data_dir, authority)).await?;
        }
        match authority {
            Authority::Tsa => state.tsa.end_at(from),
            Authority::Intermediate => state.ca.end_at(from),
        }
        crate::api::rekor_v1::republish(state).await;
        let data_dir = w.data_dir.clone();
        blocking(move || mark_published(&data_dir, authority, from)).await?;
        tracing::info!(authority = authority.name(), from = %next.from, old_to = %next.old_to, "published a scheduled rotation");
        *published = Some(from);
    }
    let loaded = match authority {
        Authority::Tsa => state.tsa.has_next_from(from),
        Authority::Intermediate => state.ca.hands_over_at(from),
    };
    if !loaded {
        let (state2, w2, next2) = (state.clone(), w.clone(), next.clone());
        blocking(move || load(&state2, &w2, authority, &next2, from)).await?;
    }
    let now = now_unix();
    if now >= from {
        match authority {
            Authority::Tsa => state.tsa.settle(now),
            Authority::Intermediate => state.ca.settle(now),
        }
        let data_dir = w.data_dir.clone();
        blocking(move || promote_due(&data_dir, now)).await?;
        tracing::info!(authority = authority.name(), "handed over to the scheduled key");
    }
    Ok(())
}

/// Opens the new key and hands over to it at `from`.
fn load(state: &AppState, w: &Watch, authority: Authority, next: &Next, from: i64) -> Result<(), String> {
    let source = super::key_source(&w.data_dir, &next.key)?;
    let cert = read_der(&w.data_dir.join("ca").join(&next.cert))?;
    match authority {
        Authority::Tsa => {
            let key = signet_keys::Signer::open(&source, &w.pkcs11, &[signet_keys::Algorithm::EcdsaP256Sha256], false)
                .map_err(|e| format!("the new TSA key {source}: {e}"))?;
            let current = state.tsa.now();
            let tsa = signet_ca::tsa::Tsa::new(Arc::new(key), cert, current.root_der()).map_err(|e| e.to_string())?.counting_with(&current);
            state.tsa.hand_over_at(from, tsa);
        }
        Authority::Intermediate => {
            let curve = super::curve_of(&cert)?;
            let key = signet_ca::x509::CaKey::open(&source, &w.pkcs11, curve, false).map_err(|e| format!("the new intermediate key {source}: {e}"))?;
            let next = state.ca.authority().successor(key, cert).map_err(|e| e.to_string())?;
            state.ca.hand_over_at(from, Arc::new(next));
        }
    }
    Ok(())
}
