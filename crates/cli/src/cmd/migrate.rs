//! `signet migrate`: bring the configured store's schema up to date, and nothing else.
//!
//! `serve` applies the same migrations as it starts; running them alone first lets an
//! operator upgrade the schema once, before rolling new binaries over many instances.

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    instance: super::Instance,
    /// Storage URL: sqlite://PATH or postgres://USER@HOST:PORT/DATABASE.
    #[arg(long)]
    storage: Option<String>,
}

pub fn run(args: Args) -> ExitCode {
    let cfg = match args.instance.config(args.storage) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let url = match cfg.storage_url() {
        Ok(u) => u,
        Err(e) => {
            errln!("signet: {e}");
            return ExitCode::from(2);
        }
    };
    match signet_log::storage::migrate(&url) {
        Ok(applied) if applied.is_empty() => {
            outln!("{}: schema already current", url.display());
            ExitCode::SUCCESS
        }
        Ok(applied) => {
            let list: Vec<String> = applied.iter().map(i32::to_string).collect();
            outln!("{}: applied schema migrations {}", url.display(), list.join(", "));
            ExitCode::SUCCESS
        }
        Err(e) => {
            errln!("signet: {}: {e}", url.display());
            ExitCode::FAILURE
        }
    }
}
