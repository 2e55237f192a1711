//! What an instance keeps in its data dir: the files `signet init` makes, which of them a
//! production start needs, and what to say when one is missing.

use std::path::Path;

pub const LOG_KEYS: [&str; 3] = ["keys/rekor-v1.pem", "keys/rekor-v2.pem", "keys/ct.pem"];

/// What a production instance needs on disk, made by `signet init` (under `--dev`, `serve`
/// makes whatever is missing). Keys configured elsewhere (`keys.*`, a file or a token) are
/// checked by [`key`] instead; the root CA key may be offline.
pub const PRODUCTION_FILES: [&str; 6] =
    ["keys/ct.pem", "keys/ca-intermediate.pem", "keys/tsa.pem", "ca/root.pem", "ca/intermediate.pem", "ca/tsa.pem"];

/// The files `init` makes that `dir` already holds: `init` refuses such a dir.
pub fn made_by_init(dir: &Path) -> Vec<&'static str> {
    LOG_KEYS
        .iter()
        .chain(PRODUCTION_FILES.iter())
        .chain(["keys/ca-root.pem", "signet.toml"].iter())
        .copied()
        .filter(|f| dir.join(f).exists())
        .collect()
}

/// What to do about a missing key or certificate: `signet init` for an empty data dir, but
/// not for one that already holds an instance's keys, which init refuses to touch.
pub fn init_hint(data_dir: &std::path::Path) -> String {
    let shown = data_dir.display();
    let made = made_by_init(data_dir);
    if made.is_empty() {
        format!("create this instance's keys and certificates with `signet init --data-dir {shown}` (or start with --dev for a development instance), or point keys.* in the config at PEM files")
    } else {
        format!(
            "{shown} already holds an instance made by `signet init` ({}), which init never overwrites: restore what is missing from this instance's backup, or point keys.* in the config at where it is",
            made.join(", ")
        )
    }
}
