//! The disk probe: how long the disk itself takes to make a small write durable, sampled in
//! the same seconds as a load run.
//!
//! A durable log answers an append only after an fsync, so its latency tail can be no shorter
//! than the disk's. On a shared virtual disk that tail comes and goes with the neighbours. The
//! probe writes 4 KiB in place and calls `fdatasync` every 10 ms, next to the server's data,
//! so that a result can say which of its slow seconds were the disk's.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

const BLOCK: usize = 4096;
/// Blocks in the probe file: writes go round it in place, so the file never grows and no
/// sample waits for a metadata commit that a data-only `fdatasync` would not need.
const BLOCKS: u64 = 256;
const PERIOD: Duration = Duration::from_millis(10);

/// What the probe saw, in milliseconds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DiskReport {
    pub dir: String,
    pub samples: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// The slowest `fdatasync` in progress during each second since the probe started: a
    /// stall counts in every second it spans.
    pub per_second_max_ms: Vec<f64>,
    /// Seconds in which the disk was quick: no `fdatasync` reached [`QUIET_MS`], neither
    /// then nor in the second before (a queue built up in a stall drains in the next second).
    #[serde(default)]
    pub quiet_seconds: u64,
    /// The run's worst per-second p99 over those quiet seconds: what the server does when
    /// the disk is not stalling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quiet_worst_p99_ms: Option<f64>,
}

/// An `fdatasync` this slow makes its second "not quiet".
pub const QUIET_MS: f64 = 20.0;

impl DiskReport {
    /// Fills in the quiet-second figures from the run's per-second p99s, indexed by second.
    pub fn attribute(&mut self, per_second_p99_ms: &[(u64, f64)]) {
        let quiet = |t: usize| self.per_second_max_ms.get(t).is_some_and(|&m| m > 0.0 && m < QUIET_MS);
        let in_quiet: Vec<f64> = per_second_p99_ms
            .iter()
            .filter(|(t, _)| quiet(*t as usize) && (*t == 0 || quiet(*t as usize - 1)))
            .map(|&(_, p99)| p99)
            .collect();
        self.quiet_seconds = in_quiet.len() as u64;
        self.quiet_worst_p99_ms = in_quiet.into_iter().reduce(f64::max);
    }
}

/// A running probe; [`DiskProbe::finish`] stops it and returns the report.
pub struct DiskProbe {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<std::io::Result<DiskReport>>,
}

impl DiskProbe {
    /// Starts sampling in `dir` (which must exist and be writable). Seconds count from
    /// `origin`, the run's clock.
    pub fn start(dir: &Path, origin: Instant) -> std::io::Result<DiskProbe> {
        let path = dir.join(format!(".signet-disk-probe-{}", std::process::id()));
        let file = prepare(&path).inspect_err(|_| {
            let _ = std::fs::remove_file(&path);
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let dir_name = dir.display().to_string();
        let thread = std::thread::Builder::new().name("disk-probe".into()).spawn(move || {
            let report = sample(&file, &flag, dir_name, origin);
            let _ = std::fs::remove_file(&path);
            report
        })?;
        Ok(DiskProbe { stop, thread })
    }

    pub fn finish(self) -> std::io::Result<DiskReport> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().map_err(|_| std::io::Error::other("disk probe thread panicked"))?
    }
}

fn prepare(path: &Path) -> std::io::Result<File> {
    let mut file = OpenOptions::new().create(true).truncate(true).write(true).mode(0o600).open(path)?;
    file.write_all(&vec![0u8; BLOCK * BLOCKS as usize])?;
    file.sync_all()?;
    Ok(file)
}

fn sample(file: &File, stop: &AtomicBool, dir: String, start: Instant) -> std::io::Result<DiskReport> {
    let mut hist = Histogram::<u64>::new_with_bounds(1, 600_000_000, 3).expect("valid bounds");
    let mut per_second: Vec<u64> = Vec::new();
    let block = [0xa5u8; BLOCK];
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        file.write_all_at(&block, (i % BLOCKS) * BLOCK as u64)?;
        let t = Instant::now();
        file.sync_data()?;
        let end = Instant::now();
        let us = end.duration_since(t).as_micros().max(1) as u64;
        hist.saturating_record(us);
        let (first, last) = (t.saturating_duration_since(start).as_secs() as usize, end.saturating_duration_since(start).as_secs() as usize);
        if per_second.len() <= last {
            per_second.resize(last + 1, 0);
        }
        for s in &mut per_second[first..=last] {
            *s = (*s).max(us);
        }
        i += 1;
        std::thread::sleep(PERIOD);
    }
    let ms = |us: u64| us as f64 / 1000.0;
    Ok(DiskReport {
        dir,
        samples: hist.len(),
        p50_ms: ms(hist.value_at_quantile(0.5)),
        p99_ms: ms(hist.value_at_quantile(0.99)),
        max_ms: ms(hist.max()),
        per_second_max_ms: per_second.into_iter().map(ms).collect(),
        quiet_seconds: 0,
        quiet_worst_p99_ms: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_until_stopped_and_leaves_no_file() {
        let dir = std::env::temp_dir().join(format!("signet-disk-probe-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let probe = DiskProbe::start(&dir, Instant::now()).unwrap();
        std::thread::sleep(Duration::from_millis(120));
        let r = probe.finish().unwrap();
        assert!(r.samples >= 2, "{r:?}");
        assert!(r.p50_ms > 0.0 && r.p50_ms <= r.p99_ms && r.p99_ms <= r.max_ms, "{r:?}");
        assert_eq!(r.per_second_max_ms.len(), 1);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "the probe file is removed");
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn quiet_seconds_exclude_stalls_and_the_second_after() {
        let mut r = DiskReport {
            dir: "d".into(),
            samples: 0,
            p50_ms: 0.0,
            p99_ms: 0.0,
            max_ms: 0.0,
            // Second 2 stalls; second 5 has no sample at all.
            per_second_max_ms: vec![1.0, 2.0, 300.0, 1.0, 1.0, 0.0, 1.0],
            quiet_seconds: 0,
            quiet_worst_p99_ms: None,
        };
        let p99: Vec<(u64, f64)> = vec![(0, 9.0), (1, 11.0), (2, 310.0), (3, 120.0), (4, 12.0), (5, 8.0), (6, 10.0)];
        r.attribute(&p99);
        assert_eq!((r.quiet_seconds, r.quiet_worst_p99_ms), (3, Some(12.0)), "seconds 0, 1 and 4");
    }

    #[test]
    fn a_missing_directory_is_an_error() {
        assert!(DiskProbe::start(Path::new("/nonexistent/signet-probe"), Instant::now()).is_err());
    }
}
