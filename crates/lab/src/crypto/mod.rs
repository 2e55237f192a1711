//! `signet bench crypto`: crypto micro-benchmarks through aws-lc-rs and through OpenSSL (the
//! system's libssl 3) in the same run, on the same keys and inputs.
//!
//! - [`backend`]: one small trait per kind of operation; [`awslc`] and [`openssl`] implement
//!   them by calling their library.
//! - [`cases`]: what is measured, and how one operation is prepared on a backend.
//! - [`stats`]: warm-up, batches under a time budget, interleaved repeats, median.
//! - [`report`]: the JSON result and the printed table.

pub mod awslc;
pub mod backend;
pub mod cases;
pub mod openssl;
pub mod report;
pub mod stats;

#[cfg(test)]
mod tests;

use std::time::Duration;

use backend::{Backend, BackendError};
use cases::{Fixture, PrepareError};
use report::{CaseResult, Report};
use stats::Timing;

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Time budget of each repeat of each operation on each backend.
    pub seconds_per_op: f64,
    pub repeats: usize,
    /// Run only the cases whose id contains this (case-insensitive).
    pub filter: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config { seconds_per_op: 1.0, repeats: 5, filter: None }
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CryptoError {
    /// Bad options (exit 2): see [`CryptoError::is_usage`].
    #[error("--seconds-per-op must be in (0, 60], got {0}")]
    SecondsPerOp(f64),
    #[error("--repeats must be in 1..=1000, got {0}")]
    Repeats(usize),
    /// `--filter` selects nothing; `cases` are the ids there are.
    #[error("--filter {filter:?} matches no case; the cases are: {}", .cases.join(", "))]
    NoCase { filter: String, cases: Vec<String> },
    /// The run's keys could not be made (exit 1).
    #[error(transparent)]
    Keys(#[from] BackendError),
    /// A backend could not set a case up, or did no real work (exit 1).
    #[error(transparent)]
    Setup(#[from] PrepareError),
}

impl CryptoError {
    /// A bad option rather than a failed run (exit 2, not 1).
    pub fn is_usage(&self) -> bool {
        matches!(self, CryptoError::SecondsPerOp(_) | CryptoError::Repeats(_) | CryptoError::NoCase { .. })
    }
}

/// Both backends, aws-lc first: the order of every repeat.
pub fn backends() -> Vec<Box<dyn Backend>> {
    vec![Box::new(awslc::AwsLc), Box::new(openssl::OpenSsl)]
}

/// Runs the selected cases, calling `progress` after each one with its id.
pub fn run(cfg: &Config, progress: &mut dyn FnMut(&CaseResult)) -> Result<Report, CryptoError> {
    if !(cfg.seconds_per_op > 0.0 && cfg.seconds_per_op <= 60.0) {
        return Err(CryptoError::SecondsPerOp(cfg.seconds_per_op));
    }
    if !(1..=1000).contains(&cfg.repeats) {
        return Err(CryptoError::Repeats(cfg.repeats));
    }
    let cases = cases::select(cases::all(), cfg.filter.as_deref());
    if cases.is_empty() {
        let filter = cfg.filter.clone().unwrap_or_default();
        return Err(CryptoError::NoCase { filter, cases: cases::all().into_iter().map(|c| c.id).collect() });
    }
    let timing = Timing { budget: Duration::from_secs_f64(cfg.seconds_per_op), repeats: cfg.repeats };
    let fixture = Fixture::generate()?;
    let backends = backends();
    let loadavg_start = loadavg();
    let mut results = Vec::new();
    for case in &cases {
        let mut ops = backends.iter().map(|b| case.prepare(b.as_ref(), &fixture)).collect::<Result<Vec<_>, _>>()?;
        let stats = stats::run_interleaved(&mut ops, timing);
        let result = CaseResult::new(case, backends.iter().map(|b| b.name()).zip(stats).collect());
        progress(&result);
        results.push(result);
    }
    Ok(Report {
        seconds_per_op: cfg.seconds_per_op,
        repeats: cfg.repeats,
        threads: 1,
        statistic: "median ops/s of the repeats (min and max beside it)",
        session: report::SESSION,
        message_bytes: cases::MESSAGE_BYTES,
        openssl_version: ::openssl::version::version().to_string(),
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu_model: cpu_model(),
        loadavg_start,
        loadavg_end: loadavg(),
        cases: results,
    })
}

/// The first three fields of /proc/loadavg (Linux only).
pub(crate) fn loadavg() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    Some(text.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}

pub(crate) fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("model name"))?;
    Some(line.split_once(':')?.1.trim().to_string())
}
