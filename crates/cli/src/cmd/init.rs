//! `signet init`.

use std::path::PathBuf;
use std::process::ExitCode;

use signet_server::init::{init, InitError, InitOptions};

#[derive(clap::Args)]
pub struct Args {
    /// The data dir to create (default ./signet-data). It must not hold keys yet.
    #[arg(long, default_value = "signet-data")]
    data_dir: PathBuf,
    /// The URL clients will reach this instance at; its host names the logs.
    #[arg(long)]
    public_url: String,
    /// Write the root CA key here instead of into the data dir, to keep it offline. It is
    /// needed again only to renew the intermediate or TSA certificates.
    #[arg(long, value_name = "FILE")]
    root_key_out: Option<PathBuf>,
    /// Curve of the CA intermediate: p256 (default) or p384.
    #[arg(long, value_name = "p256|p384")]
    intermediate_key: Option<String>,
}

pub fn run(args: Args) -> ExitCode {
    let intermediate_curve = match args.intermediate_key.as_deref().map(str::parse).transpose() {
        Ok(c) => c,
        Err(e) => {
            errln!("signet: --intermediate-key: {e}");
            return ExitCode::from(2);
        }
    };
    let opts = InitOptions { data_dir: args.data_dir, public_url: args.public_url, root_key_out: args.root_key_out, intermediate_curve };
    match init(&opts) {
        Ok(made) => {
            outln!("initialised {}", opts.data_dir.display());
            for f in &made.files {
                outln!("  {}", f.display());
            }
            outln!("root CA key: {}{}", made.root_key.display(), if opts.root_key_out.is_some() { " (keep it offline)" } else { "" });
            outln!("config: {} (list your OIDC issuers in it)", made.config.display());
            outln!("start: signet serve --config {}", made.config.display());
            ExitCode::SUCCESS
        }
        Err(e @ (InitError::Exists { .. } | InitError::RootKeyExists { .. })) => {
            errln!("signet: {e}");
            ExitCode::from(2)
        }
        Err(InitError::Start(e @ signet_server::StartError::Config(_))) => {
            errln!("signet: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            errln!("signet: {e}");
            ExitCode::FAILURE
        }
    }
}
