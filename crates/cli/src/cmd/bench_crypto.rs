//! `signet bench crypto`: crypto micro-benchmarks through aws-lc-rs and OpenSSL in one run
//! (report 002's table, measured here). See `signet_lab::crypto`.

use std::path::PathBuf;
use std::process::ExitCode;

use signet_lab::crypto::{self, Config};

#[derive(clap::Args)]
pub struct Args {
    /// Time budget of each repeat of each operation on each backend, in seconds.
    #[arg(long, default_value_t = 1.0)]
    seconds_per_op: f64,
    /// Repeats per operation and backend, interleaved between the backends; the median is reported.
    #[arg(long, default_value_t = 5)]
    repeats: usize,
    /// Run only the cases whose id contains this, e.g. `verify`, `p384`, `aes-128-gcm-seal/1KB`.
    #[arg(long)]
    filter: Option<String>,
    /// Write the machine-readable result here.
    #[arg(long)]
    json: Option<PathBuf>,
}

pub fn run(a: Args) -> ExitCode {
    let cfg = Config { seconds_per_op: a.seconds_per_op, repeats: a.repeats, filter: a.filter };
    let progress = &mut |r: &crypto::report::CaseResult| {
        let ops = |name: &str| r.backends.get(name).map_or(0.0, |b| b.median_ops_s);
        errln!("  {:<24} aws-lc {:>12.0}/s  openssl {:>12.0}/s", r.id, ops("aws-lc"), ops("openssl"));
    };
    let report = match crypto::run(&cfg, progress) {
        Ok(r) => r,
        Err(e) if e.is_usage() => {
            errln!("signet bench crypto: {e}");
            return ExitCode::from(2);
        }
        Err(e) => {
            errln!("signet bench crypto: {e}");
            return ExitCode::FAILURE;
        }
    };
    if !super::bench_json::write_json("crypto", a.json.as_deref(), &report) {
        return ExitCode::FAILURE;
    }
    out!("{}", report.table());
    ExitCode::SUCCESS
}
