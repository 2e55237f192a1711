//! `signet serve`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use signet_server::Config;

#[derive(clap::Args)]
pub struct Args {
    /// TOML configuration file.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Directory for keys and the embedded database (default ./signet-data).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Address to listen on (default 127.0.0.1:8080).
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Start a complete development instance: generated keys, embedded storage.
    #[arg(long)]
    dev: bool,
    /// URL clients use to reach this instance; its host names the logs.
    #[arg(long)]
    public_url: Option<String>,
    /// Storage URL: sqlite://PATH (default under the data dir).
    #[arg(long)]
    storage: Option<String>,
    /// Serve plain HTTP. Plain HTTP is all `serve` speaks until the TLS layer lands, so this
    /// is accepted and changes nothing, keeping scripts valid afterwards.
    #[arg(long)]
    plain_http: bool,
}

pub fn run(args: Args) -> ExitCode {
    let mut cfg = match Config::load(args.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("signet: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(d) = args.data_dir {
        cfg.data_dir = d;
    }
    if let Some(l) = args.listen {
        cfg.listen = l;
    }
    if let Some(u) = args.public_url {
        cfg.public_url = Some(u);
    }
    if let Some(s) = args.storage {
        cfg.storage = Some(s);
    }
    cfg.dev |= args.dev;
    let _ = args.plain_http;

    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    match runtime.block_on(signet_server::serve(cfg)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("signet: {e}");
            match e {
                signet_server::StartError::Config(_) | signet_server::StartError::MissingKey { .. } => ExitCode::from(2),
                _ => ExitCode::FAILURE,
            }
        }
    }
}
