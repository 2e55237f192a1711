//! `signet bench gonogo`: a GO/NO-GO decision from load results against a criteria file, in the
//! manner of report 003 (absolute targets, and parity within ±N% of a baseline).
//!
//! The criteria file is TOML; `docs/lab.md` documents it. Each `[[rule]]` names a workload and
//! sets one or more checks; every result of that workload (at `offered_rps`, when given) must
//! pass them. `require = "all"` (the default) means GO when every check passes; `require = "any"`
//! means GO when at least one rule passes all of its checks (report 003: "need ONE of").

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::result::{LoadResult, ReadError};
use crate::table::{ms, num, Align, Table};

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Require {
    #[default]
    All,
    Any,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Criteria {
    #[serde(default)]
    pub require: Require,
    #[serde(default, rename = "rule")]
    pub rules: Vec<Rule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// The workload whose results this rule judges.
    pub workload: String,
    /// A name for the table (default: the workload).
    pub name: Option<String>,
    /// Only results offered at this rate (requests per second).
    pub offered_rps: Option<f64>,
    /// achieved_rps >= min_rps.
    pub min_rps: Option<f64>,
    /// achieved_rps >= min_achieved_pct % of offered_rps.
    pub min_achieved_pct: Option<f64>,
    pub max_p50_ms: Option<f64>,
    pub max_p90_ms: Option<f64>,
    pub max_p99_ms: Option<f64>,
    pub max_p999_ms: Option<f64>,
    /// errors / (ok + errors) * 100 <= max_error_pct.
    pub max_error_pct: Option<f64>,
    pub max_dropped: Option<u64>,
    /// A result file to hold parity with (relative paths are relative to the criteria file).
    pub baseline: Option<PathBuf>,
    /// p99 at most parity_pct % above the baseline's, achieved rps at most parity_pct % below.
    pub parity_pct: Option<f64>,
    #[serde(skip)]
    pub baseline_result: Option<LoadResult>,
}

#[derive(Debug, thiserror::Error)]
pub enum CriteriaError {
    #[error("{path}: cannot read: {why}")]
    Io { path: String, why: std::io::Error },
    #[error("{path}:{line}: {why}")]
    Syntax { path: String, line: usize, why: String },
    #[error("{path}: {why}")]
    Invalid { path: String, why: String },
    #[error("{path}: rule {rule} baseline: {why}")]
    Baseline { path: String, rule: usize, why: ReadError },
}

/// One check of one rule against one result.
#[derive(Debug, Clone)]
pub struct Check {
    /// 1-based index of the rule in the file.
    pub rule: usize,
    pub rule_name: String,
    /// Which result was judged (its label), or `-` when none matched.
    pub result: String,
    pub criterion: String,
    pub measured: String,
    pub pass: bool,
}

#[derive(Debug)]
pub struct Decision {
    pub require: Require,
    pub checks: Vec<Check>,
    /// Labels of the results no rule judged.
    pub unjudged: Vec<String>,
    pub go: bool,
}

impl Criteria {
    /// Reads a criteria file and the baselines it names.
    pub fn from_file(path: &Path) -> Result<Criteria, CriteriaError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|why| CriteriaError::Io { path: p.clone(), why })?;
        let mut c = Criteria::parse(&text, &p)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        for (i, rule) in c.rules.iter_mut().enumerate() {
            if let Some(b) = &rule.baseline {
                let b = if b.is_absolute() { b.clone() } else { dir.join(b) };
                let r = LoadResult::read(&b).map_err(|why| CriteriaError::Baseline {
                    path: p.clone(),
                    rule: i + 1,
                    why,
                })?;
                rule.baseline_result = Some(r);
            }
        }
        Ok(c)
    }

    /// Parses and validates criteria text; `path` names it in errors. Baselines are not read.
    pub fn parse(text: &str, path: &str) -> Result<Criteria, CriteriaError> {
        let c: Criteria = toml::from_str(text).map_err(|e| CriteriaError::Syntax {
            path: path.to_string(),
            line: e.span().map_or(1, |s| text[..s.start.min(text.len())].matches('\n').count() + 1),
            why: e.message().trim().to_string(),
        })?;
        let invalid = |why: String| CriteriaError::Invalid { path: path.to_string(), why };
        if c.rules.is_empty() {
            return Err(invalid(
                "no [[rule]] tables; expected at least one, e.g. [[rule]] workload = \"log-append\" max_p99_ms = 100"
                    .into(),
            ));
        }
        for (i, r) in c.rules.iter().enumerate() {
            let n = i + 1;
            if r.workload.trim().is_empty() {
                return Err(invalid(format!(
                    "rule {n}: workload is empty; expected a workload name such as \"log-append\""
                )));
            }
            for (key, v) in r.numbers() {
                if v.is_some_and(|v| !(v.is_finite() && v >= 0.0)) {
                    return Err(invalid(format!(
                        "rule {n}: {key} = {}; expected a number >= 0",
                        v.unwrap_or_default()
                    )));
                }
            }
            if r.baseline.is_some() != r.parity_pct.is_some() {
                return Err(invalid(format!("rule {n}: baseline and parity_pct go together; set both or neither")));
            }
            if r.checks_set() == 0 {
                return Err(invalid(format!(
                    "rule {n} ({}) has no checks; expected at least one of min_rps, min_achieved_pct, max_p50_ms, max_p90_ms, max_p99_ms, max_p999_ms, max_error_pct, max_dropped, parity_pct",
                    r.workload
                )));
            }
        }
        Ok(c)
    }

    /// Judges `results` (label, result) against every rule.
    pub fn evaluate(&self, results: &[(String, LoadResult)]) -> Decision {
        let mut checks = Vec::new();
        let mut judged = vec![false; results.len()];
        for (i, rule) in self.rules.iter().enumerate() {
            let name = rule.name.clone().unwrap_or_else(|| rule.workload.clone());
            let mut matched = false;
            for (j, (label, r)) in results.iter().enumerate() {
                if !rule.selects(r) {
                    continue;
                }
                matched = true;
                judged[j] = true;
                for (criterion, measured, pass) in rule.judge(r) {
                    checks.push(Check {
                        rule: i + 1,
                        rule_name: name.clone(),
                        result: label.clone(),
                        criterion,
                        measured,
                        pass,
                    });
                }
            }
            if !matched {
                let at = rule.offered_rps.map_or(String::new(), |o| format!(" at {}/s offered", num(o, 0)));
                checks.push(Check {
                    rule: i + 1,
                    rule_name: name,
                    result: "-".into(),
                    criterion: format!("a result of workload {}{at}", rule.workload),
                    measured: "none given".into(),
                    pass: false,
                });
            }
        }
        let go = match self.require {
            Require::All => checks.iter().all(|c| c.pass),
            Require::Any => (1..=self.rules.len()).any(|n| checks.iter().filter(|c| c.rule == n).all(|c| c.pass)),
        };
        let unjudged = results.iter().zip(&judged).filter(|(_, j)| !**j).map(|((l, _), _)| l.clone()).collect();
        Decision { require: self.require, checks, unjudged, go }
    }
}

impl Rule {
    /// The rule's numeric keys by name: the selector first, then the checks.
    fn numbers(&self) -> [(&'static str, Option<f64>); 9] {
        [
            ("offered_rps", self.offered_rps),
            ("min_rps", self.min_rps),
            ("min_achieved_pct", self.min_achieved_pct),
            ("max_p50_ms", self.max_p50_ms),
            ("max_p90_ms", self.max_p90_ms),
            ("max_p99_ms", self.max_p99_ms),
            ("max_p999_ms", self.max_p999_ms),
            ("max_error_pct", self.max_error_pct),
            ("parity_pct", self.parity_pct),
        ]
    }

    fn checks_set(&self) -> usize {
        self.numbers()[1..].iter().filter(|(_, v)| v.is_some()).count() + usize::from(self.max_dropped.is_some())
    }

    fn selects(&self, r: &LoadResult) -> bool {
        r.workload == self.workload && self.offered_rps.is_none_or(|o| (r.offered_rps - o).abs() <= 1e-6 * o.max(1.0))
    }

    /// (criterion, measured, pass) for each check this rule sets.
    fn judge(&self, r: &LoadResult) -> Vec<(String, String, bool)> {
        let mut out = Vec::new();
        let l = &r.latency_ms;
        if let Some(min) = self.min_rps {
            out.push((format!("achieved rps >= {}", num(min, 0)), num(r.achieved_rps, 1), r.achieved_rps >= min));
        }
        if let Some(pct) = self.min_achieved_pct {
            let got = if r.offered_rps > 0.0 { 100.0 * r.achieved_rps / r.offered_rps } else { 0.0 };
            out.push((format!("achieved >= {pct}% of offered"), format!("{got:.1}%"), got >= pct));
        }
        for (label, limit, v) in [
            ("p50", self.max_p50_ms, l.p50),
            ("p90", self.max_p90_ms, l.p90),
            ("p99", self.max_p99_ms, l.p99),
            ("p99.9", self.max_p999_ms, l.p999),
        ] {
            if let Some(max) = limit {
                out.push((format!("{label} <= {} ms", ms(max)), format!("{} ms", ms(v)), v <= max));
            }
        }
        if let Some(max) = self.max_error_pct {
            let got = r.error_pct();
            out.push((format!("errors <= {max}%"), format!("{got:.2}% ({})", r.error_count()), got <= max));
        }
        if let Some(max) = self.max_dropped {
            out.push((format!("dropped <= {max}"), r.dropped.to_string(), r.dropped <= max));
        }
        if let (Some(pct), Some(b)) = (self.parity_pct, &self.baseline_result) {
            let max_p99 = b.latency_ms.p99 * (1.0 + pct / 100.0);
            let min_rps = b.achieved_rps * (1.0 - pct / 100.0);
            out.push((
                format!("p99 <= {} ms (baseline {} ms +{pct}%)", ms(max_p99), ms(b.latency_ms.p99)),
                format!("{} ms", ms(l.p99)),
                l.p99 <= max_p99,
            ));
            out.push((
                format!("achieved rps >= {} (baseline {} -{pct}%)", num(min_rps, 1), num(b.achieved_rps, 1)),
                num(r.achieved_rps, 1),
                r.achieved_rps >= min_rps,
            ));
        }
        out
    }
}

impl Decision {
    pub fn failed(&self) -> usize {
        self.checks.iter().filter(|c| !c.pass).count()
    }

    /// The table of checks, then `GO` or `NO-GO` with the reason.
    pub fn render(&self) -> String {
        let mut t = Table::new(&[
            ("rule", Align::Left),
            ("result", Align::Left),
            ("criterion", Align::Left),
            ("measured", Align::Right),
            ("verdict", Align::Left),
        ]);
        for c in &self.checks {
            let verdict = if c.pass { "pass" } else { "FAIL" };
            t.row(vec![
                format!("{} {}", c.rule, c.rule_name),
                c.result.clone(),
                c.criterion.clone(),
                c.measured.clone(),
                verdict.into(),
            ]);
        }
        let mut out = t.render();
        for u in &self.unjudged {
            out.push_str(&format!("note: no rule judges {u}\n"));
        }
        let (n, failed) = (self.checks.len(), self.failed());
        out.push_str(&match (self.go, self.require) {
            (true, Require::All) => format!("GO: all {n} checks pass\n"),
            (true, Require::Any) => {
                format!("GO: at least one rule passes all its checks ({failed} of {n} checks fail)\n")
            }
            (false, Require::All) => format!("NO-GO: {failed} of {n} checks fail\n"),
            (false, Require::Any) => format!("NO-GO: no rule passes all its checks ({failed} of {n} checks fail)\n"),
        });
        out
    }
}

#[cfg(test)]
mod tests;
