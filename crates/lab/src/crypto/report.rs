//! The result of `signet bench crypto`: the JSON written by `--json` and the printed table.

use std::collections::BTreeMap;

use serde::Serialize;

use super::cases::{size_label, Case, Reference};
use super::stats::Stats;

/// What a "session" is in the AEAD rows.
pub const SESSION: &str = "AES-GCM session = one key per case and backend; its key schedule (round keys, GHASH table) \
is built once before warm-up, then each op seals one record of the given size (5 bytes of AAD, fresh nonce = IV XOR \
record counter, as in TLS 1.3)";

#[derive(Clone, Debug, Serialize)]
pub struct BackendResult {
    pub median_ops_s: f64,
    pub min_ops_s: f64,
    pub max_ops_s: f64,
    /// One figure per repeat, in the order measured.
    pub repeats_ops_s: Vec<f64>,
    /// Median throughput of the input, for sized cases (10^6 bytes per second).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub median_mb_s: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CaseResult {
    pub id: String,
    pub op: String,
    pub size_bytes: Option<usize>,
    /// Keyed by backend name: `aws-lc`, `openssl`.
    pub backends: BTreeMap<String, BackendResult>,
    /// Median aws-lc ops/s over median OpenSSL ops/s.
    pub ratio_awslc_over_openssl: Option<f64>,
    pub reference: Option<Reference>,
}

impl CaseResult {
    /// Pairs each backend's name with its stats.
    pub fn new(case: &Case, results: Vec<(&'static str, Stats)>) -> CaseResult {
        let mb = |ops: f64| case.size.map(|s| ops * s as f64 / 1e6);
        let backends: BTreeMap<String, BackendResult> = results
            .into_iter()
            .map(|(name, s)| {
                let r = BackendResult {
                    median_ops_s: s.median,
                    min_ops_s: s.min,
                    max_ops_s: s.max,
                    median_mb_s: mb(s.median),
                    repeats_ops_s: s.samples,
                };
                (name.to_string(), r)
            })
            .collect();
        let ratio = match (backends.get("aws-lc"), backends.get("openssl")) {
            (Some(a), Some(o)) if o.median_ops_s > 0.0 => Some(a.median_ops_s / o.median_ops_s),
            _ => None,
        };
        CaseResult {
            id: case.id.clone(),
            op: case.op.clone(),
            size_bytes: case.size,
            backends,
            ratio_awslc_over_openssl: ratio,
            reference: case.reference.clone(),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub seconds_per_op: f64,
    pub repeats: usize,
    pub threads: usize,
    pub statistic: &'static str,
    pub session: &'static str,
    pub message_bytes: usize,
    pub openssl_version: String,
    pub cpus: usize,
    pub cpu_model: Option<String>,
    /// `/proc/loadavg` before and after the run: how busy the machine was.
    pub loadavg_start: Option<String>,
    pub loadavg_end: Option<String>,
    pub cases: Vec<CaseResult>,
}

/// 1234567.8 → "1,234,568".
pub fn thousands(x: f64) -> String {
    let digits = format!("{:.0}", x.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn mb_s(x: Option<f64>) -> String {
    match x {
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
        None => String::new(),
    }
}

impl Report {
    /// The table printed last: a Markdown table, aligned for the terminal.
    pub fn table(&self) -> String {
        let head = ["op", "size", "aws-lc ops/s", "openssl ops/s", "aws-lc/openssl", "aws-lc MB/s", "openssl MB/s", "spread", "report 002 (Python/OpenSSL)"];
        let mut rows: Vec<Vec<String>> = vec![head.iter().map(|s| s.to_string()).collect()];
        for c in &self.cases {
            let b = |name: &str| c.backends.get(name);
            let ops = |name: &str| b(name).map_or("-".into(), |r| thousands(r.median_ops_s));
            let spread = c
                .backends
                .values()
                .map(|r| if r.median_ops_s > 0.0 { (r.max_ops_s - r.min_ops_s) / r.median_ops_s } else { 0.0 })
                .fold(0.0, f64::max);
            rows.push(vec![
                c.op.clone(),
                c.size_bytes.map(size_label).unwrap_or_default(),
                ops("aws-lc"),
                ops("openssl"),
                c.ratio_awslc_over_openssl.map_or("-".into(), |r| format!("{r:.2}x")),
                mb_s(b("aws-lc").and_then(|r| r.median_mb_s)),
                mb_s(b("openssl").and_then(|r| r.median_mb_s)),
                format!("{:.0}%", spread * 100.0),
                c.reference.as_ref().map(|r| thousands(r.ops_per_s)).unwrap_or_default(),
            ]);
        }
        let widths: Vec<usize> = (0..head.len()).map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
        let mut s = String::new();
        for (n, row) in rows.iter().enumerate() {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (cell, w))| if i < 2 { format!("{cell:<w$}") } else { format!("{cell:>w$}") })
                .collect();
            s.push_str(&format!("| {} |\n", cells.join(" | ")));
            if n == 0 {
                let rule: Vec<String> = widths.iter().enumerate().map(|(i, w)| if i < 2 { "-".repeat(w + 2) } else { format!("{}:", "-".repeat(w + 1)) }).collect();
                s.push_str(&format!("|{}|\n", rule.join("|")));
            }
        }
        s.push_str(&format!(
            "median of {} repeats of {} s per op and backend, interleaved (aws-lc, openssl, ...); single thread; \
spread = (max - min) / median of the noisier backend\n",
            self.repeats, self.seconds_per_op
        ));
        s.push_str(&format!("sign/verify: {}-byte message, hashing included; {}\n", self.message_bytes, SESSION));
        s.push_str(&format!("{}; {} CPUs; load average {} at start, {} at end\n",
            self.openssl_version,
            self.cpus,
            self.loadavg_start.as_deref().unwrap_or("?"),
            self.loadavg_end.as_deref().unwrap_or("?")));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::cases;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0.4), "0");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(1000.0), "1,000");
        assert_eq!(thousands(64_695.07), "64,695");
        assert_eq!(thousands(1_234_567.8), "1,234,568");
    }

    #[test]
    fn case_result_has_medians_ratio_and_throughput() {
        let case = cases::all().into_iter().find(|c| c.id == "sha256/1KB").unwrap();
        let r = CaseResult::new(&case, vec![
            ("aws-lc", Stats::of(vec![300.0, 100.0, 200.0]).unwrap()),
            ("openssl", Stats::of(vec![100.0, 50.0, 150.0]).unwrap()),
        ]);
        let a = &r.backends["aws-lc"];
        assert_eq!((a.median_ops_s, a.min_ops_s, a.max_ops_s), (200.0, 100.0, 300.0));
        assert_eq!(a.median_mb_s, Some(200.0 * 1024.0 / 1e6));
        assert_eq!(r.ratio_awslc_over_openssl, Some(2.0));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["backends"]["openssl"]["repeats_ops_s"], serde_json::json!([100.0, 50.0, 150.0]));
    }

    #[test]
    fn table_is_a_markdown_table_with_one_row_per_case() {
        let case = cases::all().into_iter().find(|c| c.id == "rsa2048-verify").unwrap();
        let result = CaseResult::new(&case, vec![
            ("aws-lc", Stats::of(vec![30_000.0, 32_000.0, 31_000.0]).unwrap()),
            ("openssl", Stats::of(vec![28_000.0]).unwrap()),
        ]);
        let report = Report {
            seconds_per_op: 1.0,
            repeats: 3,
            threads: 1,
            statistic: "median",
            session: SESSION,
            message_bytes: 64,
            openssl_version: "OpenSSL 3".into(),
            cpus: 2,
            cpu_model: None,
            loadavg_start: None,
            loadavg_end: None,
            cases: vec![result],
        };
        let table = report.table();
        let lines: Vec<&str> = table.lines().collect();
        let cells = |l: &str| l.trim_matches('|').split('|').map(str::trim).map(str::to_string).collect::<Vec<_>>();
        assert_eq!(cells(lines[0])[0], "op");
        assert!(cells(lines[1]).iter().all(|c| c.chars().all(|ch| ch == '-' || ch == ':')), "rule row: {}", lines[1]);
        assert_eq!(lines[0].len(), lines[1].len());
        assert_eq!(lines[0].len(), lines[2].len());
        let row = cells(lines[2]);
        assert_eq!(row[0], "RSA-2048 PKCS#1 v1.5 SHA-256 verify");
        assert_eq!((row[2].as_str(), row[3].as_str(), row[4].as_str()), ("31,000", "28,000", "1.11x"));
        assert_eq!((row[7].as_str(), row[8].as_str()), ("6%", "64,695"));
    }
}
