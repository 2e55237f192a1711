//! `signet bench monitor`: how fast `signet monitor` catches up with a long log (issue 16).
//! See `signet_lab::monitor`.

use std::path::PathBuf;
use std::process::ExitCode;

use signet_lab::monitor::{self, MonitorSpec};

#[derive(clap::Args)]
pub struct Args {
    /// Entries in the log the monitor catches up with.
    #[arg(long, default_value_t = 1_000_000)]
    entries: u64,
    /// Entries added after the catch-up, for the second (following) measurement.
    #[arg(long, default_value_t = 20_000)]
    grow: u64,
    /// Directory of the test log; an existing log is kept and added to.
    #[arg(long, default_value = "target/bench-monitor")]
    dir: PathBuf,
    /// Certificates the entries are signed under.
    #[arg(long, default_value_t = 8)]
    certs: usize,
    /// The monitor's worker threads (default: as `signet monitor`).
    #[arg(long)]
    workers: Option<usize>,
    /// Write the machine-readable result here.
    #[arg(long)]
    json: Option<PathBuf>,
}

pub fn run(a: Args) -> ExitCode {
    let fail = |e: &dyn std::fmt::Display| {
        errln!("signet bench monitor: {e}");
        ExitCode::FAILURE
    };
    let spec = MonitorSpec { entries: a.entries, grow: a.grow, dir: a.dir, certs: a.certs, workers: a.workers };
    let report = match monitor::run(&spec, &mut |line| errln!("{line}")) {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    if let Some(path) = &a.json {
        let text = serde_json::to_vec_pretty(&report).expect("report serializes");
        if let Err(e) = std::fs::write(path, text) {
            return fail(&format_args!("{}: {e}", path.display()));
        }
    }
    out!("{}", report.table());
    ExitCode::SUCCESS
}
