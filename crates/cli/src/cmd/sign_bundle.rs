//! `signet sign-bundle`: keyless signing of one file (or, with `--in-toto`, of an in-toto
//! statement as a DSSE envelope) into a Sigstore bundle, speaking the sigstore-conformance
//! CLI protocol.

use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Accepted for the conformance protocol; signet has no staging instance, so the
    /// services always come from --signing-config.
    #[arg(long)]
    staging: bool,
    /// FILE is an in-toto statement (JSON): sign it as a DSSE envelope over its PAE. On Rekor v1
    /// it is logged as a dsse entry, on Rekor v2 as a hashedrekord over the PAE digest.
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
    /// On a witnessed Rekor v2 log, wait up to this many seconds for the witnesses' cosigned
    /// copy of the entry's checkpoint and put it in the bundle (docs/witness.md); 0: don't.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=600))]
    witness_wait: u64,
    /// The file to sign (with --in-toto, the statement).
    file: PathBuf,
}

fn usage(why: impl std::fmt::Display) -> ExitCode {
    errln!("signet sign-bundle: {why}");
    ExitCode::from(2)
}

pub fn run(args: Args) -> ExitCode {
    let _ = (args.staging, &args.trusted_root);
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
    let signed = if args.in_toto {
        // The statement is checked before any service is asked for anything.
        if let Err(e) = signet_client::dsse::check_statement(&artifact) {
            return usage(format!("{}: {e}", args.file.display()));
        }
        signer.sign_in_toto(token.trim(), &artifact)
    } else {
        signer.sign(token.trim(), &artifact)
    };
    let signed = signed.map(|mut bundle| {
        if args.witness_wait > 0 {
            match signer.adopt_cosigned_checkpoint(&mut bundle, std::time::Duration::from_secs(args.witness_wait)) {
                Ok(true) => {}
                Ok(false) => errln!("signet sign-bundle: no cosigned copy of the entry's checkpoint within {} s; the bundle keeps the log's own", args.witness_wait),
                Err(e) => errln!("signet sign-bundle: reading the witnessed checkpoint: {e}; the bundle keeps the log's own"),
            }
        }
        bundle
    });
    match signed {
        Ok(bundle) => {
            let text = serde_json::to_string_pretty(&bundle).expect("bundle serializes") + "\n";
            if let Err(e) = signet_core::files::write_atomic(&args.bundle, text.as_bytes(), 0o644) {
                errln!("signet sign-bundle: {}: {e}", args.bundle.display());
                return ExitCode::FAILURE;
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            errln!("signet sign-bundle: {e}");
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
