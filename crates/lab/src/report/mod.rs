//! `signet bench report`: a self-contained HTML page with charts, and a markdown summary table,
//! from one or more `signet bench load --json` results.
//!
//! - [`summary`]: the table (reports 001/003 shape), printed and embedded in the page.
//! - `charts`: one plotters SVG per chart.
//! - `html`: the page around them.
//! - `escape`: text made safe for both.

mod charts;
mod escape;
mod html;
pub mod summary;

use crate::result::LoadResult;
use crate::table::num;

pub use escape::escape;

/// Chart names: `workload @ N/s`, with the file label added where two results would share one.
pub fn chart_names(results: &[(String, LoadResult)]) -> Vec<String> {
    let base: Vec<String> =
        results.iter().map(|(_, r)| format!("{} @ {}/s", r.workload, num(r.offered_rps, 0))).collect();
    base.iter()
        .zip(results)
        .map(
            |(name, (file, _))| {
                if base.iter().filter(|b| *b == name).count() > 1 {
                    format!("{name} ({file})")
                } else {
                    name.clone()
                }
            },
        )
        .collect()
}

/// The HTML page for `results` (file label, result).
pub fn html(results: &[(String, LoadResult)]) -> String {
    let names = chart_names(results);
    let rows: Vec<(String, String, &LoadResult)> =
        results.iter().zip(names).map(|((file, r), name)| (file.clone(), name, r)).collect();
    html::page(&rows)
}

/// A self-contained page of a lab's markdown output (tables and lines), as `bench cost --html`
/// writes it.
pub fn tables_html(title: &str, markdown: &str) -> String {
    html::tables_page(title, markdown)
}

/// The markdown summary table for `results` (file label, result).
pub fn table(results: &[(String, LoadResult)]) -> String {
    let rows: Vec<(String, &LoadResult)> = results.iter().map(|(f, r)| (f.clone(), r)).collect();
    summary::markdown(&rows)
}

#[cfg(test)]
mod tests {
    use hdrhistogram::Histogram;

    #[test]
    fn a_markdown_table_becomes_an_html_table_and_lines_paragraphs() {
        let md = "| Operation | µs |\n|---|---|\n| v1-append | 180.0 |\n| <b> | 1 |\n\nThe floor's primitives: P-256 & more.\n";
        let page = super::tables_html("signet bench cost", md);
        assert!(page.starts_with("<!DOCTYPE html>") && page.contains("<title>signet bench cost</title>"), "{page}");
        assert!(page.contains("<table>\n<tr><th>Operation</th><th>µs</th></tr>\n<tr><td>v1-append</td><td>180.0</td></tr>\n<tr><td>&lt;b&gt;</td><td>1</td></tr>\n</table>\n"), "{page}");
        assert!(page.contains("<p>The floor&#39;s primitives: P-256 &amp; more.</p>"), "{page}");
        assert!(!page.contains("---"), "{page}");
        assert!(page.ends_with("</body>\n</html>\n"));
    }

    use super::*;
    use crate::fixture::result;
    use crate::result::{Bucket, Second};

    /// A result whose percentiles, per-second series and histogram come from recorded latencies.
    fn measured(workload: &str, offered: f64, latencies_us: &[u64]) -> LoadResult {
        let mut h = Histogram::<u64>::new_with_bounds(1, 120_000_000, 3).unwrap();
        let mut r = result(workload, 0.0, 0.0, &[]);
        for (i, chunk) in latencies_us.chunks(latencies_us.len().div_ceil(3)).enumerate() {
            let mut sec = Histogram::<u64>::new_with_bounds(1, 120_000_000, 3).unwrap();
            for &us in chunk {
                h.record(us).unwrap();
                sec.record(us).unwrap();
            }
            let l = crate::result::Latency::from_histogram(&sec);
            r.per_second.push(Second { t: i as u64, ok: sec.len(), p50_ms: l.p50, p99_ms: l.p99 });
        }
        r.offered_rps = offered;
        r.ok = h.len();
        r.achieved_rps = r.ok as f64 / 3.0;
        r.latency_ms = crate::result::Latency::from_histogram(&h);
        r.histogram = Bucket::from_histogram(&h);
        r
    }

    fn latencies(n: u64) -> Vec<u64> {
        // 0.2 ms to ~60 ms, skewed towards the low end.
        (0..n).map(|i| 200 + (i * i * 37) % 60_000).collect()
    }

    #[test]
    fn histogram_buckets_sum_to_the_ok_count_and_cover_every_latency() {
        let r = measured("log-append", 1000.0, &latencies(5000));
        assert_eq!(r.histogram.iter().map(|b| b.count).sum::<u64>(), r.ok);
        assert!(r.histogram.windows(2).all(|w| w[0].le_ms < w[1].le_ms), "buckets must be ascending");
        // The last bucket's bound is at or above the slowest response; the ratio between bounds is 10^(1/5).
        assert!(r.histogram.last().unwrap().le_ms >= r.latency_ms.max);
        let ratio = r.histogram[1].le_ms / r.histogram[0].le_ms;
        assert!((ratio - 10f64.powf(0.2)).abs() < 0.01, "{ratio}");
    }

    #[test]
    fn html_has_an_svg_per_chart_and_names_every_workload() {
        let results = vec![
            ("a.json".to_string(), measured("log-append", 1000.0, &latencies(3000))),
            ("b.json".to_string(), measured("log-read", 2000.0, &latencies(600))),
            ("c.json".to_string(), result("tsa", 500.0, 12.0, &[("status_503", 4)])),
        ];
        let page = html(&results);
        // 2 across results, 3 per result with a histogram, 2 for the one without.
        assert_eq!(page.matches("<svg").count(), 2 + 3 + 3 + 2, "{page}");
        assert_eq!(page.matches("</svg>").count(), 10);
        for name in ["log-append @ 1,000/s", "log-read @ 2,000/s", "tsa @ 1,000/s"] {
            assert!(page.contains(&format!("<h2>{name}</h2>")), "no section for {name}");
        }
        assert!(page.contains("<td>4 (0.08%)</td>"), "errors not in the table");
        assert!(!page.contains("chart failed"), "a chart failed to draw");
        assert!(
            !page.contains("<script") && !page.contains("href=") && !page.contains("src="),
            "page must be self-contained"
        );
        assert!(page.contains("No latency histogram"));
    }

    #[test]
    fn names_are_escaped_and_disambiguated() {
        let results = vec![
            ("x.json".to_string(), result("<evil>", 100.0, 1.0, &[])),
            ("y.json".to_string(), result("<evil>", 100.0, 1.0, &[])),
        ];
        let names = chart_names(&results);
        assert_eq!(names, vec!["<evil> @ 1,000/s (x.json)", "<evil> @ 1,000/s (y.json)"]);
        let page = html(&results);
        assert!(!page.contains("<evil>") && page.contains("&lt;evil&gt;"));
    }

    #[test]
    fn table_has_a_row_per_result_in_the_reports_shape() {
        let results = vec![
            ("a.json".to_string(), result("log-append", 999.1, 24.3, &[("timeout", 3)])),
            ("b.json".to_string(), result("log-read", 8802.0, 68.7, &[])),
        ];
        let t = table(&results);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(
            lines[0]
                .starts_with("| result | workload   | offered/s | achieved/s | p50 ms | p90 ms | p99 ms | p99.9 ms |"),
            "{t}"
        );
        assert!(
            lines[2].contains(
                "| a.json | log-append |     1,000 |      999.1 |  12.15 |  19.44 |  24.30 |    36.45 | 3 (0.03%) |"
            ),
            "{t}"
        );
        assert!(lines[3].contains(" 8,802.0 |  34.35 |"), "{t}");
    }
}
