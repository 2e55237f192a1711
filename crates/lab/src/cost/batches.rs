//! Per-batch work, counted from the server's own metrics: every batch a log integrates signs
//! one checkpoint, shared among the batch's entries. The `signet_log_batch_entries` histogram
//! of each log, read before and after a run, gives the batches (its count) and the entries
//! they held (its sum); warm-up and measured arrivals alike, so the ratio holds for both.

use std::collections::BTreeMap;
use std::sync::Arc;

use http::Uri;

use crate::conn::{request_bytes, Conn};
use crate::dial::Dialer;

/// Each log's batches and the entries in them, so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Batches(BTreeMap<String, (f64, f64)>);

impl Batches {
    /// Read from the target's `/metrics`; None when it serves no signet metrics there (a
    /// peer), and the floor then counts no batch.
    pub async fn read(dialer: &Arc<Dialer>, target: &Uri) -> Option<Batches> {
        let path = format!("{}/metrics", target.path().trim_end_matches('/'));
        let (status, body) = Conn::new(dialer).fetch(&request_bytes("GET", target, &path, None)).await.ok()?;
        if status != 200 {
            return None;
        }
        Batches::parse(std::str::from_utf8(&body).ok()?)
    }

    /// The `signet_log_batch_entries_count{log="X"} N` and `_sum` lines of a metrics page.
    fn parse(metrics: &str) -> Option<Batches> {
        let mut logs: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        for line in metrics.lines() {
            let Some(rest) = line.strip_prefix("signet_log_batch_entries_") else { continue };
            let (field, rest) = if let Some(r) = rest.strip_prefix("count{") {
                (0, r)
            } else if let Some(r) = rest.strip_prefix("sum{") {
                (1, r)
            } else {
                continue;
            };
            let Some((labels, value)) = rest.split_once("} ") else { continue };
            let Some(log) = labels.strip_prefix("log=\"").and_then(|l| l.strip_suffix('"')) else { continue };
            let Ok(value) = value.trim().parse::<f64>() else { continue };
            let entry = logs.entry(log.to_string()).or_default();
            if field == 0 {
                entry.0 = value;
            } else {
                entry.1 = value;
            }
        }
        (!logs.is_empty()).then_some(Batches(logs))
    }

    /// Checkpoint signatures per operation between two readings, for an operation that puts
    /// one entry into each log it writes to: the sum, over the logs that grew, of batches per
    /// entry.
    pub fn signs_per_op(before: &Batches, after: &Batches) -> f64 {
        after
            .0
            .iter()
            .filter_map(|(log, (count, sum))| {
                let (c0, s0) = before.0.get(log).copied().unwrap_or_default();
                let (batches, entries) = (count - c0, sum - s0);
                (entries >= 1.0 && batches >= 0.0).then(|| batches / entries)
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(v1: (u64, u64), ct: (u64, u64)) -> String {
        format!(
            "# TYPE signet_log_batch_entries histogram\n\
             signet_log_batch_entries_bucket{{log=\"rekor_v1\",le=\"1\"}} 3\n\
             signet_log_batch_entries_sum{{log=\"rekor_v1\"}} {}\n\
             signet_log_batch_entries_count{{log=\"rekor_v1\"}} {}\n\
             signet_log_batch_entries_sum{{log=\"rekor_v2\"}} 0\n\
             signet_log_batch_entries_count{{log=\"rekor_v2\"}} 0\n\
             signet_log_batch_entries_sum{{log=\"ct\"}} {}\n\
             signet_log_batch_entries_count{{log=\"ct\"}} {}\n",
            v1.1, v1.0, ct.1, ct.0
        )
    }

    #[test]
    fn batches_per_entry_are_summed_over_the_logs_that_grew() {
        let before = Batches::parse(&page((10, 100), (4, 40))).unwrap();
        // 20 v1 batches of 1,000 entries (50 each) and 10 CT batches of 1,000 (100 each).
        let after = Batches::parse(&page((30, 1_100), (14, 1_040))).unwrap();
        assert!((Batches::signs_per_op(&before, &after) - (0.02 + 0.01)).abs() < 1e-12);
        assert_eq!(Batches::signs_per_op(&after, &after), 0.0, "no entry, no share");
        assert_eq!(Batches::parse("nginx_up 1\n"), None, "not a signet server");
    }
}
