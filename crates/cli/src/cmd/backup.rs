//! `signet backup`: a consistent copy of a data dir, taken while the server runs.

use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    instance: super::Instance,
    /// Where to write the backup: a directory that does not exist yet. Served as it is, it
    /// answers reads and refuses appends; `signet restore --data-dir OUT` makes it take them.
    #[arg(long)]
    out: PathBuf,
}

pub fn run(args: Args) -> ExitCode {
    let cfg = match args.instance.config(None) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let postgres = matches!(cfg.storage_url(), Ok(signet_log::storage::StorageUrl::Postgres(_)));
    match signet_server::backup::backup(&cfg.data_dir, &args.out) {
        Ok(report) => {
            for db in &report.databases {
                outln!("database {}", db.display());
            }
            outln!("backed up {} to {} ({} databases, {} other files)", cfg.data_dir.display(), args.out.display(), report.databases.len(), report.files);
            outln!("to serve it in place of the original: signet restore --data-dir {} (each log continues in a new shard)", args.out.display());
            if postgres {
                outln!("the logs are in PostgreSQL: back them up with pg_dump (docs/scaling.md, \"Backups\")");
            }
            ExitCode::SUCCESS
        }
        Err(e @ (signet_server::backup::BackupError::Exists(_) | signet_server::backup::BackupError::NoDataDir(_))) => {
            errln!("signet: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            errln!("signet: {e}");
            ExitCode::FAILURE
        }
    }
}
