//! `signet restore`: continue each log of a backup (or of a PostgreSQL database restored from a
//! dump) in a new shard, so that serving the copy never gives an index a second history
//! (signet_server::restore).

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    instance: super::Instance,
    /// Where the logs are, if not in the data dir: `postgres://…` for a database restored
    /// from a dump (the data dir is then where the new shards' keys are made).
    #[arg(long)]
    storage: Option<String>,
    /// Restore a data dir that carries no backup mark (restored from a disk snapshot, or
    /// refused appends because its storage is behind what it served).
    #[arg(long)]
    force: bool,
}

pub fn run(args: Args) -> ExitCode {
    let cfg = match args.instance.config(args.storage) {
        Ok(c) => c,
        Err(code) => return code,
    };
    match signet_server::restore::restore(&cfg.data_dir, cfg.storage.as_deref(), args.force, &signet_server::shards::KeyHomes::of(&cfg.keys)) {
        Ok(report) => {
            for r in &report.rotated {
                outln!("{}", signet_server::shards::rotation_report(r));
            }
            for kind in &report.absent {
                outln!("the {} log was never created in this backup: nothing to continue", kind.title());
            }
            if report.marker.source == signet_server::restore::UNMARKED {
                outln!(
                    "restored {} (no backup mark: on your word): each log continues in a new shard with a new key; old entries stay readable \
                     and provable. Start the server; the trust documents list the new keys. Record: {}",
                    cfg.data_dir.display(),
                    report.record.display()
                );
            } else if report.marker.source == signet_server::restore::DATABASE {
                outln!(
                    "restored {}: each log continues in a new shard with a new key, made in {}; old entries stay readable and \
                     provable. Copy the new keys to every other instance's data dir (signet backup of this one) before starting them; \
                     the trust documents list the new keys. Record: {}",
                    report.marker.source,
                    cfg.data_dir.display(),
                    report.record.display()
                );
            } else {
                outln!(
                    "restored {} (a backup of {} taken at {}): each log continues in a new shard with a new key; \
                     old entries stay readable and provable. Start the server; the trust documents list the new keys. Record: {}",
                    cfg.data_dir.display(),
                    report.marker.source,
                    report.marker.taken_at,
                    report.record.display()
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            errln!("signet: {e}");
            ExitCode::FAILURE
        }
    }
}
