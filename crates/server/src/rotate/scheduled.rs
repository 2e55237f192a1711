//! A TSA or intermediate rotation scheduled on a running cluster: `signet trust rotate
//! --at TIME`, no instance stopped.
//!
//! Clients must hold the new key before it signs anything, and keep the old one for what it
//! signed. So a rotation is made ahead of its time and published at once:
//!
//! 1. `signet trust rotate --at` writes the new key and certificate beside the current ones
//!    (`keys/<key>.next.pem` or a token's URI, `ca/next/<name>.pem`) and the rotation into
//!    `ca/rotations.json` as [`Next`]. The server may be running; nothing it uses changes.
//! 2. Each instance's [`super::watch`] finds it within [`LOOK_EVERY`]: it rebuilds the trust
//!    documents (the old window ending at the hand-over, the new one starting there) and
//!    publishes them through TUF, and loads the new key beside the old
//!    ([`signet_ca::handover`]). On PostgreSQL it also puts the rotation into the database
//!    (a file key sealed with `keys/shard-seal.key`), where every other instance takes it
//!    into its own data dir ([`super::shared`]) and does the same.
//! 3. From the hand-over second on, each signature is made by the key whose window holds the
//!    time it states. Then the files are promoted ([`promote_due`]): the old certificate to
//!    `ca/retired/`, the new one in its place, the old key file destroyed. A start after the
//!    hand-over promotes first.
//!
//! An intermediate's old window ends a leaf's lifetime after the hand-over, not at it: a
//! certificate issued the second before is logged, and so observed, up to ten minutes later.

use std::path::Path;
use std::time::Duration;

use signet_core::{files, pem};

use super::error::RotateError;
use super::{NewKey, Report, Successor};
use super::record::{now_unix, read, read_der, rfc3339, write, Authority, ManifestLock, RecordError, Rotated};
use crate::rotate::record::Next;
use crate::rotate::record::next_files;
use crate::rotate::record::write_cert;

/// How often each instance looks for a scheduled rotation, here and in the database.
pub const LOOK_EVERY: Duration = Duration::from_secs(2);

/// The least time ahead a rotation may be scheduled: every instance must have published
/// the new key (its look, the database's, TUF's) before it signs.
pub const LEAD: Duration = Duration::from_secs(10);

/// Schedules `authority`'s rotation for `from`; see the module's comment. `root_key` is the
/// CA root key, as for [`super::rotate`]. The data dir may be in use.
pub fn schedule(data_dir: &Path, authority: Authority, root_key: &signet_ca::x509::CaKey, new_key: &NewKey, from: jiff::Timestamp) -> Result<Report, RotateError> {
    let from = from.as_second();
    let earliest = now_unix() + LEAD.as_secs() as i64;
    if from < earliest {
        return Err(RotateError::TooSoon { at: rfc3339(from), lead_secs: LEAD.as_secs() });
    }
    let ca = data_dir.join("ca");
    let (cert_file, _) = authority.files();
    let root_der = read_der(&ca.join("root.pem"))?;
    let old_cert = read_der(&ca.join(cert_file))?;
    super::check_root_key(&root_der, root_key)?;
    let _manifest = ManifestLock::take(data_dir)?;
    let mut rotations = read(data_dir)?;
    if let Some(next) = authority.record(&mut rotations).as_ref().and_then(|r| r.next.as_ref()) {
        return Err(RotateError::AlreadyScheduled { authority, from: next.from.clone() });
    }
    let Successor { pkcs8, cert } = super::successor(authority, root_key, &root_der, &old_cert, new_key)?;
    let (cert_name, key_file) = next_files(authority);
    let old_to = super::old_window_end(authority, from);
    let key = match (&pkcs8, new_key) {
        (Some(pkcs8), _) => {
            let path = data_dir.join(&key_file);
            files::write_atomic(&path, pem::encode("PRIVATE KEY", pkcs8).as_bytes(), 0o600).map_err(|source| RecordError::Io { path, source })?;
            key_file
        }
        (None, NewKey::Elsewhere { source, .. }) => source.to_string(),
        (None, NewKey::File) => return Err(RotateError::NoFileKey),
    };
    write_cert(data_dir, &cert_name, &cert)?;
    let instance_start = super::record::instance_valid_from(&root_der)?;
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

/// Promotes every scheduled rotation whose second has come: the old certificate to
/// `ca/retired/` with its window, the new one in its place, its key where the old one was
/// (a file key; the old file is destroyed). Each step can be run again: a promotion cut
/// short finishes at the next call.
pub fn promote_due(data_dir: &Path, now: i64) -> Result<Vec<Authority>, RotateError> {
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

fn promote(data_dir: &Path, authority: Authority, rotated: &mut Rotated, next: &Next) -> Result<(), RotateError> {
    let ca = data_dir.join("ca");
    let (cert_file, key_file) = authority.files();
    let retired_name = format!("retired/{}-{}.pem", authority.name(), next.from_unix()?);
    let retired_path = ca.join(&retired_name);
    // Copied once: a rerun finds the new certificate in ca/<cert_file> already.
    if !retired_path.exists() {
        let old = read_der(&ca.join(cert_file))?;
        files::ensure_private_dir(&ca.join("retired")).map_err(|source| RecordError::Io { path: ca.clone(), source })?;
        files::write_atomic(&retired_path, pem::encode("CERTIFICATE", &old).as_bytes(), 0o600)
            .map_err(|source| RecordError::Io { path: retired_path.clone(), source })?;
    }
    let next_cert = ca.join(&next.cert);
    if next_cert.exists() {
        let new = read_der(&next_cert)?;
        write_cert(data_dir, cert_file, &new)?;
    }
    let key_path = data_dir.join("keys").join(key_file);
    let current_key = match super::record::key_source(data_dir, &next.key)? {
        signet_keys::KeySource::File(from) if from.starts_with(data_dir) => {
            // The new key file takes the old one's place, which destroys it.
            if from.exists() {
                std::fs::rename(&from, &key_path).map_err(|source| RotateError::Move { from: from.clone(), to: key_path.clone(), source })?;
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
    rotated.retired.push(super::record::Retired { cert: retired_name, valid_from: rotated.current_from.clone(), valid_to: next.old_to.clone() });
    rotated.current_from = next.from.clone();
    rotated.key = Some(current_key);
    rotated.next = None;
    let _ = std::fs::remove_file(&next_cert);
    Ok(())
}
/// Records that this instance published `authority`'s scheduled rotation from `from`.
pub(super) fn mark_published(data_dir: &Path, authority: Authority, from: i64) -> Result<(), RotateError> {
    let _manifest = ManifestLock::take(data_dir)?;
    let mut rotations = read(data_dir)?;
    let Some(next) = authority.record(&mut rotations).as_mut().and_then(|r| r.next.as_mut()) else { return Ok(()) };
    if next.from_unix()? != from || next.published.is_some() {
        return Ok(());
    }
    next.published = Some(rfc3339(now_unix()));
    Ok(write(data_dir, &rotations)?)
}

/// At start, before the keys are opened: a rotation another instance of the database
/// scheduled, then every one whose second has come, promoted.
pub fn at_start(store: Option<(&dyn signet_log::storage::Storage, Option<&crate::shards::sealed::SealKey>)>, data_dir: &Path) -> Result<(), RotateError> {
    if !super::record::manifest_path(data_dir).parent().is_some_and(Path::exists) {
        return Ok(());
    }
    if let Some((store, seal)) = store {
        for authority in Authority::ALL {
            super::shared::adopt_shared(store, seal, data_dir, authority)?;
        }
    }
    for authority in promote_due(data_dir, now_unix())? {
        tracing::info!(authority = authority.name(), "a scheduled rotation's time has come: its key signs from now on");
    }
    Ok(())
}

/// The scheduled rotations not yet due, with their first second, for the hand-overs a
/// start sets up before anything signs.
pub fn pending(data_dir: &Path) -> Result<Vec<(Authority, i64)>, RecordError> {
    let mut rotations = read(data_dir)?;
    let mut out = Vec::new();
    for authority in Authority::ALL {
        if let Some(next) = authority.record(&mut rotations).as_ref().and_then(|r| r.next.as_ref()) {
            out.push((authority, next.from_unix()?));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pem_of(what: &[u8]) -> String {
        pem::encode("CERTIFICATE", what)
    }

    /// A data dir with a TSA rotation scheduled for second 100 (file key), as `schedule`
    /// leaves it; certificates are stand-ins, which promotion only moves.
    fn scheduled_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for sub in ["ca/next", "keys"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        std::fs::write(d.join("ca/tsa.pem"), pem_of(b"old certificate")).unwrap();
        std::fs::write(d.join("ca/next/tsa.pem"), pem_of(b"new certificate")).unwrap();
        std::fs::write(d.join("keys/tsa.pem"), "old key").unwrap();
        std::fs::write(d.join("keys/tsa.next.pem"), "new key").unwrap();
        let mut rotated = Rotated::starting("1970-01-01T00:00:10Z".into());
        let next = Next { cert: "next/tsa.pem".into(), key: "keys/tsa.next.pem".into(), from: rfc3339(100), old_to: rfc3339(100), published: None };
        rotated.next = Some(next);
        write(d, &super::super::Rotations { tsa: Some(rotated), intermediate: None }).unwrap();
        dir
    }

    #[test]
    fn a_rotation_is_promoted_at_its_second_and_not_before() {
        let dir = scheduled_dir();
        let d = dir.path();
        assert!(promote_due(d, 99).unwrap().is_empty());
        assert_eq!(read_der(&d.join("ca/tsa.pem")).unwrap(), b"old certificate");
        assert_eq!(promote_due(d, 100).unwrap(), [Authority::Tsa]);
        assert_eq!(read_der(&d.join("ca/tsa.pem")).unwrap(), b"new certificate");
        assert_eq!(read_der(&d.join("ca/retired/tsa-100.pem")).unwrap(), b"old certificate");
        assert_eq!(std::fs::read_to_string(d.join("keys/tsa.pem")).unwrap(), "new key", "the new key file took the old one's place");
        assert!(!d.join("keys/tsa.next.pem").exists() && !d.join("ca/next/tsa.pem").exists());
        let tsa = read(d).unwrap().tsa.unwrap();
        assert!(tsa.next.is_none());
        assert_eq!((tsa.current_from.as_str(), tsa.key.as_deref()), ("1970-01-01T00:01:40Z", Some("keys/tsa.pem")));
        assert_eq!((tsa.retired[0].valid_from.as_str(), tsa.retired[0].valid_to.as_str()), ("1970-01-01T00:00:10Z", "1970-01-01T00:01:40Z"));
        assert!(promote_due(d, 200).unwrap().is_empty(), "promoted once");
    }

    #[test]
    fn a_promotion_cut_short_after_the_certificate_moved_finishes_without_retiring_the_new_one() {
        let dir = scheduled_dir();
        let d = dir.path();
        // Cut short: the old certificate retired, the new one in place and its key moved,
        // but the record not yet written.
        std::fs::create_dir_all(d.join("ca/retired")).unwrap();
        std::fs::write(d.join("ca/retired/tsa-100.pem"), pem_of(b"old certificate")).unwrap();
        std::fs::write(d.join("ca/tsa.pem"), pem_of(b"new certificate")).unwrap();
        std::fs::rename(d.join("keys/tsa.next.pem"), d.join("keys/tsa.pem")).unwrap();
        assert_eq!(promote_due(d, 100).unwrap(), [Authority::Tsa]);
        assert_eq!(read_der(&d.join("ca/retired/tsa-100.pem")).unwrap(), b"old certificate", "the retired copy is the old certificate still");
        assert_eq!(read_der(&d.join("ca/tsa.pem")).unwrap(), b"new certificate");
        assert_eq!(std::fs::read_to_string(d.join("keys/tsa.pem")).unwrap(), "new key");
        let tsa = read(d).unwrap().tsa.unwrap();
        assert!(tsa.next.is_none() && tsa.retired.len() == 1);
    }
}
