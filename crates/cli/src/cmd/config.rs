//! `signet config example`: every option, commented. `signet config env`: the `SIGNET_*`
//! variable of every option. `signet config check`: loads a file (and the `SIGNET_*`
//! environment) and validates it, as `serve` would, without starting anything.

use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum ConfigCmd {
    /// Print every option with its default or an example value, commented.
    Example,
    /// Print the SIGNET_* environment variable of every option, with the key it sets.
    Env,
    /// Load and validate a config file; exit 2 with the reason when it is not valid.
    Check {
        #[arg(long)]
        config: PathBuf,
        /// Check it as `serve --dev` would (no public URL needed).
        #[arg(long)]
        dev: bool,
    },
}

pub fn run(cmd: ConfigCmd) -> ExitCode {
    match cmd {
        ConfigCmd::Example => {
            outln!("{}", signet_server::config::EXAMPLE.trim_end());
            ExitCode::SUCCESS
        }
        ConfigCmd::Env => {
            for (name, path) in signet_server::config::env_keys() {
                outln!("{name:<44} {}", path.join("."));
            }
            ExitCode::SUCCESS
        }
        ConfigCmd::Check { config, dev } => {
            let mut cfg = match super::config(Some(&config), None, None) {
                Ok(c) => c,
                Err(code) => return code,
            };
            cfg.dev |= dev;
            match cfg.validate() {
                Ok(()) => {
                    outln!("{}: valid", config.display());
                    for name in &cfg.unknown_env {
                        errln!("signet config check: warning: {name} names no option and does nothing (`signet config env` lists them)");
                    }
                    if !cfg.dev && cfg.oidc.issuers.is_empty() && cfg.oidc.fulcio_config.is_none() {
                        errln!("signet config check: warning: no OIDC issuer is configured, so the CA can certify no one; add [[oidc.issuers]] or [oidc] fulcio_config (docs/ca.md)");
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    errln!("signet config check: {e}");
                    ExitCode::from(2)
                }
            }
        }
    }
}
