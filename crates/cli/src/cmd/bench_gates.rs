//! `signet bench compare`, `gonogo` and `report`: what the lab does with `bench load --json`
//! results once they are written. Exit codes: 0 ok / GO, 1 regression / NO-GO, 2 usage error.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use signet_lab::gonogo::Criteria;
use signet_lab::{compare, report, LoadResult};

#[derive(clap::Args)]
pub struct CompareArgs {
    /// The baseline result (`signet bench load --json`).
    base: PathBuf,
    /// The result to judge against it.
    new: PathBuf,
    /// Largest allowed rise of p99 latency and fall of achieved throughput, as 10% or 10.
    #[arg(long, default_value = "10%")]
    max_regression: String,
    /// Compare results of different workloads instead of refusing.
    #[arg(long)]
    allow_different_workloads: bool,
}

#[derive(clap::Args)]
pub struct GonogoArgs {
    /// The criteria file (TOML; see docs/lab.md).
    #[arg(long)]
    criteria: PathBuf,
    /// The results to judge (`signet bench load --json`).
    #[arg(required = true)]
    results: Vec<PathBuf>,
}

#[derive(clap::Args)]
pub struct ReportArgs {
    /// The results to report on (`signet bench load --json`).
    #[arg(required = true)]
    results: Vec<PathBuf>,
    /// Write a self-contained HTML page with charts here.
    #[arg(long)]
    html: Option<PathBuf>,
}

fn usage(cmd: &str, why: impl std::fmt::Display) -> ExitCode {
    errln!("signet bench {cmd}: {why}");
    ExitCode::from(2)
}

/// The label of a result in tables: the path as given.
fn label(path: &Path) -> String {
    path.display().to_string()
}

fn read_all(paths: &[PathBuf]) -> Result<Vec<(String, LoadResult)>, signet_lab::result::ReadError> {
    paths.iter().map(|p| LoadResult::read(p).map(|r| (label(p), r))).collect()
}

pub fn compare(a: CompareArgs) -> ExitCode {
    let pct = match compare::parse_pct(&a.max_regression) {
        Ok(p) => p,
        Err(e) => return usage("compare", e),
    };
    let (base, new) = match (LoadResult::read(&a.base), LoadResult::read(&a.new)) {
        (Ok(b), Ok(n)) => (b, n),
        (Err(e), _) | (_, Err(e)) => return usage("compare", e),
    };
    let c = match compare::compare(&base, &new, pct, a.allow_different_workloads) {
        Ok(c) => c,
        Err(e) => return usage("compare", e),
    };
    outln!("compare {}: {} (base) -> {} (new), max regression {pct}%", new.workload, label(&a.base), label(&a.new));
    out!("{}", c.render());
    if c.regressed() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

pub fn gonogo(a: GonogoArgs) -> ExitCode {
    let criteria = match Criteria::from_file(&a.criteria) {
        Ok(c) => c,
        Err(e) => return usage("gonogo", e),
    };
    let results = match read_all(&a.results) {
        Ok(r) => r,
        Err(e) => return usage("gonogo", e),
    };
    let decision = criteria.evaluate(&results);
    out!("{}", decision.render());
    if decision.go {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

pub fn report(a: ReportArgs) -> ExitCode {
    let results = match read_all(&a.results) {
        Ok(r) => r,
        Err(e) => return usage("report", e),
    };
    if let Some(path) = &a.html {
        if let Err(e) = std::fs::write(path, report::html(&results)) {
            return usage("report", format!("--html {}: cannot write: {e}", path.display()));
        }
    }
    out!("{}", report::table(&results));
    if let Some(path) = &a.html {
        outln!("wrote {}", path.display());
    }
    ExitCode::SUCCESS
}
