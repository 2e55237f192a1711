//! `signet sign-bundle`: keyless signing of one file into a Sigstore bundle, speaking the
//! sigstore-conformance CLI protocol.

use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Accepted for the conformance protocol; signet has no staging instance, so the
    /// services always come from --signing-config.
    #[arg(long)]
    staging: bool,
    /// Sign FILE as an in-toto statement in a DSSE envelope.
    #[arg(long)]
    in_toto: bool,
    /// The OIDC identity token (or a file that holds it).
    #[arg(long)]
    identity_token: String,
    /// Where to write the bundle (v0.3 JSON).
    #[arg(long)]
    bundle: PathBuf,
    /// The trusted root; accepted for the protocol (signing does not need it).
    #[arg(long)]
    trusted_root: Option<PathBuf>,
    /// SigningConfig v0.2 naming the CA, log and TSA (`signet trust export` writes one).
    #[arg(long)]
    signing_config: Option<PathBuf>,
    /// The file to sign.
    file: PathBuf,
}

fn usage(why: impl std::fmt::Display) -> ExitCode {
    eprintln!("signet sign-bundle: {why}");
    ExitCode::from(2)
}

pub fn run(args: Args) -> ExitCode {
    let _ = (args.staging, &args.trusted_root);
    if args.in_toto {
        return usage("--in-toto (DSSE envelopes) is not supported yet; sign the statement file as a blob instead");
    }
    let Some(config_path) = &args.signing_config else {
        return usage("--signing-config is required: signet does not fetch one over TUF (see `signet trust export`)");
    };
    let config = match std::fs::read(config_path) {
        Ok(c) => c,
        Err(e) => return usage(format!("{}: {e}", config_path.display())),
    };
    let signer = match signet_client::Signer::from_signing_config(&config) {
        Ok(s) => s,
        Err(e) => return usage(format!("{}: {e}", config_path.display())),
    };
    let artifact = match std::fs::read(&args.file) {
        Ok(a) => a,
        Err(e) => return usage(format!("{}: {e}", args.file.display())),
    };
    let token = identity_token(&args.identity_token);
    match signer.sign(token.trim(), &artifact) {
        Ok(bundle) => {
            let text = serde_json::to_string_pretty(&bundle).expect("bundle serializes") + "\n";
            if let Err(e) = signet_core::files::write_atomic(&args.bundle, text.as_bytes(), 0o644) {
                eprintln!("signet sign-bundle: {}: {e}", args.bundle.display());
                return ExitCode::FAILURE;
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("signet sign-bundle: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A JWT is three dot-separated parts; anything else is taken as a path to one.
fn identity_token(value: &str) -> String {
    if value.split('.').count() != 3 {
        if let Ok(text) = std::fs::read_to_string(value) {
            return text;
        }
    }
    value.to_string()
}
