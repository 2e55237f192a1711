//! The offline ceremony for the TUF root and targets, k of n (see
//! `signet_trust::tuf::ceremony`):
//!
//! - `signet tuf pubkey --key K [--make]`: a holder's public key, to put in a proposal.
//! - `signet tuf propose root|targets`: the next version, unsigned, into `--out`.
//! - `signet tuf sign --key K FILE…`: one signature added to each file, on any machine.
//! - `signet tuf publish --data-dir D FILE…`: checks every threshold, then stages the files
//!   in the instance's repository, where the running server adopts them within seconds.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use signet_keys::{Algorithm, KeySource, Pkcs11Settings, Signer};
use signet_trust::tuf::ceremony::{Proposal, RootChange};
use signet_trust::tuf::keys::{ed25519_key, tuf_key};
use signet_trust::tuf::{Expiry, Repository, Role};
use tough::schema::key::Key;

#[derive(clap::Args)]
pub struct ProposeArgs {
    /// root or targets.
    role: String,
    /// The repository the proposal follows: `<data dir>/tuf`, or a copy of it.
    #[arg(long)]
    repo: PathBuf,
    /// Where to write the proposal (`N.root.json`, or `N.targets.json` and its `targets/`).
    #[arg(long)]
    out: PathBuf,
    /// The new root's root keys (repeat for each): a public key PEM from `signet tuf pubkey`,
    /// a key file, pkcs11:… or awskms:…. Unset: the current ones.
    #[arg(long = "root-key", value_name = "KEY")]
    root_keys: Vec<String>,
    /// How many root keys must sign each later root.
    #[arg(long, value_name = "K")]
    root_threshold: Option<u64>,
    /// The new root's targets keys (repeat for each). Unset: the current ones.
    #[arg(long = "targets-key", value_name = "KEY")]
    targets_keys: Vec<String>,
    /// How many targets keys must sign each targets.
    #[arg(long, value_name = "K")]
    targets_threshold: Option<u64>,
    /// A new snapshot key (the instance must hold it before the root is published).
    #[arg(long, value_name = "KEY")]
    snapshot_key: Option<String>,
    /// A new timestamp key (the instance must hold it before the root is published).
    #[arg(long, value_name = "KEY")]
    timestamp_key: Option<String>,
    /// For targets: the output of `signet trust export` (trusted_root.json, signing_config.json).
    #[arg(long)]
    trust: Option<PathBuf>,
    /// The config whose `[tuf]` expiries and `[keys]` PKCS#11 settings to use.
    #[arg(long)]
    config: Option<PathBuf>,
}

/// The config's expiries and PKCS#11 settings (module and PIN, also from `SIGNET_KEYS_PKCS11_*`).
fn settings(config: Option<&Path>) -> Result<(Expiry, Pkcs11Settings), ExitCode> {
    let cfg = super::super::config(config, None, None)?;
    if let Err(e) = cfg.tuf.validate() {
        errln!("signet tuf: {e}");
        return Err(ExitCode::from(2));
    }
    Ok((cfg.tuf.expiry(), cfg.keys.pkcs11()))
}

/// Opens the private key `spec` names (a file, a token's object, a KMS key), Ed25519 only;
/// with `make`, made there first if it is not.
fn signer(spec: &str, pkcs11: &Pkcs11Settings, make: bool) -> Result<Signer, String> {
    let source: KeySource = spec.parse().map_err(|e| format!("{spec}: {e}"))?;
    if make {
        signet_keys::home::ensure(&source, pkcs11, Algorithm::Ed25519).map_err(|e| format!("{source}: {e}"))?;
    }
    Signer::open(&source, pkcs11, &[Algorithm::Ed25519], false).map_err(|e| format!("{source}: {e}"))
}

/// A key as a proposal lists it: from a public key PEM, or from the private key's own half.
fn public_key(spec: &str, pkcs11: &Pkcs11Settings) -> Result<Key, String> {
    if let Ok(bytes) = std::fs::read(spec) {
        if let Ok(block) = signet_core::pem::decode_first(&bytes) {
            if block.label == "PUBLIC KEY" {
                let raw = signet_keys::algorithm::ed25519_raw(&block.der).ok_or_else(|| format!("{spec}: not an Ed25519 public key; TUF keys here are Ed25519"))?;
                return Ok(ed25519_key(raw));
            }
        }
    }
    tuf_key(&signer(spec, pkcs11, false)?).map_err(|e| format!("{spec}: {e}"))
}

/// `command`'s key, opened with the config's PKCS#11 settings; the exit code when it can't be.
fn open_key(command: &str, key: &str, make: bool, config: Option<&Path>) -> Result<Signer, ExitCode> {
    let (_, pkcs11) = settings(config)?;
    signer(key, &pkcs11, make).map_err(|e| {
        errln!("signet tuf {command}: {e}");
        ExitCode::FAILURE
    })
}

pub fn pubkey(key: &str, make: bool, config: Option<&Path>) -> ExitCode {
    let key = match open_key("pubkey", key, make, config) {
        Ok(k) => k,
        Err(code) => return code,
    };
    match tuf_key(&key).and_then(|k| k.key_id().map_err(|e| signet_trust::tuf::TufError::Tough(e.to_string()))) {
        Ok(id) => {
            outln!("{}", key.public_pem().trim_end());
            errln!("key id {}", hex::encode(id.as_ref()));
            ExitCode::SUCCESS
        }
        Err(e) => {
            errln!("signet tuf pubkey: {e}");
            ExitCode::FAILURE
        }
    }
}

pub fn propose(a: ProposeArgs) -> ExitCode {
    let (expiry, pkcs11) = match settings(a.config.as_deref()) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let repo = Repository::at(&a.repo);
    if !repo.exists() {
        errln!("signet tuf propose: {} is not a TUF repository (no 1.root.json); give <data dir>/tuf or a copy", a.repo.display());
        return ExitCode::from(2);
    }
    let now = jiff::Timestamp::now();
    let proposal = match a.role.as_str() {
        "root" => {
            if a.trust.is_some() {
                errln!("signet tuf propose root: --trust is for targets");
                return ExitCode::from(2);
            }
            let mut change = RootChange::default();
            let singles = [(Role::Snapshot, a.snapshot_key.iter().cloned().collect::<Vec<_>>()), (Role::Timestamp, a.timestamp_key.iter().cloned().collect())];
            for (role, specs) in [(Role::Root, a.root_keys.clone()), (Role::Targets, a.targets_keys.clone())].into_iter().chain(singles) {
                if specs.is_empty() {
                    continue;
                }
                let keys: Result<Vec<_>, _> = specs.iter().map(|s| public_key(s, &pkcs11)).collect();
                match keys {
                    Ok(keys) => change.keys.push((role, keys)),
                    Err(e) => {
                        errln!("signet tuf propose root: --{}-key {e}", role.name());
                        return ExitCode::from(2);
                    }
                }
            }
            change.thresholds.extend(a.root_threshold.map(|t| (Role::Root, t)));
            change.thresholds.extend(a.targets_threshold.map(|t| (Role::Targets, t)));
            repo.propose_root(&change, &expiry, now).map(Proposal::Root)
        }
        "targets" => {
            if !a.root_keys.is_empty() || !a.targets_keys.is_empty() || a.root_threshold.is_some() || a.targets_threshold.is_some() {
                errln!("signet tuf propose targets: keys and thresholds are the root's; propose a root to change them");
                return ExitCode::from(2);
            }
            let Some(trust) = &a.trust else {
                errln!("signet tuf propose targets: --trust DIR (from `signet trust export`) is needed");
                return ExitCode::from(2);
            };
            let docs = match super::documents::documents(trust) {
                Ok(d) => d,
                Err(e) => {
                    errln!("signet tuf propose targets: {e}");
                    return ExitCode::from(2);
                }
            };
            repo.propose_targets(&docs, &expiry, now, &a.out).map(Proposal::Targets)
        }
        other => {
            errln!("signet tuf propose: {other:?}: expected root or targets (snapshot and timestamp are signed online)");
            return ExitCode::from(2);
        }
    };
    let written = proposal.map_err(|e| e.to_string()).and_then(|p| {
        let path = a.out.join(p.file_name());
        let bytes = p.to_bytes().map_err(|e| e.to_string())?;
        std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
        signet_core::files::write_atomic(&path, &bytes, 0o644).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok((path, p))
    });
    match written {
        Ok((path, p)) => {
            outln!("{}", path.display());
            errln!("{}", needs(&repo, &p));
            ExitCode::SUCCESS
        }
        Err(e) => {
            errln!("signet tuf propose: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Who must sign `p`, in words.
fn needs(repo: &Repository, p: &Proposal) -> String {
    let (current, threshold) = repo.role_key_ids(p.role()).unwrap_or_default();
    match p {
        Proposal::Root(r) => {
            let own = r.signed.roles.get(&tough::schema::RoleType::Root).map_or(1, |k| k.threshold.get());
            let n = r.signed.roles.get(&tough::schema::RoleType::Root).map_or(0, |k| k.keyids.len());
            format!(
                "root version {}: to be signed by {own} of its {n} root keys and {threshold} of the current root's {} (one key may be both)",
                p.version(),
                current.len()
            )
        }
        Proposal::Targets(_) => format!("targets version {}: to be signed by {threshold} of the root's {} targets keys", p.version(), current.len()),
    }
}

pub fn sign(key: &str, files: &[PathBuf], config: Option<&Path>) -> ExitCode {
    let key = match open_key("sign", key, false, config) {
        Ok(k) => k,
        Err(code) => return code,
    };
    for file in files {
        let signed = Proposal::read(file).map_err(|e| e.to_string()).and_then(|mut p| {
            let id = p.sign(&key).map_err(|e| e.to_string())?;
            let bytes = p.to_bytes().map_err(|e| e.to_string())?;
            signet_core::files::write_atomic(file, &bytes, 0o644).map_err(|e| format!("{}: {e}", file.display()))?;
            Ok(id)
        });
        match signed {
            Ok(id) => outln!("{}: signed by key id {id}", file.display()),
            Err(e) => {
                errln!("signet tuf sign: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

/// Copies the target files a targets proposal lists from beside it into the repository
/// (content-addressed, so nothing a client reads changes).
fn carry_targets(repo: &Repository, file: &Path, p: &Proposal) -> Result<(), String> {
    let Proposal::Targets(t) = p else { return Ok(()) };
    let from = file.parent().unwrap_or(Path::new(".")).join("targets");
    for (target, meta) in &t.signed.targets {
        let name = format!("{}.{}", hex::encode(&meta.hashes.sha256), target.raw());
        let to = repo.dir().join("targets").join(&name);
        if to.exists() {
            continue;
        }
        let bytes = std::fs::read(from.join(&name)).map_err(|e| format!("{}: {e} (a proposal's targets/ travels with it)", from.join(&name).display()))?;
        if signet_core::hash::sha256(&bytes).as_slice() != meta.hashes.sha256.as_ref() {
            return Err(format!("{}: its hash is not the one {} names", from.join(&name).display(), file.display()));
        }
        signet_core::files::write_atomic(&to, &bytes, 0o644).map_err(|e| format!("{}: {e}", to.display()))?;
    }
    Ok(())
}

pub fn publish(data_dir: &Path, files: &[PathBuf], check_only: bool, wait: u64) -> ExitCode {
    let repo = Repository::at(signet_server::tuf::repo_dir(data_dir));
    if !repo.exists() {
        errln!("signet tuf publish: {} has no TUF repository", repo.dir().display());
        return ExitCode::from(2);
    }
    let mut proposals = Vec::new();
    for file in files {
        match Proposal::read(file).map_err(|e| e.to_string()).and_then(|p| carry_targets(&repo, file, &p).map(|()| p)) {
            Ok(p) => proposals.push(p),
            Err(e) => {
                errln!("signet tuf publish: {e}");
                return ExitCode::from(2);
            }
        }
    }
    if let Err(e) = repo.check(&proposals, jiff::Timestamp::now()) {
        errln!("signet tuf publish: {e}");
        return ExitCode::FAILURE;
    }
    if check_only {
        for p in &proposals {
            outln!("{}: every threshold is met", p.file_name());
        }
        return ExitCode::SUCCESS;
    }
    for p in &proposals {
        if let Err(e) = repo.stage(p) {
            errln!("signet tuf publish: {e}");
            return ExitCode::FAILURE;
        }
        outln!("staged {}", p.file_name());
    }
    if wait == 0 {
        outln!("the running server publishes them within seconds (on PostgreSQL: the instance holding the sequencer lease, from its own data dir)");
        return ExitCode::SUCCESS;
    }
    wait_adopted(&repo, &proposals, Duration::from_secs(wait))
}

/// Waits until the server has published every proposal, or refused one.
fn wait_adopted(repo: &Repository, proposals: &[Proposal], wait: Duration) -> ExitCode {
    let deadline = Instant::now() + wait;
    loop {
        for p in proposals {
            let why = repo.staged_dir().join(format!("{}.refused.why", p.file_name()));
            if let Ok(why) = std::fs::read_to_string(&why) {
                errln!("signet tuf publish: the server refused {}: {}", p.file_name(), why.trim_end());
                return ExitCode::FAILURE;
            }
        }
        // The server removes a staged file once clients are served what it held.
        let served = proposals.iter().all(|p| !repo.staged_dir().join(p.file_name()).exists());
        let done = served && repo.status().is_ok_and(|s| proposals.iter().all(|p| s.of(p.role()).0 >= p.version()));
        if done {
            outln!("published");
            return ExitCode::SUCCESS;
        }
        if Instant::now() >= deadline {
            errln!(
                "signet tuf publish: not published after {} s; is the server running on this data dir (on PostgreSQL, is it the sequencer)? \
                 Its log says why; the files stay staged",
                wait.as_secs()
            );
            return ExitCode::FAILURE;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
