//! `signet tuf status`: where the instance's TUF repository stands: each role's version,
//! expiry, and whether its key is here or kept offline.
//! `signet tuf sign`: signs new targets from `signet trust export`'s documents, on a copy of
//! the repository, wherever the targets key is kept. With the snapshot and timestamp keys as
//! well, it signs those too; without them, the copy's new `N.targets.json` and `targets/` are
//! carried back into `<data dir>/tuf`, and the server signs a snapshot and timestamp for
//! them (it checks their signature against the root first).
//!
//! `signet tuf rotate --role R`: replaces a role's key, the server stopped; see
//! [`rotate`].
//!
//! `signet tuf pubkey`, `propose`, `sign --key` and `publish`: the root and targets signed
//! k of n in an offline ceremony; see [`ceremony`].
//!
//! Exit 0 on success; 1 when something is expired (status) or signing fails; 2 on a bad
//! command line or input.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use signet_trust::tuf::{Expiry, Published, Repository, Role, RoleKeys};

mod ceremony;
mod documents;

use documents::documents;

#[derive(clap::Subcommand)]
pub enum Tuf {
    /// Each role's version and expiry, the targets, and which keys are here.
    Status {
        /// The instance's data dir (its repository is `tuf/`, its keys `keys/tuf-*.pem`).
        #[arg(long, default_value = "signet-data")]
        data_dir: PathBuf,
    },
    /// With --key: add one signature to each proposed root or targets file (a ceremony).
    /// With --repo, --keys and --trust: sign new targets holding the documents in --trust
    /// (from `signet trust export`) with one targets key.
    Sign {
        /// The key to sign proposals with: a PKCS#8 file, pkcs11:… or awskms:….
        #[arg(long, conflicts_with_all = ["repo", "keys", "trust"], requires = "files")]
        key: Option<String>,
        /// The proposals to sign (from `signet tuf propose`), each signed in place.
        #[arg(requires = "key")]
        files: Vec<PathBuf>,
        /// The repository to sign in: a copy of `<data dir>/tuf`, or the directory itself.
        #[arg(long, required_unless_present = "key")]
        repo: Option<PathBuf>,
        /// A directory holding `tuf-targets.pem`, and optionally `tuf-snapshot.pem` and
        /// `tuf-timestamp.pem` (then the new targets are published at once).
        #[arg(long, required_unless_present = "key")]
        keys: Option<PathBuf>,
        /// The output of `signet trust export`: trusted_root.json and signing_config.json.
        #[arg(long, required_unless_present = "key")]
        trust: Option<PathBuf>,
        /// The config whose `[tuf]` expiries to sign with (the defaults otherwise).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Print a TUF key's public half (PEM; its key id on stderr), for a ceremony's proposal.
    Pubkey {
        /// The key: a PKCS#8 file, pkcs11:… or awskms:….
        #[arg(long)]
        key: String,
        /// Make the key if it is not there (on a token, an Ed25519 pair that never leaves it).
        #[arg(long)]
        make: bool,
        /// The config whose `[keys]` PKCS#11 settings to use.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Write the next root (new keys, thresholds, or only a later expiry) or targets, unsigned.
    Propose(ceremony::ProposeArgs),
    /// Check a ceremony's signed root and targets against every threshold, then stage them in
    /// the instance's repository; the running server publishes them within seconds.
    Publish {
        /// The instance's data dir (on PostgreSQL: the sequencing instance's).
        #[arg(long, default_value = "signet-data")]
        data_dir: PathBuf,
        /// The signed proposals; a targets file's `targets/` directory travels beside it.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Only check the thresholds; stage nothing.
        #[arg(long)]
        check: bool,
        /// Wait up to this many seconds for the server to publish them (0: do not wait).
        #[arg(long, default_value_t = 0, value_name = "SECS")]
        wait: u64,
    },
    /// Replace a role's key, the server stopped: a new root version lists the new key, signed
    /// by the root key (for the root itself, by the old key and the new); the role's
    /// metadata is signed again with it. Clients holding an older root follow.
    Rotate {
        /// The instance's data dir.
        #[arg(long, default_value = "signet-data")]
        data_dir: PathBuf,
        /// root, targets, snapshot or timestamp.
        #[arg(long)]
        role: String,
        /// The TUF root key, when it is kept offline (default `<data dir>/keys/tuf-root.pem`).
        /// Rotating the root writes the new root key here, in place of the old one.
        #[arg(long, value_name = "FILE")]
        root_key: Option<PathBuf>,
        /// The config whose `[tuf]` expiries to sign with (the defaults otherwise).
        #[arg(long)]
        config: Option<PathBuf>,
    },
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a current-thread runtime builds")
}

pub fn run(cmd: Tuf) -> ExitCode {
    match cmd {
        Tuf::Status { data_dir } => status(&data_dir),
        Tuf::Sign { key: Some(key), files, config, .. } => ceremony::sign(&key, &files, config.as_deref()),
        Tuf::Sign { repo: Some(repo), keys: Some(keys), trust: Some(trust), config, .. } => {
            let expiry = match super::config(config.as_deref(), None, None) {
                Ok(cfg) => match cfg.tuf.validate() {
                    Ok(()) => cfg.tuf.expiry(),
                    Err(e) => {
                        errln!("signet tuf sign: {e}");
                        return ExitCode::from(2);
                    }
                },
                Err(code) => return code,
            };
            sign(&repo, &keys, &trust, &expiry)
        }
        Tuf::Sign { .. } => {
            errln!("signet tuf sign: give --key and the files to sign, or --repo, --keys and --trust");
            ExitCode::from(2)
        }
        Tuf::Pubkey { key, make, config } => ceremony::pubkey(&key, make, config.as_deref()),
        Tuf::Propose(args) => ceremony::propose(args),
        Tuf::Publish { data_dir, files, check, wait } => ceremony::publish(&data_dir, &files, check, wait),
        Tuf::Rotate { data_dir, role, root_key, config } => {
            let Some(role) = Role::ALL.into_iter().find(|r| r.name() == role) else {
                errln!("signet tuf rotate: --role {role:?}: expected root, targets, snapshot or timestamp");
                return ExitCode::from(2);
            };
            let expiry = match super::config(config.as_deref(), None, None) {
                Ok(cfg) => cfg.tuf.expiry(),
                Err(code) => return code,
            };
            match rotate(&data_dir, role, root_key.as_deref(), &expiry) {
                Ok(line) => {
                    outln!("{line}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    errln!("signet tuf rotate: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// Rotates `role`'s key in the data dir's repository. The new key is written beside the old
/// one first (`<key>.next`, 0600), then the new root and the role's metadata, and only then
/// does the new key replace the old, which is destroyed. Run again after a crash between
/// those steps, it finishes what the first run started.
fn rotate(data_dir: &Path, role: Role, root_key: Option<&Path>, expiry: &Expiry) -> Result<String, String> {
    let _lock = signet_server::datadir::DataDirLock::acquire(data_dir).map_err(|e| format!("{e}; stop the server first: a rotation is offline"))?;
    let repo = Repository::at(signet_server::tuf::repo_dir(data_dir));
    if !repo.exists() {
        return Err(format!("{} has no TUF repository; `signet serve` makes it at its first start", repo.dir().display()));
    }
    let keys_dir = data_dir.join("keys");
    let mut keys = RoleKeys::load(&keys_dir).map_err(|e| e.to_string())?;
    let root_path = root_key.map(Path::to_path_buf).unwrap_or_else(|| RoleKeys::path(&keys_dir, Role::Root));
    if root_key.is_some() {
        keys = keys.with_file(Role::Root, &root_path).map_err(|e| e.to_string())?;
    }
    let key_path = if role == Role::Root { root_path.clone() } else { RoleKeys::path(&keys_dir, role) };
    let next_path = PathBuf::from(format!("{}.next", key_path.display()));
    let now = jiff::Timestamp::now();
    let root_names = repo.role_key_id(role).map_err(|e| e.to_string())?;
    let rt = runtime();

    // A rotation that stopped part-way: the root may already name the new key.
    if next_path.exists() {
        let pending = signet_trust::tuf::keys::HeldKey::read(role, &next_path).map_err(|e| e.to_string())?;
        if root_names.as_deref() == Some(pending.key_id_hex().map_err(|e| e.to_string())?.as_str()) {
            std::fs::rename(&next_path, &key_path).map_err(|e| format!("{}: {e}", key_path.display()))?;
            let keys = keys.with_file(role, &key_path).map_err(|e| e.to_string())?;
            rt.block_on(repo.resign(role, &keys, expiry, now)).map_err(|e| e.to_string())?;
            return Ok(format!("finished the {} key rotation that had stopped part-way; {} holds the new key", role.name(), key_path.display()));
        }
        // The root never named it: start again with a fresh key.
        std::fs::remove_file(&next_path).map_err(|e| format!("{}: {e}", next_path.display()))?;
    }

    // The root key signs every rotation: without it, nothing is written, not even the new key.
    if keys.get(Role::Root).is_none() {
        return Err(format!("the TUF root key is needed and is not at {}; give --root-key where it is kept", root_path.display()));
    }
    let (new_key, pem) = signet_trust::tuf::keys::HeldKey::generate(role).map_err(|e| e.to_string())?;
    signet_core::files::write_atomic(&next_path, pem.as_bytes(), 0o600).map_err(|e| format!("{}: {e}", next_path.display()))?;
    let version = rt.block_on(repo.rotate_key(role, &keys, new_key, expiry, now)).map_err(|e| e.to_string())?;
    // The new key takes the old one's place; the old one is gone.
    std::fs::rename(&next_path, &key_path).map_err(|e| format!("{}: {e}", key_path.display()))?;
    Ok(format!("rotated the TUF {} key: root version {version} lists the new key, now at {}", role.name(), key_path.display()))
}

fn rfc3339(secs: i64) -> String {
    jiff::Timestamp::from_second(secs).map_or_else(|_| secs.to_string(), |t| t.to_string())
}

fn status(data_dir: &Path) -> ExitCode {
    let repo = Repository::at(signet_server::tuf::repo_dir(data_dir));
    if !repo.exists() {
        errln!("signet tuf status: {} has no TUF repository; `signet serve` makes it at its first start", repo.dir().display());
        return ExitCode::from(2);
    }
    let status = match repo.status() {
        Ok(s) => s,
        Err(e) => {
            errln!("signet tuf status: {e}");
            return ExitCode::FAILURE;
        }
    };
    let keys_dir = data_dir.join("keys");
    let now = jiff::Timestamp::now().as_second();
    let mut expired = false;
    outln!("repository  {}", repo.dir().display());
    for role in Role::ALL {
        let (version, expires) = status.of(role);
        let left = expires - now;
        expired |= left <= 0;
        let when = if left <= 0 { "EXPIRED".to_string() } else { format!("in {:.1} days", left as f64 / 86_400.0) };
        let key = match repo.role_key_ids(role) {
            Ok((ids, threshold)) if ids.len() > 1 || threshold > 1 => format!("keys {threshold} of {}", ids.len()),
            _ if RoleKeys::path(&keys_dir, role).exists() => "key here".into(),
            _ => "key offline".into(),
        };
        outln!("{:<10}  version {version:<4} expires {} ({when})  {key}", role.name(), rfc3339(expires));
    }
    for (name, _) in repo.staged_stamp() {
        outln!("staged      {name} (not yet published; the server's log says why if it stays)");
    }
    for (name, length) in &status.target_names {
        outln!("target      {name} ({length} bytes)");
    }
    if expired {
        errln!("signet tuf status: expired metadata: clients refuse this repository until it is signed again");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

fn sign(repo_dir: &Path, keys_dir: &Path, trust: &Path, expiry: &Expiry) -> ExitCode {
    let repo = Repository::at(repo_dir);
    if !repo.exists() {
        errln!("signet tuf sign: {} is not a TUF repository (no 1.root.json); give a copy of <data dir>/tuf", repo_dir.display());
        return ExitCode::from(2);
    }
    let docs = match documents(trust) {
        Ok(d) => d,
        Err(e) => {
            errln!("signet tuf sign: {e}");
            return ExitCode::from(2);
        }
    };
    let keys = match RoleKeys::load(keys_dir) {
        Ok(k) if k.get(Role::Targets).is_some() => k,
        Ok(_) => {
            errln!("signet tuf sign: {} holds no tuf-targets.pem", keys_dir.display());
            return ExitCode::from(2);
        }
        Err(e) => {
            errln!("signet tuf sign: {e}");
            return ExitCode::from(2);
        }
    };
    let now = jiff::Timestamp::now();
    let online = keys.get(Role::Snapshot).is_some() && keys.get(Role::Timestamp).is_some();
    let signed = runtime().block_on(async {
        if online {
            repo.publish(&keys, expiry, &docs, now).await.map(|p| match p {
                Published::Unchanged => "the targets already hold these documents; nothing was signed".to_string(),
                Published::Targets(v) => format!("published targets version {v}, with a new snapshot and timestamp"),
            })
        } else {
            repo.sign_targets(&keys, expiry, &docs, now).await.map(|v| {
                format!(
                    "signed {v}.targets.json; copy it and targets/ into the instance's <data dir>/tuf (on PostgreSQL: the \
                     sequencing instance's), and the server publishes it (a snapshot and timestamp) within {} s",
                    signet_server::tuf::check_every(expiry).as_secs()
                )
            })
        }
    });
    match signed {
        Ok(what) => {
            outln!("{what}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            errln!("signet tuf sign: {e}");
            ExitCode::FAILURE
        }
    }
}
