//! `signet bench micro`: the crates' criterion suites, selected by name and run in-process.
//!
//! The suites are `signet_core::micro::Suite`s, which `cli` gathers from core, log and ca
//! (the lab depends on none of them). Criterion measures and prints as under `cargo bench`;
//! it writes its estimates into a fresh temporary directory, and [`report`] reads them back
//! into one table and JSON. A fresh directory means no comparison with an earlier run.
//!
//! - [`report`]: the results (median, mean, confidence bounds, rates), table and JSON.

pub mod report;

use std::time::Duration;

use signet_core::micro::criterion::Criterion;
use signet_core::micro::{Bench, Suite};

pub use report::{BenchResult, MicroReport};

pub use crate::error::MicroError;

/// How long criterion measures.
#[derive(Debug, Clone, Copy, Default)]
pub struct Config {
    /// A smoke run: 0.1 s of warm-up and 0.3 s of measurement per benchmark, 10 samples,
    /// and a small bootstrap. The figures are rough; the run takes seconds.
    pub quick: bool,
}

/// The benchmarks `selectors` pick, in suite order: a suite's name picks the whole suite,
/// anything else picks the ids that contain it. No selector picks everything. A selector
/// that picks nothing is a usage error listing the valid names.
pub fn select<'a>(suites: &'a [Suite], selectors: &[String]) -> Result<Vec<&'a Bench>, MicroError> {
    let picks = |sel: &str, suite: &Suite, bench: &Bench| suite.name == sel || bench.id.contains(sel);
    if let Some(bad) = selectors.iter().find(|s| !suites.iter().any(|su| su.benches.iter().any(|b| picks(s, su, b)))) {
        let names: Vec<&str> = suites.iter().map(|s| s.name).collect();
        return Err(MicroError::Usage(format!(
            "{bad:?} is neither a suite ({}) nor part of a benchmark id; `signet bench micro --list` lists the ids",
            names.join(", ")
        )));
    }
    Ok(suites
        .iter()
        .flat_map(|su| su.benches.iter().map(move |b| (su, b)))
        .filter(|(su, b)| selectors.is_empty() || selectors.iter().any(|s| picks(s, su, b)))
        .map(|(_, b)| b)
        .collect())
}

/// The suites and their benchmark ids, for `--list`.
pub fn list(suites: &[Suite]) -> String {
    let mut out = String::new();
    for s in suites {
        out.push_str(&format!("{}: {}\n", s.name, s.about));
        for b in &s.benches {
            out.push_str(&format!("  {:<36} {}\n", b.id, b.about));
        }
    }
    out
}

/// Runs `benches` through criterion and reads back what it measured.
pub fn run(benches: &[&Bench], cfg: Config) -> Result<MicroReport, MicroError> {
    let out = tempfile::Builder::new()
        .prefix("signet-micro-")
        .tempdir()
        .map_err(|e| MicroError::Results(format!("creating a directory for criterion: {e}")))?;
    // `output_directory` is public but documented as for testing; the alternative,
    // $CRITERION_HOME, would mean setting an environment variable in a running process.
    let mut c = Criterion::default().output_directory(out.path()).without_plots();
    if cfg.quick {
        c = c
            .warm_up_time(Duration::from_millis(100))
            .measurement_time(Duration::from_millis(300))
            .sample_size(10)
            .nresamples(10_000);
    }
    for b in benches {
        (b.run)(&mut c, b);
    }
    let ids: Vec<&str> = benches.iter().map(|b| b.id).collect();
    report::read(out.path(), &ids, cfg.quick)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nothing(_: &mut Criterion, _: &Bench) {}

    fn suites() -> Vec<Suite> {
        let b = |id| Bench { id, about: "", run: nothing };
        vec![
            Suite { name: "log", about: "", benches: vec![b("log/merkle/leaf_hash"), b("log/tree/push")] },
            Suite { name: "core", about: "", benches: vec![b("core/jcs/hashedrekord")] },
        ]
    }

    fn ids(selectors: &[&str]) -> Result<Vec<&'static str>, MicroError> {
        let suites = Box::leak(Box::new(suites()));
        let sel: Vec<String> = selectors.iter().map(|s| s.to_string()).collect();
        select(suites, &sel).map(|v| v.iter().map(|b| b.id).collect())
    }

    #[test]
    fn selects_by_suite_and_substring_in_suite_order() {
        assert_eq!(ids(&[]).unwrap().len(), 3);
        assert_eq!(ids(&["core"]).unwrap(), ["core/jcs/hashedrekord"]);
        assert_eq!(ids(&["jcs", "push"]).unwrap(), ["log/tree/push", "core/jcs/hashedrekord"]);
        assert_eq!(ids(&["log", "leaf"]).unwrap(), ["log/merkle/leaf_hash", "log/tree/push"], "no duplicates");
    }

    #[test]
    fn a_selector_matching_nothing_names_the_suites() {
        let Err(MicroError::Usage(msg)) = ids(&["core", "nope"]) else { panic!("expected a usage error") };
        assert!(msg.contains("\"nope\"") && msg.contains("log, core"), "{msg}");
    }

    #[test]
    fn list_shows_suites_and_ids() {
        let text = list(&suites());
        assert!(text.starts_with("log: ") && text.contains("  log/tree/push") && text.contains("\ncore: "), "{text}");
    }
}
