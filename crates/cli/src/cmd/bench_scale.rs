//! `signet bench scale`: one log of millions of entries on SQLite (issue 18). See
//! `signet_lab::scale`: it fills the log, then measures it in a fresh process (this command
//! again, with `--measure`).

use std::path::PathBuf;
use std::process::ExitCode;

use signet_lab::scale::{self, ScaleSpec};

#[derive(clap::Args)]
pub struct Args {
    /// Directory of the test log; the entries already in it are kept and added to.
    #[arg(long)]
    dir: PathBuf,
    /// Entries the log holds when it is measured.
    #[arg(long, default_value_t = 10_000_000)]
    entries: u64,
    /// Bytes of each entry's body (a Rekor v1 hashedrekord with a public key is ~700; with
    /// a certificate ~1,500).
    #[arg(long, default_value_t = 700)]
    body_bytes: usize,
    /// Lookups of each kind to time.
    #[arg(long, default_value_t = 10_000)]
    lookups: usize,
    /// MiB of tile cache for the opened log (`log.tile_cache_mb`).
    #[arg(long, default_value_t = 64)]
    tile_cache_mb: usize,
    /// Write the machine-readable result here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Measure only, in this process (the filling process runs itself again with this).
    #[arg(long, hide = true)]
    measure: bool,
}

pub fn run(a: Args) -> ExitCode {
    let fail = |e: &dyn std::fmt::Display| {
        errln!("signet bench scale: {e}");
        ExitCode::FAILURE
    };
    let spec = ScaleSpec { dir: a.dir, entries: a.entries, body_bytes: a.body_bytes, lookups: a.lookups, tile_cache_mb: a.tile_cache_mb };
    if !a.measure {
        let done = scale::fill(&spec, &mut |line| errln!("{line}")).and_then(|()| scale::remeasure(&spec, a.json.as_deref()));
        return done.map_or_else(|e| fail(&e), |()| ExitCode::SUCCESS);
    }
    let report = match scale::measure(&spec) {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    out!("{}", report.table());
    if let Some(path) = &a.json {
        let text = serde_json::to_string(&report).expect("report serializes");
        if let Err(e) = std::fs::write(path, text) {
            return fail(&format_args!("{}: {e}", path.display()));
        }
    }
    ExitCode::SUCCESS
}
