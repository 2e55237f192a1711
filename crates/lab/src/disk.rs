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
use std::path::{Path, PathBuf};
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
    /// The slowest `fdatasync` of each second since the probe started.
    pub per_second_max_ms: Vec<f64>,
}

/// A running probe; [`DiskProbe::finish`] stops it and returns the report.
pub struct DiskProbe {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<std::io::Result<DiskReport>>,
}

impl DiskProbe {
    /// Starts sampling in `dir` (which must exist and be writable).
    pub fn start(dir: &Path) -> std::io::Result<DiskProbe> {
        let path = dir.join(format!(".signet-disk-probe-{}", std::process::id()));
        let file = prepare(&path)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let dir_name = dir.display().to_string();
        let thread = std::thread::Builder::new().name("disk-probe".into()).spawn(move || {
            let report = sample(&file, &flag, dir_name);
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

fn prepare(path: &PathBuf) -> std::io::Result<File> {
    let mut file = OpenOptions::new().create(true).truncate(true).write(true).mode(0o600).open(path)?;
    file.write_all(&vec![0u8; BLOCK * BLOCKS as usize])?;
    file.sync_all()?;
    Ok(file)
}

fn sample(file: &File, stop: &AtomicBool, dir: String) -> std::io::Result<DiskReport> {
    let mut hist = Histogram::<u64>::new_with_bounds(1, 600_000_000, 3).expect("valid bounds");
    let mut per_second: Vec<u64> = Vec::new();
    let block = [0xa5u8; BLOCK];
    let start = Instant::now();
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        file.write_all_at(&block, (i % BLOCKS) * BLOCK as u64)?;
        let t = Instant::now();
        file.sync_data()?;
        let us = t.elapsed().as_micros().max(1) as u64;
        hist.saturating_record(us);
        let second = t.duration_since(start).as_secs() as usize;
        if per_second.len() <= second {
            per_second.resize(second + 1, 0);
        }
        per_second[second] = per_second[second].max(us);
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_until_stopped_and_leaves_no_file() {
        let dir = std::env::temp_dir().join(format!("signet-disk-probe-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let probe = DiskProbe::start(&dir).unwrap();
        std::thread::sleep(Duration::from_millis(120));
        let r = probe.finish().unwrap();
        assert!(r.samples >= 2, "{r:?}");
        assert!(r.p50_ms > 0.0 && r.p50_ms <= r.p99_ms && r.p99_ms <= r.max_ms, "{r:?}");
        assert_eq!(r.per_second_max_ms.len(), 1);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "the probe file is removed");
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn a_missing_directory_is_an_error() {
        assert!(DiskProbe::start(Path::new("/nonexistent/signet-probe")).is_err());
    }
}
