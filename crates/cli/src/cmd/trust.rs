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
    /// Rotate an authority's key offline, the server stopped: a new key and certificate; the
    /// old certificate stays trusted for what it signed before now. The server publishes the
    /// new trust documents (through TUF too) at its next start.
    Rotate(RotateArgs),
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
    /// The CA root key (PKCS#8 PEM), when it is kept offline (`signet init --root-key-out`);
    /// default `<data dir>/keys/ca-root.pem`.
    #[arg(long, value_name = "FILE")]
    root_key: Option<PathBuf>,
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
    let key_path = a.root_key.unwrap_or_else(|| a.data_dir.join("keys").join("ca-root.pem"));
    let key = match std::fs::read(&key_path) {
        Ok(k) => k,
        Err(e) => {
            errln!("signet trust rotate: the CA root key {}: {e} (give --root-key where it is kept)", key_path.display());
            return ExitCode::from(2);
        }
    };
    match signet_server::rotate::rotate(&a.data_dir, authority, &key) {
        Ok(report) => {
            outln!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
            ExitCode::SUCCESS
        }
        Err(e) => {
            errln!("signet trust rotate: {e}");
            ExitCode::FAILURE
        }
    }
}
