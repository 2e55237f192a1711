//! Which keys a log's checkpoints must be signed by: the log's entries in a trusted root
//! (`signet trust export`, or Sigstore's), and keys given per log on the command line.
//! A log the monitor holds no key for is refused up front: following a log whose
//! signatures cannot be checked would prove nothing.

use signet_core::note::{Checkpoint, NoteError, SignedNote};
use signet_core::pubkey::PublicKey;
use signet_verify::trust_root::TrustedRoot;

/// The trusted root's keys for the log at `url`: those of every tlog whose `baseUrl` is
/// `url` or a prefix of it at a path boundary (signet's v2 tiles sit under
/// `<baseUrl>/api/v2`). A log has several when its keys were rotated (shards).
pub fn from_trusted_root(root: &TrustedRoot, url: &str) -> Vec<PublicKey> {
    let url = url.trim_end_matches('/');
    root.tlogs
        .iter()
        .filter(|l| {
            let base = l.base_url.trim_end_matches('/');
            !base.is_empty() && url.strip_prefix(base).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
        .filter_map(|l| l.key.as_ref().ok().cloned())
        .collect()
}

/// A PEM public key (SubjectPublicKeyInfo) from a file.
pub fn from_pem_file(path: &std::path::Path) -> Result<PublicKey, String> {
    let text = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let block = signet_core::pem::decode_first(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    if block.label != "PUBLIC KEY" {
        return Err(format!("{}: PEM {:?}; expected PUBLIC KEY", path.display(), block.label));
    }
    PublicKey::from_spki(&block.der).map_err(|e| format!("{}: {e}", path.display()))
}

/// The name a log signs its checkpoints under: the origin, without Rekor v1's
/// " - <tree ID>" suffix.
fn signer_name(origin: &str) -> &str {
    match origin.split_once(" - ") {
        Some((name, tree)) if !tree.is_empty() && tree.bytes().all(|c| c.is_ascii_digit()) => name,
        _ => origin,
    }
}

/// Verifies `note` with any of `keys`; the checkpoint it holds and the key that signed it,
/// or why it is not trusted.
pub fn verify<'k>(note: &str, keys: &'k [PublicKey]) -> Result<(Checkpoint, &'k PublicKey), String> {
    let parsed = SignedNote::parse(note).map_err(|e| e.to_string())?;
    let name = signer_name(&parsed.checkpoint.origin);
    let mut bad = false;
    for key in keys {
        match parsed.verify(name, key) {
            Ok(cp) => return Ok((cp.clone(), key)),
            Err(NoteError::BadSignature) => bad = true,
            Err(_) => {}
        }
    }
    Err(match bad {
        true => format!("the signature line of {name:?} by a trusted key does not verify"),
        false => format!("no signature line under {name:?} by any of the {} trusted key(s) for this log", keys.len()),
    })
}
