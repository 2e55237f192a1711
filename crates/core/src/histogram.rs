//! Fixed-bucket histograms for `/metrics`, in Prometheus' text form. One observation is an
//! atomic add on its bucket, the count and the sum: no lock, no allocation.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// OpenTelemetry's default boundaries for `http.server.request.duration`, in seconds.
pub const OTEL_HTTP_SECONDS: &[f64] = &[0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0];

/// Powers of two, for sizes such as the entries in a log batch.
pub const POWERS_OF_TWO: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 4096.0];

pub struct Histogram {
    bounds: &'static [f64],
    /// One per bound (values ≤ it, not cumulative), and one past the last.
    counts: Box<[AtomicU64]>,
    /// The sum in millionths, so that it adds atomically as an integer.
    sum_micro: AtomicU64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Histogram {
        Histogram { bounds, counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(), sum_micro: AtomicU64::new(0) }
    }

    pub fn observe(&self, value: f64) {
        let value = if value.is_finite() { value.max(0.0) } else { 0.0 };
        let bucket = self.bounds.iter().position(|b| value <= *b).unwrap_or(self.bounds.len());
        if let Some(c) = self.counts.get(bucket) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        self.sum_micro.fetch_add((value * 1e6) as u64, Ordering::Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// Writes the `_bucket` (cumulative, ending in `+Inf`), `_sum` and `_count` lines of one
    /// series; `labels` is `name="value",…` or empty.
    pub fn render(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (i, c) in self.counts.iter().enumerate() {
            cumulative += c.load(Ordering::Relaxed);
            match self.bounds.get(i) {
                Some(b) => {
                    let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{b}\"}} {cumulative}");
                }
                None => {
                    let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {cumulative}");
                }
            }
        }
        let braces = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
        let _ = writeln!(out, "{name}_sum{braces} {}", self.sum_micro.load(Ordering::Relaxed) as f64 / 1e6);
        let _ = writeln!(out, "{name}_count{braces} {cumulative}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_end_in_inf() {
        let h = Histogram::new(&[0.1, 1.0]);
        for v in [0.05, 0.1, 0.5, 3.0, f64::NAN] {
            h.observe(v);
        }
        let mut out = String::new();
        h.render(&mut out, "x_seconds", "route=\"/a\"");
        assert_eq!(
            out,
            "x_seconds_bucket{route=\"/a\",le=\"0.1\"} 3\nx_seconds_bucket{route=\"/a\",le=\"1\"} 4\nx_seconds_bucket{route=\"/a\",le=\"+Inf\"} 5\n\
             x_seconds_sum{route=\"/a\"} 3.65\nx_seconds_count{route=\"/a\"} 5\n"
        );
        let mut bare = String::new();
        Histogram::new(&[1.0]).render(&mut bare, "y", "");
        assert_eq!(bare, "y_bucket{le=\"1\"} 0\ny_bucket{le=\"+Inf\"} 0\ny_sum 0\ny_count 0\n");
    }
}
