//! The trust documents a TUF repository serves as targets, read from `signet trust export`'s
//! directory.

use std::path::Path;

use signet_trust::tuf::{SIGNING_CONFIG_TARGET, TRUSTED_ROOT_TARGET};

/// The documents in `trust`, checked to be what their target names say.
pub(super) fn documents(trust: &Path) -> Result<Vec<(&'static str, Vec<u8>)>, String> {
    let mut out = Vec::new();
    for (file, target, media_type) in [
        ("trusted_root.json", TRUSTED_ROOT_TARGET, signet_trust::root::TRUSTED_ROOT_MEDIA_TYPE),
        ("signing_config.json", SIGNING_CONFIG_TARGET, signet_trust::root::SIGNING_CONFIG_MEDIA_TYPE),
    ] {
        let path = trust.join(file);
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e} (write it with `signet trust export`)", path.display()))?;
        let doc: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
        if doc["mediaType"] != media_type {
            return Err(format!("{}: mediaType {} where {media_type:?} was expected", path.display(), doc["mediaType"]));
        }
        out.push((target, bytes));
    }
    Ok(out)
}
