//! `signet restore`: continue each log of a backup in a new shard, so that serving the copy
//! never gives an index a second history (signet_server::restore).

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    instance: super::Instance,
}

pub fn run(args: Args) -> ExitCode {
    let cfg = match args.instance.config(None) {
        Ok(c) => c,
        Err(code) => return code,
    };
    match signet_server::restore::restore(&cfg.data_dir, cfg.storage.as_deref()) {
        Ok(report) => {
            for r in &report.rotated {
                outln!("{}", signet_server::shards::rotation_report(r));
            }
            for kind in &report.absent {
                outln!("the {} log was never created in this backup: nothing to continue", kind.title());
            }
            outln!(
                "restored {} (a backup of {} taken at {}): each log continues in a new shard with a new key; \
                 old entries stay readable and provable. Start the server; the trust documents list the new keys. Record: {}",
                cfg.data_dir.display(),
                report.marker.source,
                report.marker.taken_at,
                report.record.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            errln!("signet: {e}");
            ExitCode::FAILURE
        }
    }
}
