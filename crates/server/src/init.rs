//! `signet init`: the keys, certificates and config of a production instance.
//!
//! `serve --dev` makes whatever is missing as it starts, which is what a laptop wants and
//! what production must not do: a key made silently, online, by a server that merely
//! restarted on an empty volume, is a new identity nobody decided on. So production keys are
//! made here, once, on purpose; `serve` without `--dev` refuses to start without them.
//!
//! The root CA key can be written outside the data dir (`--root-key-out`), or made on a
//! token or in a KMS that the config does not name (`--root-key pkcs11:…|awskms:…`), to be
//! kept offline: it signs the intermediate and the TSA certificate here and is not needed
//! again until they are renewed. Only the intermediate (which signs leaves), the TSA key and
//! the log keys stay online, in files, on a token or in KMS (`--keys pkcs11:…|awskms:///`).

use std::path::{Path, PathBuf};

use signet_core::files;
use signet_ca::authority::CaKeys;
use signet_ca::x509::CaCurve;
use signet_keys::{Algorithm, KeyHome, KeySource, Pkcs11Settings, Signer};

use crate::shards::Kind;
use crate::error::StartError;
use crate::layout::{made_by_init, LOG_KEYS, PRODUCTION_FILES};

pub struct InitOptions {
    pub data_dir: PathBuf,
    /// The URL clients will reach the instance at; its host names the logs.
    pub public_url: String,
    /// Where to write the root CA key instead of `<data dir>/keys/ca-root.pem`.
    pub root_key_out: Option<PathBuf>,
    pub intermediate_curve: Option<signet_ca::x509::CaCurve>,
    /// A token or KMS to keep the online keys in ([`TOKEN_KEYS`]), made there unless it holds
    /// them already; only their certificates and public keys reach the data dir.
    pub token: Option<KeyHome>,
    /// Where the root CA key is made (unless there already): on a token, in KMS, or a file
    /// apart. The config does not name it, so it can be kept offline.
    pub root_token: Option<KeySource>,
    /// The module and PIN for `token` where its URI gives none.
    pub pkcs11: Pkcs11Settings,
    /// Where to write the config instead of `<data dir>/signet.toml` (a package's
    /// `/etc/signet/signet.toml`); never over an existing file.
    pub config_out: Option<PathBuf>,
}

/// The keys `--keys` keeps on a token or in KMS: (config key, object label or KMS alias, the
/// file it replaces, its algorithm; the intermediate's is `--intermediate-key`'s curve).
pub const TOKEN_KEYS: [(&str, &str, &str, Algorithm); 8] = [
    ("rekor_v1", "signet-rekor-v1", "keys/rekor-v1.pem", Algorithm::EcdsaP256Sha256),
    ("rekor_v2", "signet-rekor-v2", "keys/rekor-v2.pem", Algorithm::EcdsaP256Sha256),
    ("ct", "signet-ct", "keys/ct.pem", Algorithm::EcdsaP256Sha256),
    ("tsa", "signet-tsa", "keys/tsa.pem", Algorithm::EcdsaP256Sha256),
    ("ca_intermediate", "signet-ca-intermediate", "keys/ca-intermediate.pem", Algorithm::EcdsaP256Sha256),
    ("audit", "signet-audit", "keys/audit.pem", Algorithm::EcdsaP256Sha256),
    // The online TUF roles, re-signed before they expire. KMS makes no Ed25519 keys here.
    ("tuf_snapshot", "signet-tuf-snapshot", "keys/tuf-snapshot.pem", Algorithm::Ed25519),
    ("tuf_timestamp", "signet-tuf-timestamp", "keys/tuf-timestamp.pem", Algorithm::Ed25519),
];

/// The keys of [`TOKEN_KEYS`] that `home` holds.
pub fn token_keys(home: &KeyHome) -> impl Iterator<Item = (&'static str, &'static str, &'static str, Algorithm)> + '_ {
    TOKEN_KEYS.into_iter().filter(move |(_, _, _, alg)| home.is_token() || *alg != Algorithm::Ed25519)
}

/// The root CA key's name (an object on a token, an alias in KMS) where `--root-key` names none.
pub const ROOT_OBJECT: &str = "signet-ca-root";

/// What `init` made, for the command to print.
pub struct Initialised {
    pub config: PathBuf,
    /// Where the root CA key is: a file, or a token's object.
    pub root_key: KeySource,
    /// Where the TUF root key is: a file (to move offline), or the root token's object.
    pub tuf_root: KeySource,
    pub files: Vec<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error("{data_dir} already holds {existing}; init never overwrites keys (move the data dir aside to start over)")]
    Exists { data_dir: String, existing: String },
    #[error("{path} already exists; init never overwrites a key")]
    RootKeyExists { path: String },
    #[error("--root-key-out writes a root key file; a root key on a token (--root-key pkcs11:…) stays there: give one of them")]
    RootTwice,
    #[error("{path} already exists; init never overwrites a config (move it aside, or give another --config-out)")]
    ConfigExists { path: String },
    #[error(transparent)]
    Start(#[from] StartError),
}

pub fn init(opts: &InitOptions) -> Result<Initialised, InitError> {
    let dir = &opts.data_dir;
    let existing = made_by_init(dir);
    if !existing.is_empty() {
        return Err(InitError::Exists { data_dir: dir.display().to_string(), existing: existing.join(", ") });
    }
    if let Some(out) = opts.config_out.as_ref().filter(|p| p.exists()) {
        return Err(InitError::ConfigExists { path: out.display().to_string() });
    }
    if opts.root_key_out.is_some() && opts.root_token.is_some() {
        return Err(InitError::RootTwice);
    }
    if let Some(out) = opts.root_key_out.as_ref().filter(|p| p.exists()) {
        return Err(InitError::RootKeyExists { path: out.display().to_string() });
    }
    // Check the URL before anything is written.
    let cfg = crate::Config { data_dir: dir.clone(), public_url: Some(opts.public_url.clone()), ..Default::default() };
    cfg.hostname().map_err(StartError::from)?;
    // SAFETY: umask only changes this process's file-creation mask.
    unsafe { libc::umask(0o077) };
    let data_dir_err = |source| StartError::DataDir { path: dir.display().to_string(), source };
    files::ensure_private_dir(&dir.join("keys")).map_err(data_dir_err)?;

    // Keys on a token first: a wrong PIN or a missing module fails before any file is written.
    let intermediate_curve = opts.intermediate_curve.unwrap_or(CaCurve::P256);
    let mut on_token: Vec<(&str, KeySource)> = Vec::new();
    if let Some(home) = &opts.token {
        for (name, label, _, algorithm) in token_keys(home) {
            let key = home.key(label);
            let algorithm = if name == "ca_intermediate" { intermediate_curve.algorithm() } else { algorithm };
            signet_keys::home::ensure(&key, &opts.pkcs11, algorithm).map_err(StartError::from)?;
            on_token.push((name, key));
        }
    }
    let root_uri = opts.root_token.clone();
    if let Some(root) = &root_uri {
        signet_keys::home::ensure(root, &opts.pkcs11, Algorithm::EcdsaP384Sha384).map_err(StartError::from)?;
    }
    let token_key = |file: &str| {
        let (name, _, _, _) = TOKEN_KEYS.iter().find(|(_, _, f, _)| *f == file)?;
        on_token.iter().find(|(n, _)| n == name).map(|(_, key)| key.clone())
    };
    for (k, kind) in LOG_KEYS.into_iter().zip([Kind::RekorV1, Kind::RekorV2, Kind::Ct]) {
        let key = match token_key(k) {
            Some(key) => Signer::open(&key, &opts.pkcs11, &[Algorithm::EcdsaP256Sha256], false),
            None => Signer::load_or_generate(&dir.join(k), Algorithm::EcdsaP256Sha256),
        }
        .map_err(StartError::from)?;
        crate::shards::keep_zero_public(kind, dir, &key).map_err(StartError::Shards)?;
    }
    // Made with the first data dir so that the copies `signet backup` makes share it.
    crate::shards::sealed::SealKey::load_or_make(dir).map_err(|e| StartError::Shards(e.into()))?;
    let ca_keys = CaKeys {
        intermediate_curve: opts.intermediate_curve,
        intermediate: token_key("keys/ca-intermediate.pem"),
        root: root_uri.clone(),
        pkcs11: opts.pkcs11.clone(),
    };
    let authority = signet_ca::authority::Authority::open(dir, &ca_keys).map_err(StartError::from)?;
    let root_in_dir = dir.join("keys").join("ca-root.pem");
    let tsa_key = match token_key("keys/tsa.pem") {
        Some(key) => Signer::open(&key, &opts.pkcs11, &[Algorithm::EcdsaP256Sha256], false),
        None => Signer::load_or_generate(&dir.join("keys/tsa.pem"), Algorithm::EcdsaP256Sha256),
    }
    .map_err(StartError::from)?;
    signet_ca::tsa::Tsa::open(dir, std::sync::Arc::new(tsa_key), || ca_keys.root_key(dir), authority.root_der()).map_err(StartError::from)?;

    let tuf_root = make_tuf_repository(opts, &cfg, &token_key, root_uri.as_ref())?;

    let root_key = match &opts.root_key_out {
        None => ca_keys.root_source(dir),
        Some(out) => {
            let pem = std::fs::read(&root_in_dir).map_err(|source| StartError::Io { what: format!("reading {}", root_in_dir.display()), source })?;
            files::write_atomic(out, &pem, 0o600).map_err(|source| StartError::Io { what: format!("writing {}", out.display()), source })?;
            // Only once the copy is durable does the online one go.
            std::fs::remove_file(&root_in_dir).map_err(|source| StartError::Io { what: format!("removing {}", root_in_dir.display()), source })?;
            KeySource::File(out.clone())
        }
    };
    let config = opts.config_out.clone().unwrap_or_else(|| dir.join("signet.toml"));
    let module = opts.token.as_ref().filter(|h| h.is_token()).and(opts.pkcs11.module.as_deref());
    let keys = keys_table(&on_token, module);
    files::write_atomic(&config, config_text(dir, &config, &opts.public_url, &keys).as_bytes(), 0o600)
        .map_err(|source| StartError::Io { what: format!("writing {}", config.display()), source })?;
    let on_disk = |f: &&&str| token_key(f).is_none();
    let mut made: Vec<PathBuf> = LOG_KEYS.iter().chain(PRODUCTION_FILES.iter()).filter(on_disk).map(|f| dir.join(f)).collect();
    made.sort();
    made.dedup();
    Ok(Initialised { config, root_key, tuf_root, files: made })
}

/// The TUF repository, made here rather than at the first `serve`, so that its root key is
/// never online: on the CA root's token when it has one (objects `signet-tuf-root` and
/// `signet-tuf-targets`), else files in the data dir that `init` tells the operator to move
/// off the machine. The snapshot and timestamp keys are the online token's, or files. Returns
/// where the TUF root key is.
fn make_tuf_repository(
    opts: &InitOptions,
    cfg: &crate::Config,
    token_key: &dyn Fn(&str) -> Option<KeySource>,
    root: Option<&KeySource>,
) -> Result<KeySource, InitError> {
    use signet_trust::tuf::{keys::KeyPlaces, Repository, Role};
    let dir = &opts.data_dir;
    let url_file = crate::trust::public_url_file(dir);
    files::write_atomic(&url_file, cfg.public_url().as_bytes(), 0o644)
        .map_err(|source| StartError::Io { what: format!("writing {}", url_file.display()), source })?;
    let instance = crate::trust::instance(dir, None).map_err(StartError::Trust)?;
    let mut configured: Vec<(Role, KeySource)> = [(Role::Snapshot, "keys/tuf-snapshot.pem"), (Role::Timestamp, "keys/tuf-timestamp.pem")]
        .into_iter()
        .filter_map(|(role, file)| token_key(file).map(|k| (role, k)))
        .collect();
    // Ed25519 on the root's token; a KMS root has none, so the TUF root is then a file.
    if let Some(KeySource::Pkcs11(uri)) = root {
        let home = KeyHome::Token(signet_keys::Pkcs11Uri { object: None, id: None, ..uri.clone() });
        for (role, name) in [(Role::Root, "signet-tuf-root"), (Role::Targets, "signet-tuf-targets")] {
            let key = home.key(name);
            signet_keys::home::ensure(&key, &opts.pkcs11, Algorithm::Ed25519).map_err(StartError::from)?;
            configured.push((role, key));
        }
    }
    let tuf_root = configured.iter().find(|(r, _)| *r == Role::Root).map(|(_, k)| k.clone());
    let places = KeyPlaces::new(dir.join("keys"), configured, opts.pkcs11.clone());
    let keys = places.generate_missing().map_err(StartError::from)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|source| StartError::Io { what: "starting a runtime".into(), source })?;
    let repo = Repository::at(crate::tuf::repo_dir(dir));
    runtime
        .block_on(repo.create(&keys, &cfg.tuf.expiry(), &crate::tuf::documents(&instance), jiff::Timestamp::now()))
        .map_err(StartError::from)?;
    Ok(tuf_root.unwrap_or_else(|| KeySource::File(signet_trust::tuf::RoleKeys::path(&dir.join("keys"), Role::Root))))
}

/// The config's `[keys]` table: the keys on a token or in KMS, by URI, or the defaults
/// commented out.
fn keys_table(on_token: &[(&str, KeySource)], module: Option<&Path>) -> String {
    if on_token.is_empty() {
        return "# rekor_v1 = \"pkcs11:token=…;object=…\"   # each key a file (default: under keys/) or on a token\n".into();
    }
    let mut table: String = on_token.iter().map(|(name, uri)| format!("{name} = {}\n", toml_string(&uri.to_string()))).collect();
    if let Some(m) = module {
        table.push_str(&format!("pkcs11_module = {}\n", toml_string(&m.display().to_string())));
        table.push_str("# The token's PIN is not written here: give it as SIGNET_KEYS_PKCS11_PIN.\n");
    }
    table
}

/// A production config: every section, its defaults commented out, no dev issuer.
fn config_text(data_dir: &Path, config: &Path, public_url: &str, keys: &str) -> String {
    let data_dir = data_dir.canonicalize().unwrap_or_else(|_| data_dir.to_path_buf());
    let quote = |s: &str| toml_string(s);
    format!(
        r#"# signet configuration, written by `signet init`. Start with:
#   signet serve --config {config}
# Every key can also be set by a SIGNET_* environment variable (`signet config env` lists
# them) or a flag; see docs/configuration.md.

# Where keys and the embedded database live.
data_dir = {data_dir}
# The URL clients reach this instance at. Its host names the logs: changing it later
# changes the logs' origins, which clients pin.
public_url = {public_url}
# The address to bind. Behind a TLS-terminating proxy, keep it on loopback.
listen = "127.0.0.1:8080"

# The identity providers whose tokens the CA accepts. There is no dev issuer here: list
# yours. `type` is Fulcio's issuer type: email, uri, spiffe, username, kubernetes,
# chainguard-identity, ci-provider, or a CI provider's name (see docs/ca.md).
# [[oidc.issuers]]
# url = "https://accounts.example.com"
# audience = "sigstore"
# type = "email"

[keys]
{keys}

[log]
# batch_max_entries = 256
# batch_max_delay_ms = 10

[limits]
# max_body_bytes = 131072
# max_entry_bytes = 32768
# max_small_body_bytes = 65536
# max_header_count = 64
# max_header_bytes = 16384
# max_json_depth = 32
# max_attestation_bytes = 102400

[http]
# header_read_timeout_secs = 10
# idle_timeout_secs = 60
# max_connections = 10000
# shutdown_grace_secs = 10
# access_log = false
# /metrics and the admin API (signet admin --url) are not on the public port: give them
# one of their own (on loopback, or behind your own access control).
# metrics_listen = "127.0.0.1:9464"
# admin_listen = "127.0.0.1:9464"

# HTTPS: a certificate chain and its key (re-read when they change).
[tls]
# cert = "/etc/signet/tls/fullchain.pem"
# key = "/etc/signet/tls/key.pem"
# backend = "rustls"

# Rate limits, bans, API tokens and the audit log: docs/guard.md.
[guard.rate_limit]
# enabled = true
[guard.audit]
# enabled = true
"#,
        config = config.display(),
        data_dir = quote(&data_dir.display().to_string()),
        public_url = quote(public_url),
        keys = keys.trim_end(),
    )
}

/// A TOML basic string.
fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_written_config_loads_and_names_the_instance() {
        let dir = tempfile::tempdir().unwrap();
        let text = config_text(dir.path(), &dir.path().join("signet.toml"), "https://signet.example.com", &keys_table(&[], None));
        let path = dir.path().join("c.toml");
        std::fs::write(&path, text).unwrap();
        let cfg = crate::Config::load(Some(&path)).unwrap();
        assert_eq!(cfg.public_url.as_deref(), Some("https://signet.example.com"));
        assert!(!cfg.dev);
        assert!(cfg.oidc.issuers.is_empty());
        assert_eq!(toml_string("a\"b\\c"), r#""a\"b\\c""#);
    }
}
