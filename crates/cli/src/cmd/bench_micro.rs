//! `signet bench micro`: the criterion suites of core, log, ca, guard and tls, run by name in-process.
//! See `signet_lab::micro`; the suites live with their crates behind the `micro` feature.

use std::path::PathBuf;
use std::process::ExitCode;

use signet_core::micro::Suite;
use signet_lab::micro::{self, Config, MicroError};

#[derive(clap::Args)]
pub struct Args {
    /// Suites (`core`, `log`, `ca`) or parts of benchmark ids (`proof`, `log/sqlite`); none runs everything.
    selectors: Vec<String>,
    /// Print the suites and their benchmark ids, and run nothing.
    #[arg(long)]
    list: bool,
    /// A smoke run: 0.1 s warm-up and 0.3 s measurement per benchmark (rough figures).
    #[arg(long)]
    quick: bool,
    /// Write the machine-readable result here.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Every suite, in the order of the crate graph's leaves first.
fn suites() -> Vec<Suite> {
    vec![signet_core::micro::suite(), signet_log::micro::suite(), signet_ca::micro::suite(), signet_guard::micro::suite(), signet_tls::micro::suite()]
}

pub fn run(a: Args) -> ExitCode {
    let suites = suites();
    if a.list {
        out!("{}", micro::list(&suites));
        return ExitCode::SUCCESS;
    }
    let fail = |e: MicroError| {
        errln!("signet bench micro: {e}");
        ExitCode::from(if matches!(e, MicroError::Usage(_)) { 2 } else { 1 })
    };
    let benches = match micro::select(&suites, &a.selectors) {
        Ok(b) => b,
        Err(e) => return fail(e),
    };
    let report = match micro::run(&benches, Config { quick: a.quick }) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    if !super::bench_json::write_json("micro", a.json.as_deref(), &report) {
        return ExitCode::FAILURE;
    }
    outln!();
    out!("{}", report.table());
    ExitCode::SUCCESS
}
