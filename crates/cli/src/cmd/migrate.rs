//! `signet migrate`: bring the configured store's schema up to date, and nothing else.
//!
//! `serve` applies the same migrations as it starts; running them alone first lets an
//! operator upgrade the schema once, before rolling new binaries over many instances.

use std::process::ExitCode;

use signet_db::migrations::Migration;

/// The PostgreSQL migrations of every crate but the log (whose store applies its own): the
/// guard's tokens and audit chains, and the witness's state.
pub const OTHER_POSTGRES_MIGRATIONS: [&[Migration]; 3] =
    [signet_guard::store::POSTGRES_MIGRATIONS, signet_guard::audit::postgres::MIGRATIONS, signet_witness::store::MIGRATIONS];

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
    match signet_log::storage::migrate(&url, &OTHER_POSTGRES_MIGRATIONS) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every version in signet_db's registry has exactly one crate that declares it.
    #[test]
    fn every_registered_version_is_declared_once() {
        let mut declared: Vec<i32> = signet_log::storage::postgres::MIGRATIONS
            .iter()
            .chain(OTHER_POSTGRES_MIGRATIONS.iter().flat_map(|set| set.iter()))
            .map(|m| m.version)
            .collect();
        declared.sort_unstable();
        let registered: Vec<i32> = signet_db::migrations::REGISTRY.iter().map(|(v, _)| *v).collect();
        assert_eq!(declared, registered);
    }
}
