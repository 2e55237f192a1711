//! The summary table of a set of results, in the shape of reports 001 and 003: one row per
//! result with offered and achieved throughput, the latency percentiles and the errors.

use crate::result::LoadResult;
use crate::table::{ms, num, Align, Table};

pub const COLUMNS: [(&str, Align); 9] = [
    ("result", Align::Left),
    ("workload", Align::Left),
    ("offered/s", Align::Right),
    ("achieved/s", Align::Right),
    ("p50 ms", Align::Right),
    ("p90 ms", Align::Right),
    ("p99 ms", Align::Right),
    ("p99.9 ms", Align::Right),
    ("errors", Align::Right),
];

/// The cells of one result's row, in [`COLUMNS`] order.
pub fn row(name: &str, r: &LoadResult) -> Vec<String> {
    let l = &r.latency_ms;
    vec![
        name.to_string(),
        r.workload.clone(),
        num(r.offered_rps, 0),
        num(r.achieved_rps, 1),
        ms(l.p50),
        ms(l.p90),
        ms(l.p99),
        ms(l.p999),
        format!("{} ({:.2}%)", num(r.error_count() as f64, 0), r.error_pct()),
    ]
}

/// The markdown table of all results.
pub fn markdown(results: &[(String, &LoadResult)]) -> String {
    let mut t = Table::new(&COLUMNS);
    for (name, r) in results {
        t.row(row(name, r));
    }
    t.render()
}
