//! `signet bench verify`: in-process bundle verification, timed per bundle, optionally side by
//! side with a peer verifier (sigstore-go's `sgverify bench`). See `signet_lab::verify`.

use std::path::PathBuf;
use std::process::ExitCode;

use signet_lab::verify::{self, VerifySpec};

#[derive(clap::Args)]
pub struct Args {
    /// JSON list of cases (see `sgverify manifest`).
    #[arg(long)]
    manifest: PathBuf,
    /// Verifications per bundle.
    #[arg(long, default_value_t = 200)]
    iterations: usize,
    /// A peer's bench binary to run on the same manifest (e.g. .tools/bin/sgverify).
    #[arg(long)]
    peer: Option<PathBuf>,
    /// Seconds each signature check of the crypto floor is timed, per repeat (5 repeats).
    #[arg(long, default_value_t = 0.2)]
    floor_seconds: f64,
    /// Write the machine-readable result here.
    #[arg(long)]
    json: Option<PathBuf>,
}

fn fail(why: impl std::fmt::Display) -> ExitCode {
    errln!("signet bench verify: {why}");
    ExitCode::from(2)
}

pub fn run(a: Args) -> ExitCode {
    let Ok(floor_budget) = std::time::Duration::try_from_secs_f64(a.floor_seconds) else {
        return fail(format!("--floor-seconds {}: expected a non-negative number of seconds", a.floor_seconds));
    };
    let report = match verify::run(&VerifySpec { manifest: a.manifest, iterations: a.iterations, peer: a.peer, floor_budget }) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    out!("{}", report.table());
    if let Some(path) = a.json {
        if let Err(e) = std::fs::write(&path, serde_json::to_string_pretty(&report).expect("serializes")) {
            return fail(format!("{}: {e}", path.display()));
        }
    }
    ExitCode::SUCCESS
}
