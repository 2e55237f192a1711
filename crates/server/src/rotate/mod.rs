//! Rotating an authority's key (`signet trust rotate --tsa | --intermediate`): offline, the
//! server stopped, or scheduled on a running cluster (`--at`):
//!
//! - [`record`]: what a rotation leaves on disk (`ca/rotations.json`), and its times;
//! - [`scheduled`]: a rotation made ahead, published at once, promoted after its second;
//! - [`shared`]: on PostgreSQL, handed to every instance through the database;
//! - [`watch`]: each running instance's part: publish, load, hand over, promote.
//!
//! A rotation makes a new key and a certificate for it from the CA root, and keeps the old
//! certificate in `ca/retired/` with the end of its window, recorded in `ca/rotations.json`.
//! The old key is destroyed when it is a file: kept, it could still sign timestamps or
//! certificates dated inside its old window (one on a token or in KMS is the operator's to
//! destroy there). The new key is a file in the data dir, or made on a token or in KMS
//! ([`NewKey::Elsewhere`]); the root may be either too.
//! The trust documents then list both: the old one for what it signed before the rotation,
//! the new one from then on. At its next start the server publishes them through TUF, so
//! clients that update from it verify bundles from either side of the rotation.

pub mod error;
pub mod record;
pub mod scheduled;
pub mod shared;
pub mod watch;

pub use error::{CurveError, RotateError};
pub use record::{instance_valid_from, manifest_path, read, Authority, Next, RecordError, Retired, Rotated, Rotations};

use std::path::Path;

use serde::Serialize;
use signet_core::{files, pem};

use record::{now_unix, read_der, rfc3339, write, ManifestLock};

/// Where a rotation's new key goes.
pub enum NewKey<'a> {
    /// A new PKCS#8 file in the data dir, in place of the old one.
    File,
    /// On a token or in KMS, made there unless `source` names a key already: only its
    /// certificate is written. The config's `[keys]` entry must then name it.
    Elsewhere { source: &'a signet_keys::KeySource, pkcs11: &'a signet_keys::Pkcs11Settings },
}

/// What a rotation did, as `signet trust rotate` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub authority: &'static str,
    /// Where the new key is: its file, or its URI.
    pub new_key: String,
    pub retired_cert: String,
    pub retired_window: (String, String),
    pub new_cert: String,
    pub new_from: String,
}

/// Where the retired key's window ends when its successor starts at `from`: there for a
/// TSA; a leaf's lifetime later for an intermediate, whose last certificates are logged,
/// and observed, up to then.
fn old_window_end(authority: Authority, from: i64) -> i64 {
    match authority {
        Authority::Tsa => from,
        Authority::Intermediate => from + signet_ca::authority::LEAF_VALIDITY.as_secs() as i64,
    }
}

/// Rotates `authority`'s key. `root_key` is the CA root key (kept offline after `signet
/// init`: a file, or on a token); it must be the key of `ca/root.pem`. The data dir must not
/// be in use.
pub fn rotate(data_dir: &Path, authority: Authority, root_key: &signet_ca::x509::CaKey, new_key: NewKey) -> Result<Report, RotateError> {
    let _lock = crate::datadir::DataDirLock::acquire(data_dir).map_err(RotateError::InUse)?;
    let _manifest = ManifestLock::take(data_dir)?;
    let ca = data_dir.join("ca");
    let (cert_file, key_file) = authority.files();
    let (cert_path, key_path) = (ca.join(cert_file), data_dir.join("keys").join(key_file));
    let root_der = read_der(&ca.join("root.pem"))?;
    let old_cert = read_der(&cert_path)?;
    check_root_key(&root_der, root_key)?;

    let mut rotations = read(data_dir)?;
    if let Some(next) = authority.record(&mut rotations).as_ref().and_then(|r| r.next.as_ref()) {
        return Err(RotateError::Scheduled { authority, from: next.from.clone() });
    }
    let instance_start = record::instance_valid_from(&root_der)?;
    let stamp = now_unix();
    let now = rfc3339(stamp);
    let old_from = authority.record(&mut rotations).as_ref().map_or(instance_start, |r| r.current_from.clone());

    let Successor { pkcs8, cert: new_cert } = successor(authority, root_key, &root_der, &old_cert, &new_key)?;
    let shown = match &new_key {
        NewKey::File => key_path.display().to_string(),
        NewKey::Elsewhere { source, .. } => source.to_string(),
    };

    // Then, each step atomic: the retired copy, the record of it, the new certificate and key.
    let retired_name = format!("retired/{}-{stamp}.pem", authority.name());
    let retired_path = ca.join(&retired_name);
    files::ensure_private_dir(&ca.join("retired")).map_err(|source| RecordError::Io { path: ca.clone(), source })?;
    files::write_atomic(&retired_path, pem::encode("CERTIFICATE", &old_cert).as_bytes(), 0o600)
        .map_err(|source| RecordError::Io { path: retired_path.clone(), source })?;
    // A certificate issued just before the server stopped is logged after it starts again.
    let old_to = rfc3339(old_window_end(authority, stamp));
    let rotated = authority.record(&mut rotations).get_or_insert_with(|| Rotated::starting(old_from.clone()));
    rotated.retired.push(Retired { cert: retired_name.clone(), valid_from: old_from.clone(), valid_to: old_to.clone() });
    rotated.current_from = now.clone();
    rotated.key = Some(match &new_key {
        NewKey::File => format!("keys/{key_file}"),
        NewKey::Elsewhere { source, .. } => source.to_string(),
    });
    write(data_dir, &rotations)?;
    files::write_atomic(&cert_path, pem::encode("CERTIFICATE", &new_cert).as_bytes(), 0o600).map_err(|source| RecordError::Io { path: cert_path.clone(), source })?;
    match pkcs8 {
        Some(pkcs8) => files::write_atomic(&key_path, pem::encode("PRIVATE KEY", &pkcs8).as_bytes(), 0o600)
            .map_err(|source| RecordError::Io { path: key_path.clone(), source })?,
        // Onto a token or into KMS: the old key file, if it was one, could still sign.
        None => destroy(&key_path)?,
    }
    Ok(Report {
        authority: authority.name(),
        new_key: shown,
        retired_cert: format!("ca/{retired_name}"),
        retired_window: (old_from, old_to),
        new_cert: format!("ca/{cert_file}"),
        new_from: now,
    })
}

/// A rotation's new key and its certificate.
struct Successor {
    /// The key, when it is a file's (else it is on a token or in KMS).
    pkcs8: Option<Vec<u8>>,
    cert: Vec<u8>,
}

/// Makes the new key (in memory, or on its token: nothing changes on disk if making it
/// fails) and its certificate from the root. An intermediate keeps its curve, so that
/// `ca.intermediate_key` stays true.
fn successor(authority: Authority, root_key: &signet_ca::x509::CaKey, root_der: &[u8], old_cert: &[u8], new_key: &NewKey) -> Result<Successor, RotateError> {
    let algorithm = match authority {
        Authority::Tsa => signet_keys::Algorithm::EcdsaP256Sha256,
        Authority::Intermediate => curve_of(old_cert).map_err(|source| RotateError::Curve { file: authority.files().0, source })?.algorithm(),
    };
    let (pkcs8, signer) = match new_key {
        NewKey::File => {
            let pkcs8 = signet_keys::file::generate_pkcs8(algorithm).map_err(|error| RotateError::Generate { authority, error })?;
            let signer = signet_keys::Signer::from_pkcs8(&pkcs8, "the new key", &[algorithm])?;
            (Some(pkcs8), signer)
        }
        NewKey::Elsewhere { source, pkcs11 } => {
            signet_keys::home::ensure(source, pkcs11, algorithm)?;
            (None, signet_keys::Signer::open(source, pkcs11, &[algorithm], false)?)
        }
    };
    let cert = match authority {
        Authority::Tsa => signet_ca::tsa::Tsa::issue_certificate(root_key, root_der, signer.spki_der())?,
        Authority::Intermediate => {
            let new_key = signet_ca::x509::CaKey::new(signer)?;
            signet_ca::authority::issue_intermediate(root_key, root_der, &new_key)?
        }
    };
    Ok(Successor { pkcs8, cert })
}

/// Removes a retired key file, if there is one.
fn destroy(path: &Path) -> Result<(), RotateError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(RotateError::Destroy { path: path.to_path_buf(), source }),
    }
}

/// The key given must be the root certificate's, or what it issues would not chain.
fn check_root_key(root_der: &[u8], root_key: &signet_ca::x509::CaKey) -> Result<(), RotateError> {
    let root_cert = <x509_cert::Certificate as der::Decode>::from_der(root_der).map_err(RecordError::Root)?;
    let root_spki = root_cert.tbs_certificate.subject_public_key_info.subject_public_key.raw_bytes().to_vec();
    if root_key.curve() != signet_ca::x509::CaCurve::P384 {
        return Err(RotateError::RootCurve);
    }
    if root_key.spki().subject_public_key.raw_bytes() != root_spki {
        return Err(RotateError::NotTheRoot);
    }
    Ok(())
}

/// The curve of the key a CA certificate certifies.
fn curve_of(cert_der: &[u8]) -> Result<signet_ca::x509::CaCurve, CurveError> {
    let cert = <x509_cert::Certificate as der::Decode>::from_der(cert_der)?;
    let spki = der::Encode::to_der(&cert.tbs_certificate.subject_public_key_info)?;
    use signet_core::pubkey::{KeyKind, PublicKey};
    match PublicKey::from_spki(&spki)?.kind {
        KeyKind::EcdsaP384 => Ok(signet_ca::x509::CaCurve::P384),
        KeyKind::EcdsaP256 => Ok(signet_ca::x509::CaCurve::P256),
        other => Err(CurveError::Unsupported(other)),
    }
}
