//! Soak runs: the server process sampled once a second while the load runs, and a verdict on
//! whether its memory or open file descriptors grew.
//!
//! Samples come from Linux `/proc/PID/`: `status` (VmRSS), `fd` (one entry per open
//! descriptor) and `stat` (utime + stime, in USER_HZ ticks, which the kernel reports at a
//! fixed 100 per second whatever its internal tick rate).

use serde::{Deserialize, Serialize};

/// Ticks per second in `/proc/PID/stat` (USER_HZ; fixed at 100 in the kernel ABI).
const USER_HZ: f64 = 100.0;

/// Growth above this percentage between the first and the last tenth is "growth" by default.
pub const DEFAULT_GROWTH_PCT: f64 = 10.0;

/// Fewer samples than this give no verdict ("too_short"): a tenth would be under one sample.
pub const MIN_SAMPLES: usize = 10;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Sample {
    /// Seconds since the run's start.
    pub t: f64,
    pub rss_kb: u64,
    pub fds: u64,
    /// CPU used since the previous sample, in percent of one core.
    pub cpu_pct: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SoakReport {
    pub pid: u32,
    pub threshold_pct: f64,
    /// Growth of the mean RSS from the first tenth of the samples to the last tenth, in percent.
    pub rss_growth_pct: f64,
    /// The same for open file descriptors.
    pub fd_growth_pct: f64,
    /// `growth` when either growth is above `threshold_pct`; `stable` otherwise; `too_short`
    /// with fewer than 10 samples.
    pub verdict: String,
    pub samples: Vec<Sample>,
}

impl SoakReport {
    pub fn new(pid: u32, threshold_pct: f64, samples: Vec<Sample>) -> SoakReport {
        let (rss_growth_pct, fd_growth_pct, verdict) = verdict(&samples, threshold_pct);
        SoakReport { pid, threshold_pct, rss_growth_pct, fd_growth_pct, verdict: verdict.to_string(), samples }
    }

    /// Lines for the printed table.
    pub fn summary(&self) -> String {
        let last = self.samples.last();
        format!(
            "soak pid {}: {} samples, RSS {:+.1}%, fds {:+.1}% (first to last tenth; threshold {}%), last RSS {} kB, fds {}: {}\n",
            self.pid,
            self.samples.len(),
            self.rss_growth_pct,
            self.fd_growth_pct,
            self.threshold_pct,
            last.map_or(0, |s| s.rss_kb),
            last.map_or(0, |s| s.fds),
            self.verdict
        )
    }
}

/// RSS growth %, fd growth %, and the verdict, comparing the means of the first and the last
/// tenth of the samples.
pub fn verdict(samples: &[Sample], threshold_pct: f64) -> (f64, f64, &'static str) {
    if samples.len() < MIN_SAMPLES {
        return (0.0, 0.0, "too_short");
    }
    let tenth = samples.len() / 10;
    let (first, last) = (&samples[..tenth], &samples[samples.len() - tenth..]);
    let growth = |f: fn(&Sample) -> u64| {
        let mean = |s: &[Sample]| s.iter().map(f).sum::<u64>() as f64 / s.len() as f64;
        let (a, b) = (mean(first), mean(last));
        if a > 0.0 { 100.0 * (b - a) / a } else if b > 0.0 { f64::INFINITY } else { 0.0 }
    };
    let (rss, fds) = (growth(|s| s.rss_kb), growth(|s| s.fds));
    let v = if rss > threshold_pct || fds > threshold_pct { "growth" } else { "stable" };
    (rss, fds, v)
}

/// One reading of `/proc/PID`: (RSS in kB, open fds, CPU ticks used so far).
pub fn read_proc(pid: u32) -> std::io::Result<(u64, u64, u64)> {
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("/proc/{pid}/{what} is not as expected"));
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let rss_kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| bad("status"))?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))?.count() as u64;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name, which is in parentheses and may hold spaces: field 3
    // (state) is first, so utime (14) and stime (15) are at 11 and 12.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).ok_or_else(|| bad("stat"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).ok_or_else(|| bad("stat"));
    Ok((rss_kb, fds, ticks(11)? + ticks(12)?))
}

/// Samples `pid` every second from `start` until `stop` fires or the process is gone.
pub async fn sample(pid: u32, start: tokio::time::Instant, mut stop: tokio::sync::oneshot::Receiver<()>) -> Vec<Sample> {
    let mut samples = Vec::new();
    let mut prev: Option<(tokio::time::Instant, u64)> = None;
    let mut next = start;
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = tokio::time::sleep_until(next) => {}
        }
        let now = tokio::time::Instant::now();
        let Ok((rss_kb, fds, ticks)) = read_proc(pid) else { break };
        let cpu_pct = match prev {
            Some((t, before)) => {
                let secs = now.saturating_duration_since(t).as_secs_f64().max(1e-3);
                100.0 * (ticks.saturating_sub(before) as f64 / USER_HZ) / secs
            }
            None => 0.0,
        };
        prev = Some((now, ticks));
        let t = now.saturating_duration_since(start).as_secs_f64();
        samples.push(Sample { t: (t * 1000.0).round() / 1000.0, rss_kb, fds, cpu_pct: (cpu_pct * 10.0).round() / 10.0 });
        next += std::time::Duration::from_secs(1);
    }
    samples
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(rss: impl Fn(usize) -> u64, fds: impl Fn(usize) -> u64, n: usize) -> Vec<Sample> {
        (0..n).map(|i| Sample { t: i as f64, rss_kb: rss(i), fds: fds(i), cpu_pct: 50.0 }).collect()
    }

    #[test]
    fn flat_series_are_stable_and_growing_ones_are_growth() {
        let flat = series(|i| 100_000 + (i as u64 % 3) * 100, |_| 40, 100);
        let (rss, fds, v) = verdict(&flat, 10.0);
        assert_eq!(v, "stable");
        assert!(rss.abs() < 1.0 && fds == 0.0, "{rss} {fds}");

        // RSS grows 1,000 kB a sample: the mean of the last tenth (194,500) is 86% above the
        // first's (104,500).
        let leak = series(|i| 100_000 + 1_000 * i as u64, |_| 40, 100);
        let (rss, _, v) = verdict(&leak, 10.0);
        assert_eq!(v, "growth");
        assert!((rss - 86.12).abs() < 0.01, "{rss}");

        // Descriptors alone can make the verdict.
        let fd_leak = series(|_| 100_000, |i| 40 + i as u64, 50);
        assert_eq!(verdict(&fd_leak, 10.0).2, "growth");
        // ... and a threshold above the growth lets it pass.
        assert_eq!(verdict(&fd_leak, 200.0).2, "stable");
    }

    #[test]
    fn a_spike_in_the_middle_is_not_growth_and_few_samples_give_no_verdict() {
        let spike = series(|i| if (40..60).contains(&i) { 500_000 } else { 100_000 }, |_| 40, 100);
        assert_eq!(verdict(&spike, 10.0).2, "stable");
        assert_eq!(verdict(&series(|i| i as u64, |_| 1, 9), 10.0), (0.0, 0.0, "too_short"));
    }

    #[test]
    fn reads_its_own_process() {
        let (rss, fds, _) = read_proc(std::process::id()).unwrap();
        assert!(rss > 0 && fds >= 3, "rss {rss} kB, fds {fds}");
        assert!(read_proc(u32::MAX).is_err());
    }
}
