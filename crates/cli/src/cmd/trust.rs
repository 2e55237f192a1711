//! `signet trust export`: the documents clients need, written to a directory.

use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(clap::Subcommand)]
enum What {
    /// Write trusted_root.json, signing_config.json and client_trust_config.json (and
    /// audit_key.pem, when the audit log has made its key; tuf_root.json, the TUF
    /// repository's newest root, to bootstrap clients from `<url>/tuf`; and tls_ca.pem, the
    /// CA of the HTTPS certificate a --dev instance issues itself, for SSL_CERT_FILE or
    /// REQUESTS_CA_BUNDLE).
    Export(ExportArgs),
    /// Rotate an authority's key: a new key and certificate; the old certificate stays trusted
    /// for what it signed before. Offline, the server stopped (it publishes the new trust
    /// documents, through TUF too, at its next start), or with --at on a running instance or
    /// cluster: published at once, signing from that time.
    Rotate(RotateArgs),
    /// Add another deployment's trusted root (an earlier signet, RHTAS, extra logs or TSAs) to
    /// this instance's: its entries follow the instance's own in trusted_root.json, so that
    /// what it signed keeps verifying. Published (through TUF too) at the next start.
    Include(IncludeArgs),
}

#[derive(clap::Args)]
struct IncludeArgs {
    /// The instance's data dir.
    #[arg(long, default_value = "signet-data")]
    data_dir: PathBuf,
    /// The trusted_root.json to include, checked as a verifier reads it.
    #[arg(required_unless_present_any = ["remove", "list"], conflicts_with_all = ["remove", "list"])]
    file: Option<PathBuf>,
    /// The name to keep it under (default: the file's name).
    #[arg(long, requires = "file")]
    name: Option<String>,
    /// Stop including the one kept under this name.
    #[arg(long, value_name = "NAME", conflicts_with = "list")]
    remove: Option<String>,
    /// List what is included.
    #[arg(long)]
    list: bool,
}

#[derive(clap::Args)]
struct RotateArgs {
    /// The instance's data dir.
    #[arg(long, default_value = "signet-data")]
    data_dir: PathBuf,
    /// Rotate the timestamp authority's key.
    #[arg(long, required_unless_present = "intermediate", conflicts_with = "intermediate")]
    tsa: bool,
    /// Rotate the CA's intermediate key, which signs leaf certificates.
    #[arg(long)]
    intermediate: bool,
    /// The CA root key, when it is kept offline: a PKCS#8 PEM file (`signet init
    /// --root-key-out`), a PKCS#11 URI or an AWS KMS key (`--root-key pkcs11:…|awskms:…`);
    /// default `<data dir>/keys/ca-root.pem`. A token's module and PIN:
    /// SIGNET_KEYS_PKCS11_MODULE, SIGNET_KEYS_PKCS11_PIN.
    #[arg(long, value_name = "FILE|URI")]
    root_key: Option<String>,
    /// Make the new key here, on a token or in KMS (pkcs11:token=…;object=NEW or
    /// awskms:///alias/NEW), instead of a file in the data dir. `ca/rotations.json` records
    /// it, and the server uses it over the config's [keys] entry (tsa or ca_intermediate).
    #[arg(long, value_name = "URI")]
    new_key: Option<String>,
    /// Schedule the rotation on a running instance (or cluster): the trust documents and TUF
    /// publish the new key at once, and it signs from TIME (RFC 3339, or +30m, +2h, +1d from
    /// now; at least 10 s ahead). Give clients time to update their trusted root first.
    #[arg(long, value_name = "TIME")]
    at: Option<String>,
    /// With --at: wait up to this many seconds for the running instance to publish it.
    #[arg(long, value_name = "SECONDS", requires = "at")]
    wait: Option<u64>,
}

/// `--at`: an RFC 3339 time, or `+N` seconds, minutes, hours or days from now.
fn parse_at(at: &str) -> Result<jiff::Timestamp, String> {
    let expected = "expected an RFC 3339 time (2026-12-01T12:00:00Z) or a delay from now (+90s, +30m, +2h, +1d)";
    if let Some(rest) = at.strip_prefix('+') {
        let split = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let (n, unit) = rest.split_at(split);
        let n: i64 = n.parse().map_err(|_| format!("--at {at:?}: {expected}"))?;
        let secs = match unit {
            "s" | "" => n,
            "m" => n.saturating_mul(60),
            "h" => n.saturating_mul(3600),
            "d" => n.saturating_mul(86_400),
            _ => return Err(format!("--at {at:?}: unit {unit:?}; {expected}")),
        };
        return jiff::Timestamp::now().checked_add(jiff::SignedDuration::from_secs(secs)).map_err(|e| format!("--at {at:?}: {e}"));
    }
    at.parse::<jiff::Timestamp>().map_err(|e| format!("--at {at:?}: {e}; {expected}"))
}

#[derive(clap::Args)]
struct ExportArgs {
    /// The instance's data dir.
    #[arg(long, default_value = "signet-data")]
    data_dir: PathBuf,
    /// Where to write the files.
    #[arg(long)]
    out: PathBuf,
    /// Base URL clients use; its host must be the instance's (defaults to its public URL).
    #[arg(long)]
    url: Option<String>,
}

pub fn run(args: Args) -> ExitCode {
    let a = match args.what {
        What::Export(a) => a,
        What::Rotate(r) => return rotate(r),
        What::Include(i) => return include(i),
    };
    let instance = match signet_server::trust::instance(&a.data_dir, a.url.as_deref()) {
        Ok(i) => i,
        Err(e) => {
            errln!("signet trust export: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = std::fs::create_dir_all(&a.out) {
        errln!("signet trust export: {}: {e}", a.out.display());
        return ExitCode::FAILURE;
    }
    for (name, doc) in [
        ("trusted_root.json", instance.trusted_root()),
        ("signing_config.json", instance.signing_config()),
        ("client_trust_config.json", instance.client_trust_config()),
    ] {
        let path = a.out.join(name);
        let text = serde_json::to_string_pretty(&doc).expect("documents serialize") + "\n";
        if let Err(e) = signet_core::files::write_atomic(&path, text.as_bytes(), 0o644) {
            errln!("signet trust export: {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        outln!("{}", path.display());
    }
    // The audit key's public half, for checking the audit anchors elsewhere. Beside the
    // trusted root, not in it: that document is Sigstore's, and clients parse it as such.
    let audit_key = a.data_dir.join("keys").join("audit.pem");
    if audit_key.exists() {
        let public = std::fs::read(&audit_key)
            .map_err(|e| e.to_string())
            .and_then(|pem| signet_core::pem::decode_first(&pem).map_err(|e| e.to_string()))
            .and_then(|b| signet_keys::Signer::from_pkcs8(&b.der, "keys/audit.pem", &[signet_keys::Algorithm::EcdsaP256Sha256]).map_err(|e| e.to_string()));
        let key = match public {
            Ok(k) => k,
            Err(e) => {
                errln!("signet trust export: {}: {e}", audit_key.display());
                return ExitCode::FAILURE;
            }
        };
        let path = a.out.join("audit_key.pem");
        if let Err(e) = signet_core::files::write_atomic(&path, key.public_pem().as_bytes(), 0o644) {
            errln!("signet trust export: {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        outln!("{}", path.display());
    }
    // The CA of the serving certificate an `issued` instance makes itself: what HTTPS clients
    // must trust to reach it.
    let tls_ca = signet_ca::serving::certificate_path(&a.data_dir);
    if tls_ca.exists() {
        let path = a.out.join("tls_ca.pem");
        let copied = std::fs::read(&tls_ca)
            .map_err(|e| format!("{}: {e}", tls_ca.display()))
            .and_then(|pem| signet_core::files::write_atomic(&path, &pem, 0o644).map_err(|e| format!("{}: {e}", path.display())));
        if let Err(e) = copied {
            errln!("signet trust export: {e}");
            return ExitCode::FAILURE;
        }
        outln!("{}", path.display());
    }
    // The TUF repository's newest root, the one file a client needs to bootstrap from
    // `<url>/tuf` (docs/operations.md).
    let repo = signet_trust::tuf::Repository::at(signet_server::tuf::repo_dir(&a.data_dir));
    if repo.exists() {
        let path = a.out.join("tuf_root.json");
        let written = repo.newest_root().map_err(|e| e.to_string()).and_then(|root| {
            signet_core::files::write_atomic(&path, &root, 0o644).map_err(|e| format!("{}: {e}", path.display()))
        });
        if let Err(e) = written {
            errln!("signet trust export: {e}");
            return ExitCode::FAILURE;
        }
        outln!("{}", path.display());
    }
    ExitCode::SUCCESS
}

fn rotate(a: RotateArgs) -> ExitCode {
    let authority = if a.intermediate { signet_server::rotate::Authority::Intermediate } else { signet_server::rotate::Authority::Tsa };
    use signet_keys::KeySource;
    let pkcs11 = signet_keys::Pkcs11Settings {
        module: std::env::var_os("SIGNET_KEYS_PKCS11_MODULE").map(PathBuf::from),
        pin: std::env::var("SIGNET_KEYS_PKCS11_PIN").ok(),
        sessions: 1,
    };
    let root_source = match a.root_key.as_deref().map(str::parse::<KeySource>).transpose() {
        Ok(source) => source.unwrap_or_else(|| KeySource::File(a.data_dir.join("keys").join("ca-root.pem"))),
        Err(e) => {
            errln!("signet trust rotate: --root-key: {e}");
            return ExitCode::from(2);
        }
    };
    let new_source = match a.new_key.as_deref().map(str::parse::<KeySource>).transpose() {
        Ok(Some(KeySource::File(_))) => {
            errln!("signet trust rotate: --new-key names a token's object or a KMS key; without it the new key is a file in the data dir");
            return ExitCode::from(2);
        }
        Ok(source) => source,
        Err(e) => {
            errln!("signet trust rotate: --new-key: {e}");
            return ExitCode::from(2);
        }
    };
    let root = match signet_ca::x509::CaKey::open(&root_source, &pkcs11, signet_ca::x509::CaCurve::P384, false) {
        Ok(k) => k,
        Err(e) => {
            errln!("signet trust rotate: the CA root key {root_source}: {e} (give --root-key where it is kept)");
            return ExitCode::from(2);
        }
    };
    let new_key = match &new_source {
        Some(source) => signet_server::rotate::NewKey::Elsewhere { source, pkcs11: &pkcs11 },
        None => signet_server::rotate::NewKey::File,
    };
    if let Some(at) = &a.at {
        let from = match parse_at(at) {
            Ok(t) => t,
            Err(e) => {
                errln!("signet trust rotate: {e}");
                return ExitCode::from(2);
            }
        };
        return match signet_server::rotate::scheduled::schedule(&a.data_dir, authority, &root, &new_key, from) {
            Ok(report) => {
                outln!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
                errln!(
                    "signet trust rotate: scheduled; a running instance publishes the new {} within {} s, and it signs from {}",
                    authority.title(),
                    signet_server::rotate::scheduled::LOOK_EVERY.as_secs(),
                    report.new_from
                );
                match a.wait {
                    Some(secs) => wait_published(&a.data_dir, authority, secs),
                    None => ExitCode::SUCCESS,
                }
            }
            Err(e) => {
                errln!("signet trust rotate: {e}");
                ExitCode::FAILURE
            }
        };
    }
    match signet_server::rotate::rotate(&a.data_dir, authority, &root, new_key) {
        Ok(report) => {
            outln!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
            if let Some(source) = &new_source {
                let entry = if a.intermediate { "ca_intermediate" } else { "tsa" };
                errln!("signet trust rotate: the new key is {source}; ca/rotations.json records it, and the server uses it over the config's: set [keys] {entry} = \"{source}\" (or SIGNET_KEYS_{}) to match", entry.to_uppercase());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            errln!("signet trust rotate: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Waits until the running instance has published the scheduled rotation (or it was
/// promoted already).
fn wait_published(data_dir: &std::path::Path, authority: signet_server::rotate::Authority, secs: u64) -> ExitCode {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        let published = signet_server::rotate::read(data_dir).map(|mut r| {
            authority.record(&mut r).as_ref().is_some_and(|r| r.next.as_ref().is_none_or(|n| n.published.is_some()))
        });
        match published {
            Ok(true) => {
                errln!("signet trust rotate: published");
                return ExitCode::SUCCESS;
            }
            Ok(false) if std::time::Instant::now() < deadline => std::thread::sleep(std::time::Duration::from_millis(200)),
            Ok(false) => {
                errln!("signet trust rotate: no running instance published the rotation within {secs} s; is a server running on {}? It publishes it when it starts", data_dir.display());
                return ExitCode::FAILURE;
            }
            Err(e) => {
                errln!("signet trust rotate: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
}

fn include(a: IncludeArgs) -> ExitCode {
    let dir = signet_server::trust::included_dir(&a.data_dir);
    if !a.data_dir.join("ca").join("root.pem").exists() {
        errln!("signet trust include: {} is not an instance's data dir (no ca/root.pem); run `signet init` or `signet serve` first", a.data_dir.display());
        return ExitCode::from(2);
    }
    if a.list {
        return match signet_server::trust::included(&a.data_dir) {
            Ok(list) => {
                for (name, doc) in list {
                    let count = |f: &str| doc[f].as_array().map_or(0, Vec::len);
                    outln!(
                        "{name}: {} tlogs, {} ctlogs, {} certificate authorities, {} timestamp authorities",
                        count("tlogs"),
                        count("ctlogs"),
                        count("certificateAuthorities"),
                        count("timestampAuthorities")
                    );
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                errln!("signet trust include: {e}");
                ExitCode::FAILURE
            }
        };
    }
    // A name is one plain file name in the include directory, nothing else.
    let plain = |n: &str| !n.is_empty() && !n.starts_with('.') && n.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if let Some(name) = a.remove {
        let name = if name.ends_with(".json") { name } else { format!("{name}.json") };
        if !plain(&name) {
            errln!("signet trust include: --remove {name:?}: a name from `signet trust include --list` was expected");
            return ExitCode::from(2);
        }
        return match std::fs::remove_file(dir.join(&name)) {
            Ok(()) => {
                outln!("{name} is no longer included; the next start publishes the trusted root without it");
                ExitCode::SUCCESS
            }
            Err(e) => {
                errln!("signet trust include: {name}: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let Some(file) = a.file else { return ExitCode::from(2) };
    let name = a.name.or_else(|| file.file_name().and_then(|n| n.to_str()).map(str::to_string)).unwrap_or_default();
    let name = if name.ends_with(".json") { name } else { format!("{name}.json") };
    if !plain(&name) {
        errln!("signet trust include: {name:?}: give --name with letters, digits, '.', '_' or '-'");
        return ExitCode::from(2);
    }
    let bytes = match std::fs::read(&file) {
        Ok(b) => b,
        Err(e) => {
            errln!("signet trust include: {}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    if let Err(e) = signet_server::trust::check_included(&bytes) {
        errln!("signet trust include: {}: {e}", file.display());
        return ExitCode::from(2);
    }
    let written = std::fs::create_dir_all(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))
        .and_then(|()| signet_core::files::write_atomic(&dir.join(&name), &bytes, 0o644).map_err(|e| format!("{}: {e}", dir.join(&name).display())));
    match written {
        Ok(()) => {
            outln!("included as {name}; the next start publishes the trusted root with it (through TUF too)");
            ExitCode::SUCCESS
        }
        Err(e) => {
            errln!("signet trust include: {e}");
            ExitCode::FAILURE
        }
    }
}
