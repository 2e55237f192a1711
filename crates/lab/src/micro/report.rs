//! What `signet bench micro` reports: per benchmark, criterion's median and mean time per
//! iteration with their confidence bounds, the rate of iterations, and the throughput when
//! the benchmark declares work per iteration (bytes or elements).
//!
//! Criterion keeps each benchmark's results in `<dir>/<group>/<function>/new/`:
//! `benchmark.json` (its id and throughput) and `estimates.json` (bootstrap estimates in
//! nanoseconds). Only the fields read here are declared, so other fields may change freely.

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::MicroError;
use crate::crypto::report::thousands;
use crate::table::{Align, Table};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MicroReport {
    /// Whether this was a `--quick` smoke run (rough figures).
    pub quick: bool,
    pub confidence_level: f64,
    pub benchmarks: Vec<BenchResult>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BenchResult {
    pub id: String,
    pub median_ns: f64,
    pub median_lower_ns: f64,
    pub median_upper_ns: f64,
    pub mean_ns: f64,
    pub mean_lower_ns: f64,
    pub mean_upper_ns: f64,
    /// Iterations per second at the median.
    pub ops_per_s: f64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub throughput: Option<Rate>,
}

/// Work per iteration and per second at the median.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Rate {
    /// `bytes` or `elements`.
    pub unit: String,
    pub per_iteration: u64,
    pub per_s: f64,
}

#[derive(Deserialize)]
struct CriterionBenchmark {
    full_id: String,
    throughput: Option<HashMap<String, u64>>,
}

#[derive(Deserialize)]
struct CriterionEstimates {
    mean: Estimate,
    median: Estimate,
}

#[derive(Deserialize)]
struct Estimate {
    point_estimate: f64,
    confidence_interval: Interval,
}

#[derive(Deserialize)]
struct Interval {
    confidence_level: f64,
    lower_bound: f64,
    upper_bound: f64,
}

/// Reads the results of `ids` (in that order) from criterion's output directory `dir`.
pub fn read(dir: &Path, ids: &[&str], quick: bool) -> Result<MicroReport, MicroError> {
    let mut found: HashMap<String, (CriterionBenchmark, CriterionEstimates)> = HashMap::new();
    visit(dir, &mut |new_dir| {
        let load = |name: &str| -> Result<String, MicroError> {
            std::fs::read_to_string(new_dir.join(name)).map_err(|e| MicroError::Results(format!("{}: {e}", new_dir.join(name).display())))
        };
        let bad = |e: serde_json::Error| MicroError::Results(format!("{}: {e}", new_dir.display()));
        let bench: CriterionBenchmark = serde_json::from_str(&load("benchmark.json")?).map_err(bad)?;
        let est: CriterionEstimates = serde_json::from_str(&load("estimates.json")?).map_err(bad)?;
        found.insert(bench.full_id.clone(), (bench, est));
        Ok(())
    })?;
    let mut confidence_level = 0.95;
    let mut benchmarks = Vec::new();
    for id in ids {
        let (bench, est) = found.remove(*id).ok_or_else(|| MicroError::Results(format!("criterion wrote no estimates for {id}")))?;
        confidence_level = est.median.confidence_interval.confidence_level;
        benchmarks.push(result(bench, est));
    }
    Ok(MicroReport { quick, confidence_level, benchmarks })
}

/// Calls `f` on every `new/` directory under `dir` that holds a `benchmark.json`.
fn visit(dir: &Path, f: &mut dyn FnMut(&Path) -> Result<(), MicroError>) -> Result<(), MicroError> {
    let entries = std::fs::read_dir(dir).map_err(|e| MicroError::Results(format!("{}: {e}", dir.display())))?;
    for entry in entries {
        let path = entry.map_err(|e| MicroError::Results(e.to_string()))?.path();
        if !path.is_dir() {
            continue;
        }
        if path.file_name().is_some_and(|n| n == "new") && path.join("benchmark.json").is_file() {
            f(&path)?;
        } else {
            visit(&path, f)?;
        }
    }
    Ok(())
}

fn result(bench: CriterionBenchmark, est: CriterionEstimates) -> BenchResult {
    let median = est.median.point_estimate;
    let ops_per_s = if median > 0.0 { 1e9 / median } else { 0.0 };
    let throughput = bench.throughput.and_then(|t| t.into_iter().next()).map(|(kind, n)| Rate {
        unit: if kind.starts_with("Bytes") { "bytes" } else if kind == "Bits" { "bits" } else { "elements" }.to_string(),
        per_iteration: n,
        per_s: n as f64 * ops_per_s,
    });
    BenchResult {
        id: bench.full_id,
        median_ns: median,
        median_lower_ns: est.median.confidence_interval.lower_bound,
        median_upper_ns: est.median.confidence_interval.upper_bound,
        mean_ns: est.mean.point_estimate,
        mean_lower_ns: est.mean.confidence_interval.lower_bound,
        mean_upper_ns: est.mean.confidence_interval.upper_bound,
        ops_per_s,
        throughput,
    }
}

/// A time in the unit that keeps three significant figures readable.
pub fn duration(ns: f64) -> String {
    match ns {
        n if n < 1e3 => format!("{n:.1} ns"),
        n if n < 1e6 => format!("{:.2} µs", n / 1e3),
        n if n < 1e9 => format!("{:.2} ms", n / 1e6),
        n => format!("{:.2} s", n / 1e9),
    }
}

fn rate(r: &Rate) -> String {
    match r.unit.as_str() {
        "bytes" => format!("{:.0} MiB/s", r.per_s / (1024.0 * 1024.0)),
        unit => format!("{} {unit}/s", thousands(r.per_s)),
    }
}

/// The wider side of the median's confidence interval, relative to the median.
fn spread(b: &BenchResult) -> String {
    let half = (b.median_upper_ns - b.median_ns).max(b.median_ns - b.median_lower_ns);
    if b.median_ns > 0.0 { format!("{:.1}%", 100.0 * half / b.median_ns) } else { "-".into() }
}

impl MicroReport {
    pub fn table(&self) -> String {
        let mut t = Table::new(&[
            ("benchmark", Align::Left),
            ("median", Align::Right),
            (&format!("± ({:.0}% CI)", self.confidence_level * 100.0), Align::Right),
            ("throughput", Align::Right),
            ("ops/s", Align::Right),
        ]);
        for b in &self.benchmarks {
            t.row(vec![
                b.id.clone(),
                duration(b.median_ns),
                spread(b),
                b.throughput.as_ref().map(rate).unwrap_or_default(),
                thousands(b.ops_per_s),
            ]);
        }
        let mut out = t.render();
        if self.quick {
            out.push_str("(--quick: short runs, rough figures)\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes what criterion 0.8 writes for one benchmark.
    fn criterion_dir(dir: &Path, group: &str, func: &str, throughput: &str, median: f64) {
        let new = dir.join(group.replace('/', "_")).join(func).join("new");
        std::fs::create_dir_all(&new).unwrap();
        std::fs::write(
            new.join("benchmark.json"),
            format!(r#"{{"group_id":"{group}","function_id":"{func}","value_str":null,"throughput":{throughput},"full_id":"{group}/{func}","directory_name":"x","title":"t"}}"#),
        )
        .unwrap();
        let est = |p: f64| format!(r#"{{"confidence_interval":{{"confidence_level":0.95,"lower_bound":{},"upper_bound":{}}},"point_estimate":{p},"standard_error":1.0}}"#, p - 1.0, p + 1.0);
        std::fs::write(
            new.join("estimates.json"),
            format!(r#"{{"mean":{},"median":{},"median_abs_dev":{},"slope":null,"std_dev":{}}}"#, est(median + 5.0), est(median), est(1.0), est(1.0)),
        )
        .unwrap();
    }

    #[test]
    fn reads_estimates_in_the_order_asked_with_rates() {
        let dir = tempfile::tempdir().unwrap();
        criterion_dir(dir.path(), "log/merkle", "leaf_hash", r#"{"Bytes":1024}"#, 1000.0);
        criterion_dir(dir.path(), "log/sqlite", "commit_256", r#"{"Elements":256}"#, 4e6);
        criterion_dir(dir.path(), "core/jcs", "hashedrekord", "null", 2000.0);
        let r = read(dir.path(), &["core/jcs/hashedrekord", "log/merkle/leaf_hash", "log/sqlite/commit_256"], true).unwrap();
        let ids: Vec<&str> = r.benchmarks.iter().map(|b| b.id.as_str()).collect();
        assert_eq!(ids, ["core/jcs/hashedrekord", "log/merkle/leaf_hash", "log/sqlite/commit_256"]);
        let leaf = &r.benchmarks[1];
        assert_eq!((leaf.median_ns, leaf.median_lower_ns, leaf.mean_ns), (1000.0, 999.0, 1005.0));
        assert_eq!(leaf.ops_per_s, 1e6);
        assert_eq!(leaf.throughput, Some(Rate { unit: "bytes".into(), per_iteration: 1024, per_s: 1024e6 }));
        assert_eq!(r.benchmarks[2].throughput.as_ref().unwrap().per_s, 64_000.0);
        assert_eq!(r.benchmarks[0].throughput, None);

        let table = r.table();
        assert!(table.contains("| log/merkle/leaf_hash ") && table.contains("977 MiB/s") && table.contains("64,000 elements/s"), "{table}");
        assert!(table.contains("4.00 ms") && table.contains("1.00 µs") && table.contains("1,000,000"), "{table}");
        assert!(table.contains(" 0.1% |") && table.contains("± (95% CI)"), "{table}");
        assert!(read(dir.path(), &["log/tree/push"], false).is_err(), "a benchmark that did not run is an error");
    }
}
