//! The report's charts. Each function returns one self-contained `<svg>` element drawn by
//! plotters' SVG backend (text as `<text>`, so the browser picks the font).

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::result::{LoadResult, BUCKETS_PER_DECADE};

const SIZE: (u32, u32) = (720, 360);
const P50: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const P90: RGBColor = RGBColor(0x2c, 0xa0, 0x2c);
const P99: RGBColor = RGBColor(0xd6, 0x27, 0x28);
const P999: RGBColor = RGBColor(0x94, 0x67, 0xbd);
const OFFERED: RGBColor = RGBColor(0x88, 0x88, 0x88);

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Drawn = Result<(), Box<dyn std::error::Error>>;
/// A percentile's name, bar colour and value in a result.
type Percentile = (&'static str, RGBColor, fn(&LoadResult) -> f64);

/// Draws on a white canvas and returns the SVG text (or an SVG that says what failed).
fn svg(size: (u32, u32), draw: impl FnOnce(&Area<'_>) -> Drawn) -> String {
    let mut out = String::new();
    let drawn: Drawn = (|| {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        root.fill(&WHITE)?;
        draw(&root)?;
        root.present()?;
        Ok(())
    })();
    match drawn {
        Ok(()) => out,
        Err(e) => format!(
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="60"><text x="10" y="30">chart failed: {}</text></svg>"#,
            size.0,
            super::escape::escape(&e.to_string())
        ),
    }
}

/// An upper bound for an axis that starts at zero: a little headroom, never an empty range.
fn top(values: impl Iterator<Item = f64>) -> f64 {
    let max = values.filter(|v| v.is_finite()).fold(0.0, f64::max);
    if max > 0.0 {
        max * 1.1
    } else {
        1.0
    }
}

/// A named series of (x, y) points.
struct Line {
    name: &'static str,
    color: RGBColor,
    points: Vec<(f64, f64)>,
}

/// Lines against time in seconds, each with its points marked and a legend entry.
fn over_time(caption: &str, y_desc: &str, lines: Vec<Line>) -> String {
    let x_max = top(lines.iter().flat_map(|l| l.points.iter().map(|p| p.0))).max(1.0);
    let y_max = top(lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)));
    svg(SIZE, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(caption, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc(y_desc)
            .x_label_formatter(&short)
            .y_label_formatter(&short)
            .draw()?;
        for l in lines {
            let color = l.color;
            chart
                .draw_series(LineSeries::new(l.points, color.stroke_width(2)).point_size(2))?
                .label(l.name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        }
        chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
        Ok(())
    })
}

/// p50 and p99 of each second of the run (by intended send time).
pub fn latency_over_time(r: &LoadResult) -> String {
    let series = |f: fn(&crate::result::Second) -> f64| r.per_second.iter().map(|s| (s.t as f64, f(s))).collect();
    over_time(
        "latency per second",
        "latency (ms)",
        vec![
            Line { name: "p50", color: P50, points: series(|s| s.p50_ms) },
            Line { name: "p99", color: P99, points: series(|s| s.p99_ms) },
        ],
    )
}

/// Successful responses per second against the offered rate.
pub fn throughput_over_time(r: &LoadResult) -> String {
    let achieved: Vec<(f64, f64)> = r.per_second.iter().map(|s| (s.t as f64, s.ok as f64)).collect();
    let last = achieved.last().map_or(r.duration_s, |p| p.0);
    over_time(
        "throughput per second",
        "requests/s",
        vec![
            Line { name: "offered", color: OFFERED, points: vec![(0.0, r.offered_rps), (last, r.offered_rps)] },
            Line { name: "achieved (2xx)", color: P50, points: achieved },
        ],
    )
}

/// One point per result: achieved against offered throughput, with the diagonal where they are equal.
pub fn throughput_vs_offered(results: &[(String, &LoadResult)]) -> String {
    let max = top(results.iter().flat_map(|(_, r)| [r.offered_rps, r.achieved_rps]));
    svg(SIZE, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption("achieved vs offered throughput", ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..max, 0.0..max)?;
        chart
            .configure_mesh()
            .x_desc("offered (requests/s)")
            .y_desc("achieved (requests/s)")
            .x_label_formatter(&short)
            .y_label_formatter(&short)
            .draw()?;
        chart
            .draw_series(LineSeries::new([(0.0, 0.0), (max, max)], OFFERED))?
            .label("achieved = offered")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], OFFERED));
        for (i, (name, r)) in results.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series([Circle::new((r.offered_rps, r.achieved_rps), 5, color.filled())])?
                .label(name.as_str())
                .legend(move |(x, y)| Circle::new((x + 10, y), 5, color.filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
        Ok(())
    })
}

/// p50, p90, p99 and p99.9 side by side for each result.
pub fn percentile_bars(results: &[(String, &LoadResult)]) -> String {
    let n = results.len().max(1);
    let percentiles: [Percentile; 4] = [
        ("p50", P50, |r| r.latency_ms.p50),
        ("p90", P90, |r| r.latency_ms.p90),
        ("p99", P99, |r| r.latency_ms.p99),
        ("p99.9", P999, |r| r.latency_ms.p999),
    ];
    let y_max = top(results.iter().map(|(_, r)| r.latency_ms.p999.max(r.latency_ms.p99)));
    let names: Vec<&str> = results.iter().map(|(name, _)| name.as_str()).collect();
    // Result i is centred on x = i; the integer tick under it carries its name.
    let label = |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 {
            names.get(i as usize).map_or(String::new(), |s| s.to_string())
        } else {
            String::new()
        }
    };
    svg((SIZE.0.max(160 * n as u32), SIZE.1), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption("latency percentiles", ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5..(n as f64 - 0.5), 0.0..y_max)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&label)
            .y_label_formatter(&short)
            .y_desc("latency (ms)")
            .draw()?;
        for (j, (name, color, value)) in percentiles.into_iter().enumerate() {
            let left = |i: usize| i as f64 - 0.4 + 0.2 * j as f64;
            let bars = results
                .iter()
                .enumerate()
                .map(|(i, (_, r))| Rectangle::new([(left(i), 0.0), (left(i) + 0.18, value(r))], color.filled()));
            chart
                .draw_series(bars)?
                .label(name)
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
        }
        chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
        Ok(())
    })
}

/// The latency histogram of the 2xx responses on a log scale, or `None` when the result has none.
pub fn latency_histogram(r: &LoadResult) -> Option<String> {
    let (first, last) = (r.histogram.first()?, r.histogram.last()?);
    let width = 10f64.powf(1.0 / BUCKETS_PER_DECADE);
    let (lo, hi) = (first.le_ms / width, last.le_ms);
    let y_max = top(r.histogram.iter().map(|b| b.count as f64));
    Some(svg(SIZE, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption("latency histogram", ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((lo..hi).log_scale(), 0.0..y_max)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc("latency (ms, log scale)")
            .y_desc("responses")
            .x_label_formatter(&short)
            .y_label_formatter(&short)
            .draw()?;
        chart.draw_series(r.histogram.iter().map(|b| {
            // A pixel of white between neighbouring bars.
            let mut bar = Rectangle::new([(b.le_ms / width, 0.0), (b.le_ms, b.count as f64)], P50.filled());
            bar.set_margin(0, 0, 1, 0);
            bar
        }))?;
        Ok(())
    }))
}

/// A compact axis label: three significant digits at most, no trailing zeros.
fn short(v: &f64) -> String {
    let v = *v;
    let decimals = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else if v >= 1.0 {
        2
    } else {
        3
    };
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_labels_are_short() {
        assert_eq!(short(&0.0015849), "0.002");
        assert_eq!(short(&2.5119), "2.51");
        assert_eq!(short(&10.0), "10");
        assert_eq!(short(&158.49), "158");
    }
}
