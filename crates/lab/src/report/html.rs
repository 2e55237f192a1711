//! The HTML page: one self-contained file with the summary table and inline SVG charts. No
//! scripts, stylesheets or fonts are loaded from anywhere.

use std::fmt::Write;

use super::escape::escape;
use super::{charts, summary};
use crate::result::LoadResult;
use crate::table::num;

const STYLE: &str = "body{font-family:sans-serif;margin:2em;color:#222;max-width:1100px}\
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}\
td:nth-child(-n+2),th:nth-child(-n+2){text-align:left}figure{margin:1.5em 0}\
figcaption{color:#555;font-size:90%;max-width:720px}svg{max-width:100%;height:auto}";

fn figure(out: &mut String, svg: &str, caption: &str) {
    let _ = write!(out, "<figure>\n{svg}\n<figcaption>{}</figcaption>\n</figure>\n", escape(caption));
}

/// The page for `results`: (file label, chart name, result).
pub fn page(results: &[(String, String, &LoadResult)]) -> String {
    let by_name: Vec<(String, &LoadResult)> = results.iter().map(|(_, name, r)| (name.clone(), *r)).collect();
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>signet bench report</title>\n\
         <style>{STYLE}</style>\n</head>\n<body>\n<h1>signet bench report</h1>\n<p>{} result(s). Latency is measured from \
         each request's intended send time (open loop) and covers 2xx responses only.</p>\n",
        results.len()
    );

    out.push_str("<h2>Summary</h2>\n<table>\n<tr>");
    for (h, _) in summary::COLUMNS {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr>\n");
    for (file, _, r) in results {
        out.push_str("<tr>");
        for cell in summary::row(file, r) {
            let _ = write!(out, "<td>{}</td>", escape(&cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");

    out.push_str("<h2>Across results</h2>\n");
    figure(
        &mut out,
        &charts::throughput_vs_offered(&by_name),
        "Achieved against offered throughput, one point per result. Points on the diagonal kept up with the \
         offered load; points below it did not (the server saturated, or requests failed).",
    );
    figure(
        &mut out,
        &charts::percentile_bars(&by_name),
        "Latency percentiles (p50, p90, p99, p99.9) of each result, in milliseconds.",
    );

    for (file, name, r) in results {
        let _ = write!(
            out,
            "<h2>{}</h2>\n<p>{}: target {}, {:.1} s, {} connections, {} ok, {} errors, {} dropped.</p>\n",
            escape(name),
            escape(file),
            escape(&r.target),
            r.duration_s,
            r.connections,
            num(r.ok as f64, 0),
            num(r.error_count() as f64, 0),
            num(r.dropped as f64, 0)
        );
        figure(
            &mut out,
            &charts::latency_over_time(r),
            "p50 and p99 latency of the requests due in each second of the run.",
        );
        figure(
            &mut out,
            &charts::throughput_over_time(r),
            "Successful responses per second (by intended send time) against the offered rate. A gap below the \
             offered line is load the server did not absorb.",
        );
        match charts::latency_histogram(r) {
            Some(svg) => figure(
                &mut out,
                &svg,
                "Latency histogram of the 2xx responses, five log-spaced buckets per decade; each bar spans the \
                 bucket from its lower to its upper bound.",
            ),
            None => out.push_str("<p>No latency histogram in this result (written by an older signet).</p>\n"),
        }
    }
    out.push_str("</body>\n</html>\n");
    out
}

/// A page of `markdown` as the lab's tables print it: each run of `|` lines becomes a table
/// (its second line, the `|---|` rule, dropped), and every other non-empty line a paragraph.
/// The figures are the printed table's, character for character.
pub fn tables_page(title: &str, markdown: &str) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{t}</title>\n\
         <style>{STYLE}</style>\n</head>\n<body>\n<h1>{t}</h1>\n",
        t = escape(title)
    );
    let cells = |line: &str| -> Vec<String> {
        let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
        inner.split('|').map(|c| escape(c.trim())).collect()
    };
    let mut rows_seen = 0;
    for line in markdown.lines() {
        let is_row = line.trim_start().starts_with('|');
        if !is_row && rows_seen > 0 {
            out.push_str("</table>\n");
            rows_seen = 0;
        }
        if is_row {
            if rows_seen == 0 {
                out.push_str("<table>\n");
            }
            rows_seen += 1;
            let row = cells(line);
            if rows_seen == 2 && row.iter().all(|c| !c.is_empty() && c.chars().all(|ch| ch == '-' || ch == ':')) {
                continue;
            }
            let tag = if rows_seen == 1 { "th" } else { "td" };
            out.push_str("<tr>");
            for c in row {
                let _ = write!(out, "<{tag}>{c}</{tag}>");
            }
            out.push_str("</tr>\n");
        } else if !line.trim().is_empty() {
            let _ = writeln!(out, "<p>{}</p>", escape(line.trim()));
        }
    }
    if rows_seen > 0 {
        out.push_str("</table>\n");
    }
    out.push_str("</body>\n</html>\n");
    out
}

