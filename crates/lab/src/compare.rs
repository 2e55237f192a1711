//! `signet bench compare`: a regression gate between two results of one workload, as report
//! 001's regression detector proposes (p99 degraded by more than a threshold), extended to
//! throughput and errors.
//!
//! Gated: p99 latency up by more than the threshold, achieved throughput down by more than the
//! threshold, and errors where the base had none. The other rows are shown for context only.

use crate::result::LoadResult;
use crate::table::{ms, num, Align, Table};

/// Floating-point slack, so that a change of exactly the threshold is not a regression.
const EPSILON_PCT: f64 = 1e-9;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Within the threshold.
    Ok,
    /// Improved by more than the threshold.
    Better,
    Regressed,
    /// Not gated.
    Info,
}

impl Verdict {
    fn label(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Better => "better",
            Verdict::Regressed => "REGRESSION",
            Verdict::Info => "-",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Row {
    pub metric: &'static str,
    pub base: String,
    pub new: String,
    /// `None` when the base is zero and the new value is not.
    pub change_pct: Option<f64>,
    pub verdict: Verdict,
}

#[derive(Debug, Clone)]
pub struct Comparison {
    pub max_regression_pct: f64,
    pub rows: Vec<Row>,
    /// One sentence per regression.
    pub regressions: Vec<String>,
    /// Things to keep in mind when reading the table (different offered rates, ...).
    pub notes: Vec<String>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CompareError {
    #[error("the results are of different workloads: base {base:?}, new {new:?}; compare two runs of one workload, or pass --allow-different-workloads")]
    DifferentWorkloads { base: String, new: String },
    #[error("--max-regression {0:?}: expected a percentage such as 10% or 10 (0 to 1000)")]
    BadThreshold(String),
}

/// Parses `10%` or `10` into 10.0.
pub fn parse_pct(text: &str) -> Result<f64, CompareError> {
    let bare = text.trim().trim_end_matches('%').trim();
    match bare.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=1000.0).contains(&v) => Ok(v),
        _ => Err(CompareError::BadThreshold(text.to_string())),
    }
}

/// The relative change from `base` to `new` in percent.
pub fn change_pct(base: f64, new: f64) -> Option<f64> {
    if base == 0.0 {
        return (new == 0.0).then_some(0.0);
    }
    Some((new - base) / base * 100.0)
}

pub fn compare(
    base: &LoadResult,
    new: &LoadResult,
    max_regression_pct: f64,
    allow_different_workloads: bool,
) -> Result<Comparison, CompareError> {
    let mut notes = Vec::new();
    if base.workload != new.workload {
        if !allow_different_workloads {
            return Err(CompareError::DifferentWorkloads { base: base.workload.clone(), new: new.workload.clone() });
        }
        notes.push(format!("different workloads compared: {} (base) and {} (new)", base.workload, new.workload));
    }
    if change_pct(base.offered_rps, new.offered_rps).is_none_or(|c| c.abs() > EPSILON_PCT) {
        notes.push(format!(
            "offered rates differ ({}/s and {}/s); throughput and latency are compared as measured",
            num(base.offered_rps, 0),
            num(new.offered_rps, 0)
        ));
    }
    if base.transport() != new.transport() {
        notes.push(format!("transports differ ({} and {}); the figures include that difference", base.transport(), new.transport()));
    }
    let mut c = Comparison { max_regression_pct, rows: Vec::new(), regressions: Vec::new(), notes };
    let pct = max_regression_pct;
    let (bl, nl) = (&base.latency_ms, &new.latency_ms);

    c.info("offered rps", base.offered_rps, new.offered_rps, |v| num(v, 0));
    // Throughput: lower is worse.
    let change = change_pct(base.achieved_rps, new.achieved_rps);
    let verdict = match change {
        Some(ch) if base.achieved_rps > 0.0 && ch < -(pct + EPSILON_PCT) => {
            c.regressions.push(format!(
                "achieved throughput fell {:.1}% ({}/s -> {}/s), more than the {pct}% allowed",
                -ch,
                num(base.achieved_rps, 1),
                num(new.achieved_rps, 1)
            ));
            Verdict::Regressed
        }
        Some(ch) if ch > pct + EPSILON_PCT => Verdict::Better,
        None => Verdict::Better,
        _ => Verdict::Ok,
    };
    c.push("achieved rps", num(base.achieved_rps, 1), num(new.achieved_rps, 1), change, verdict);

    c.info("p50 ms", bl.p50, nl.p50, ms);
    c.info("p90 ms", bl.p90, nl.p90, ms);
    // p99: higher is worse.
    let change = change_pct(bl.p99, nl.p99);
    let verdict = match change {
        Some(ch) if ch > pct + EPSILON_PCT => {
            c.regressions.push(format!(
                "p99 latency rose {ch:.1}% ({} ms -> {} ms), more than the {pct}% allowed",
                ms(bl.p99),
                ms(nl.p99)
            ));
            Verdict::Regressed
        }
        Some(ch) if ch < -(pct + EPSILON_PCT) => Verdict::Better,
        // The base had no successful responses, so it has no latency to compare against.
        None => Verdict::Info,
        _ => Verdict::Ok,
    };
    c.push("p99 ms", ms(bl.p99), ms(nl.p99), change, verdict);
    c.info("p99.9 ms", bl.p999, nl.p999, ms);

    // Errors: any where there were none is a regression; otherwise shown for context.
    let (be, ne) = (base.error_count(), new.error_count());
    let verdict = if be == 0 && ne > 0 {
        let kinds: Vec<String> = new.errors.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        c.regressions.push(format!("errors appeared: none in the base, {ne} now ({})", kinds.join(", ")));
        Verdict::Regressed
    } else if be == 0 {
        Verdict::Ok
    } else {
        Verdict::Info
    };
    let errors = |r: &LoadResult| format!("{} ({:.2}%)", num(r.error_count() as f64, 0), r.error_pct());
    c.push("errors", errors(base), errors(new), change_pct(be as f64, ne as f64), verdict);
    c.info("dropped", base.dropped as f64, new.dropped as f64, |v| num(v, 0));
    Ok(c)
}

impl Comparison {
    pub fn regressed(&self) -> bool {
        !self.regressions.is_empty()
    }

    fn push(&mut self, metric: &'static str, base: String, new: String, change_pct: Option<f64>, verdict: Verdict) {
        self.rows.push(Row { metric, base, new, change_pct, verdict });
    }

    fn info(&mut self, metric: &'static str, base: f64, new: f64, fmt: impl Fn(f64) -> String) {
        self.push(metric, fmt(base), fmt(new), change_pct(base, new), Verdict::Info);
    }

    /// The table, the notes, and the verdict: `REGRESSION: ...` lines, or one line saying none.
    pub fn render(&self) -> String {
        let mut t = Table::new(&[
            ("metric", Align::Left),
            ("base", Align::Right),
            ("new", Align::Right),
            ("change", Align::Right),
            ("verdict", Align::Left),
        ]);
        for r in &self.rows {
            let change = r.change_pct.map_or("new".to_string(), |c| format!("{c:+.1}%"));
            t.row(vec![r.metric.to_string(), r.base.clone(), r.new.clone(), change, r.verdict.label().to_string()]);
        }
        let mut out = t.render();
        for n in &self.notes {
            out.push_str(&format!("note: {n}\n"));
        }
        if self.regressions.is_empty() {
            out.push_str(&format!("no regression beyond {}%\n", self.max_regression_pct));
        }
        for r in &self.regressions {
            out.push_str(&format!("REGRESSION: {r}\n"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::result;

    fn verdict(c: &Comparison, metric: &str) -> Verdict {
        c.rows.iter().find(|r| r.metric == metric).expect("row").verdict
    }

    #[test]
    fn threshold_accepts_percent_sign_or_bare_number() {
        assert_eq!(parse_pct("10%"), Ok(10.0));
        assert_eq!(parse_pct("10"), Ok(10.0));
        assert_eq!(parse_pct(" 2.5 % "), Ok(2.5));
        assert_eq!(parse_pct("ten"), Err(CompareError::BadThreshold("ten".into())));
        assert!(parse_pct("-5%").is_err());
    }

    #[test]
    fn p99_exactly_at_the_threshold_passes_and_just_above_fails() {
        let base = result("log-append", 1000.0, 20.0, &[]);
        let at = compare(&base, &result("log-append", 1000.0, 22.0, &[]), 10.0, false).unwrap();
        assert!(!at.regressed(), "{}", at.render());
        assert_eq!(verdict(&at, "p99 ms"), Verdict::Ok);
        let above = compare(&base, &result("log-append", 1000.0, 22.01, &[]), 10.0, false).unwrap();
        assert!(above.regressed());
        assert_eq!(verdict(&above, "p99 ms"), Verdict::Regressed);
        assert!(
            above.render().contains("REGRESSION: p99 latency rose 10.1% (20.00 ms -> 22.01 ms)"),
            "{}",
            above.render()
        );
    }

    #[test]
    fn throughput_drop_at_the_threshold_passes_and_beyond_fails() {
        let base = result("log-append", 1000.0, 20.0, &[]);
        let at = compare(&base, &result("log-append", 900.0, 20.0, &[]), 10.0, false).unwrap();
        assert!(!at.regressed(), "{}", at.render());
        let below = compare(&base, &result("log-append", 899.0, 20.0, &[]), 10.0, false).unwrap();
        assert_eq!(verdict(&below, "achieved rps"), Verdict::Regressed);
        assert!(below.render().contains("achieved throughput fell 10.1%"), "{}", below.render());
    }

    #[test]
    fn improvements_are_marked_better_and_pass() {
        let base = result("log-append", 1000.0, 20.0, &[]);
        let c = compare(&base, &result("log-append", 1500.0, 10.0, &[]), 10.0, false).unwrap();
        assert!(!c.regressed());
        assert_eq!(verdict(&c, "achieved rps"), Verdict::Better);
        assert_eq!(verdict(&c, "p99 ms"), Verdict::Better);
        assert!(c.render().ends_with("no regression beyond 10%\n"));
    }

    #[test]
    fn errors_where_there_were_none_are_a_regression() {
        let base = result("log-append", 1000.0, 20.0, &[]);
        let c = compare(&base, &result("log-append", 1000.0, 20.0, &[("status_500", 3)]), 10.0, false).unwrap();
        assert_eq!(verdict(&c, "errors"), Verdict::Regressed);
        assert!(c.render().contains("errors appeared: none in the base, 3 now (status_500: 3)"), "{}", c.render());
        // A base that already had errors: shown, not gated.
        let noisy = result("log-append", 1000.0, 20.0, &[("timeout", 1)]);
        let c = compare(&noisy, &result("log-append", 1000.0, 20.0, &[("timeout", 2)]), 10.0, false).unwrap();
        assert!(!c.regressed());
    }

    #[test]
    fn different_workloads_are_refused_unless_allowed() {
        let a = result("log-append", 1000.0, 20.0, &[]);
        let b = result("log-read", 1000.0, 20.0, &[]);
        let err = compare(&a, &b, 10.0, false).unwrap_err();
        assert!(err.to_string().contains("different workloads: base \"log-append\", new \"log-read\""), "{err}");
        let c = compare(&a, &b, 10.0, true).unwrap();
        assert!(c.notes.iter().any(|n| n.contains("different workloads")));
    }

    #[test]
    fn different_transports_are_noted() {
        let a = result("log-append", 1000.0, 20.0, &[]);
        assert!(compare(&a, &a.clone(), 10.0, false).unwrap().notes.is_empty());
        let mut b = a.clone();
        (b.http, b.new_connection) = ("2".into(), true);
        let c = compare(&a, &b, 10.0, false).unwrap();
        assert_eq!(
            c.notes,
            vec!["transports differ (HTTP/1.1 plain, keep-alive and HTTP/2 plain, new connections); the figures include that difference"]
        );
    }
}
