//! One module per subcommand.

pub mod admin;
pub mod audit;
pub mod backup;
#[cfg(feature = "lab")]
pub mod bench;
#[cfg(feature = "lab")]
pub mod bench_gates;
#[cfg(feature = "lab")]
pub mod bench_json;
#[cfg(feature = "lab")]
pub mod bench_tls;
#[cfg(feature = "lab")]
pub mod bench_cost;
#[cfg(feature = "lab")]
pub mod bench_crypto;
#[cfg(feature = "lab")]
pub mod bench_micro;
#[cfg(feature = "lab")]
pub mod bench_monitor;
#[cfg(feature = "lab")]
pub mod bench_scale;
#[cfg(feature = "lab")]
pub mod bench_verify;
pub mod config;
pub mod dev_token;
pub mod doctor;
pub mod import;
pub mod init;
pub mod migrate;
pub mod monitor;
pub mod probe;
pub mod restore;
pub mod serve;
pub mod sign_bundle;
pub mod trust;
pub mod tuf;
pub mod verify_bundle;
pub mod witness;

/// The instance a command works on, named the same way by every command that has one
/// (`serve`, `backup`, `restore`, `migrate`, `doctor`).
#[derive(clap::Args)]
pub struct Instance {
    /// TOML configuration file.
    #[arg(long)]
    pub config: Option<std::path::PathBuf>,
    /// The instance's data dir: its keys and embedded database (default: the config's
    /// `data_dir`, or ./signet-data).
    #[arg(long)]
    pub data_dir: Option<std::path::PathBuf>,
}

impl Instance {
    /// [`config`] for this instance, with `storage` over the configured store if given.
    pub fn config(&self, storage: Option<String>) -> Result<signet_server::Config, std::process::ExitCode> {
        config(self.config.as_deref(), self.data_dir.clone(), storage)
    }

    /// As [`Instance::config`], with the error given back to print rather than printed.
    pub fn load_config(&self, storage: Option<String>) -> Result<signet_server::Config, String> {
        load(self.config.as_deref(), self.data_dir.clone(), storage)
    }
}

/// The configuration a command runs with: the file (if any), then the environment, then
/// the command's own `--data-dir` and `--storage`. A bad file or value prints one line, and
/// the caller exits 2.
pub fn config(
    file: Option<&std::path::Path>,
    data_dir: Option<std::path::PathBuf>,
    storage: Option<String>,
) -> Result<signet_server::Config, std::process::ExitCode> {
    load(file, data_dir, storage).map_err(|e| {
        errln!("signet: {e}");
        std::process::ExitCode::from(2)
    })
}

fn load(file: Option<&std::path::Path>, data_dir: Option<std::path::PathBuf>, storage: Option<String>) -> Result<signet_server::Config, String> {
    let mut cfg = signet_server::Config::load(file).map_err(|e| e.to_string())?;
    if let Some(d) = data_dir {
        cfg.data_dir = d;
    }
    if let Some(s) = storage {
        cfg.storage = Some(s);
    }
    Ok(cfg)
}
