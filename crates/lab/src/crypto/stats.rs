//! Timing and statistics: warm-up, calibrated batches under a time budget, interleaved repeats,
//! and the median (with min and max) of the repeats.
//!
//! The median, not the mean: on a shared, noisy machine one disturbed repeat should not move
//! the result. Backends take turns (A B A B …), so slow spells hit both alike.

use std::time::{Duration, Instant};

/// How long and how often each operation is timed.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// Time budget of one repeat of one operation on one backend.
    pub budget: Duration,
    /// Repeats per backend; the result is their median.
    pub repeats: usize,
}

impl Timing {
    /// Warm-up per backend before the first repeat (a fifth of the budget, at least 1 ms).
    pub fn warmup(&self) -> Duration {
        (self.budget / 5).max(Duration::from_millis(1))
    }

    /// Target duration of one batch: clocks are read between batches only, so a batch must be
    /// long against the clock's cost and short against the budget (overshoot under 2 %).
    pub fn batch_target(&self) -> Duration {
        (self.budget / 50).clamp(Duration::from_micros(50), Duration::from_millis(10))
    }
}

/// Median, min and max of a set of samples (ops/s).
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// In the order measured.
    pub samples: Vec<f64>,
}

impl Stats {
    /// None for no samples.
    pub fn of(samples: Vec<f64>) -> Option<Stats> {
        let mut sorted = samples.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        if n == 0 {
            return None;
        }
        let median = if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 };
        Some(Stats { median, min: sorted[0], max: sorted[n - 1], samples })
    }

    /// (max - min) / median: how much the repeats disagreed.
    pub fn spread(&self) -> f64 {
        if self.median > 0.0 {
            (self.max - self.min) / self.median
        } else {
            0.0
        }
    }
}

/// The order of the timed runs: (repeat, backend) pairs, every backend once per repeat.
pub fn schedule(backends: usize, repeats: usize) -> Vec<(usize, usize)> {
    (0..repeats).flat_map(|r| (0..backends).map(move |b| (r, b))).collect()
}

/// Runs `op` `n` times.
fn batch(op: &mut dyn FnMut(), n: u64) {
    for _ in 0..n {
        op();
    }
}

/// Warms `op` up for `warmup` and returns a batch size that takes about `target`.
pub fn warm_up(op: &mut dyn FnMut(), warmup: Duration, target: Duration) -> u64 {
    let start = Instant::now();
    let mut n = 1u64;
    loop {
        let t = Instant::now();
        batch(op, n);
        if t.elapsed() >= target || n >= 1 << 32 {
            break;
        }
        n *= 2;
    }
    // Scale down to the target if doubling overshot it by much.
    let t = Instant::now();
    batch(op, n);
    let per_op = t.elapsed().as_secs_f64() / n as f64;
    if per_op > 0.0 {
        n = ((target.as_secs_f64() / per_op) as u64).clamp(1, n);
    }
    while start.elapsed() < warmup {
        batch(op, n);
    }
    n
}

/// Runs `op` in batches of `n` until `budget` has passed; returns operations per second.
pub fn measure(op: &mut dyn FnMut(), n: u64, budget: Duration) -> f64 {
    let start = Instant::now();
    let mut done = 0u64;
    loop {
        batch(op, n);
        done += n;
        let elapsed = start.elapsed();
        if elapsed >= budget {
            return done as f64 / elapsed.as_secs_f64();
        }
    }
}

/// Times each of `ops` (one per backend) `timing.repeats` times, interleaved, after a warm-up
/// of each; returns their stats in the same order.
pub fn run_interleaved(ops: &mut [Box<dyn FnMut()>], timing: Timing) -> Vec<Stats> {
    let batches: Vec<u64> = ops.iter_mut().map(|op| warm_up(op.as_mut(), timing.warmup(), timing.batch_target())).collect();
    let mut samples = vec![Vec::with_capacity(timing.repeats); ops.len()];
    for (_, b) in schedule(ops.len(), timing.repeats) {
        samples[b].push(measure(ops[b].as_mut(), batches[b], timing.budget));
    }
    samples.into_iter().map(|s| Stats::of(s).expect("at least one repeat")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    #[test]
    fn median_of_odd_and_even_counts() {
        let s = Stats::of(vec![5.0, 1.0, 4.0, 2.0, 3.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (3.0, 1.0, 5.0));
        assert_eq!(s.samples, vec![5.0, 1.0, 4.0, 2.0, 3.0], "samples keep their measured order");
        let s = Stats::of(vec![10.0, 40.0, 20.0, 30.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (25.0, 10.0, 40.0));
        assert_eq!(Stats::of(vec![7.0]).unwrap().median, 7.0);
        assert!(Stats::of(vec![]).is_none());
    }

    #[test]
    fn median_ignores_one_outlier_that_would_move_the_mean() {
        let s = Stats::of(vec![100.0, 101.0, 99.0, 100.0, 10.0]).unwrap();
        assert_eq!(s.median, 100.0);
        assert!((s.spread() - 0.91).abs() < 1e-9);
    }

    #[test]
    fn schedule_alternates_backends_within_each_repeat() {
        assert_eq!(schedule(2, 3), vec![(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]);
        assert!(schedule(2, 0).is_empty());
    }

    #[test]
    fn batch_size_grows_with_cheap_ops() {
        let mut op = || {
            std::hint::black_box(0u64);
        };
        let n = warm_up(&mut op, Duration::ZERO, Duration::from_micros(200));
        assert!(n > 1, "a no-op needs many calls per batch, got {n}");
        let mut slow = || std::thread::sleep(Duration::from_millis(2));
        assert_eq!(warm_up(&mut slow, Duration::ZERO, Duration::from_micros(200)), 1);
    }

    #[test]
    fn interleaved_run_gives_each_backend_its_repeats() {
        let timing = Timing { budget: Duration::from_millis(2), repeats: 3 };
        let counts = [Rc::new(Cell::new(0u64)), Rc::new(Cell::new(0u64))];
        let log = Rc::new(std::cell::RefCell::new(Vec::new()));
        let mut ops: Vec<Box<dyn FnMut()>> = counts
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let (c, log) = (c.clone(), log.clone());
                Box::new(move || {
                    c.set(c.get() + 1);
                    let mut l = log.borrow_mut();
                    if l.last() != Some(&i) {
                        l.push(i);
                    }
                }) as Box<dyn FnMut()>
            })
            .collect();
        let stats = run_interleaved(&mut ops, timing);
        assert_eq!(stats.len(), 2);
        for s in &stats {
            assert_eq!(s.samples.len(), 3);
            assert!(s.min > 0.0 && s.min <= s.median && s.median <= s.max);
        }
        assert!(counts.iter().all(|c| c.get() > 0));
        // Warm-up A, warm-up B, then A B A B A B.
        assert_eq!(*log.borrow(), vec![0, 1, 0, 1, 0, 1, 0, 1]);
    }
}
