//! A scheduled rotation on PostgreSQL: the instance it was scheduled on puts it into the
//! database, once, and every other instance takes it into its own data dir, as if scheduled
//! there ([`super::scheduled`]). A file key travels sealed with `keys/shard-seal.key`, as a
//! log's new key does; a token's or KMS key travels as its URI.

use std::path::Path;

use serde::{Deserialize, Serialize};
use signet_core::{files, hash::sha256, pem};

use super::error::RotateError;
use super::record::{next_files, write_cert, Next};
use super::record::{read, read_der, write, Authority, ManifestLock, RecordError, Rotated};

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
fn number(rotations: &mut super::record::Rotations, authority: Authority) -> usize {
    authority.record(rotations).as_ref().map_or(0, |r| r.retired.len()) + 1
}

/// On shared storage: puts this data dir's scheduled rotation into the database for the
/// other instances, unless it is there already. Another rotation under the same number
/// (scheduled through another instance) is refused.
pub fn offer_shared(store: &dyn signet_log::storage::Storage, seal: Option<&crate::shards::sealed::SealKey>, data_dir: &Path, authority: Authority) -> Result<(), RotateError> {
    let mut rotations = read(data_dir)?;
    let n = number(&mut rotations, authority);
    let Some(next) = authority.record(&mut rotations).as_ref().and_then(|r| r.next.clone()) else { return Ok(()) };
    let name = shared_name(authority, n);
    let cert = read_der(&data_dir.join("ca").join(&next.cert))?;
    let current = read_der(&data_dir.join("ca").join(authority.files().0))?;
    let key = match super::record::key_source(data_dir, &next.key)? {
        signet_keys::KeySource::File(path) => {
            let seal = seal.ok_or(RotateError::CannotHand)?;
            let block = std::fs::read(&path).map_err(|source| RecordError::Io { path: path.clone(), source })?;
            let pkcs8 = pem::decode_first(&block).map_err(|source| RecordError::Pem { path, source })?.der;
            let sealed = seal.seal(&name, &pkcs8)?;
            SharedKey::Sealed(serde_json::from_slice(&sealed).map_err(RecordError::Encode)?)
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
    let bytes = serde_json::to_vec(&ours).map_err(RecordError::Encode)?;
    let stored = store.get_or_init_meta(&name, &bytes)?;
    let theirs: Shared = serde_json::from_slice(&stored).map_err(|source| RotateError::StoredJson { name, source })?;
    // A seal is randomised: the same rotation offered twice differs only there.
    if theirs.cert != ours.cert || theirs.from != ours.from {
        return Err(RotateError::OtherScheduled { number: n, authority, theirs: theirs.from, ours: ours.from });
    }
    Ok(())
}

/// On shared storage: takes a rotation another instance scheduled into this data dir, as
/// if scheduled here. True if it took one.
pub fn adopt_shared(store: &dyn signet_log::storage::Storage, seal: Option<&crate::shards::sealed::SealKey>, data_dir: &Path, authority: Authority) -> Result<bool, RotateError> {
    let _manifest = ManifestLock::take(data_dir)?;
    let mut rotations = read(data_dir)?;
    if authority.record(&mut rotations).as_ref().is_some_and(|r| r.next.is_some()) {
        return Ok(false);
    }
    let n = number(&mut rotations, authority);
    let name = shared_name(authority, n);
    let Some(bytes) = store.meta(&name)? else { return Ok(false) };
    let shared: Shared = serde_json::from_slice(&bytes).map_err(|source| RotateError::StoredJson { name: name.clone(), source })?;
    let (cert_file, _) = authority.files();
    let current = read_der(&data_dir.join("ca").join(cert_file))?;
    if shared.follows != hex::encode(sha256(&current)) {
        return Err(RotateError::MissedRotation { number: n, authority });
    }
    let cert = pem::decode_first(shared.cert.as_bytes()).map_err(|source| RotateError::StoredPem { name: name.clone(), source })?.der;
    let (cert_name, key_file) = next_files(authority);
    let key = match shared.key {
        SharedKey::Uri(uri) => uri,
        SharedKey::Sealed(record) => {
            let seal = seal.ok_or(RotateError::SealedWithoutSealKey { authority })?;
            let pkcs8 = seal.open(&name, record.to_string().as_bytes())?;
            let path = data_dir.join(&key_file);
            files::write_atomic(&path, pem::encode("PRIVATE KEY", &pkcs8).as_bytes(), 0o600).map_err(|source| RecordError::Io { path, source })?;
            key_file
        }
    };
    write_cert(data_dir, &cert_name, &cert)?;
    let root_der = read_der(&data_dir.join("ca").join("root.pem"))?;
    let instance_start = super::record::instance_valid_from(&root_der)?;
    let rotated = authority.record(&mut rotations).get_or_insert_with(|| Rotated::starting(instance_start));
    rotated.next = Some(Next { cert: cert_name, key, from: shared.from, old_to: shared.old_to, published: None });
    write(data_dir, &rotations)?;
    Ok(true)
}
