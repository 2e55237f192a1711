//! `signet bench tls lookup`: report 000's certificate-lookup benchmark. For each certificate
//! source and backend, the cost of obtaining the certificate for one handshake
//! ([`Acceptor::lookup`]: what the rustls resolver or the OpenSSL acceptor does, without the
//! handshake around it), on one thread and on many at once.
//!
//! The figure is Go's `b.RunParallel` one, which report 000 used: the wall time of a round
//! divided by the lookups all threads completed in it. Rounds are short and interleaved across the
//! sources, and a cell is the median of its rounds, so that a noisy second on a shared machine
//! falls on all sources alike.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use serde::Serialize;
use signet_tls::backend::HTTP_ALPN;
use signet_tls::{Acceptor, Backend, FileSource, SourceKind};

use crate::error::BenchError;
use crate::table::{Align, Table};

pub struct LookupSpec {
    pub backends: Vec<Backend>,
    pub sources: Vec<SourceKind>,
    /// Thread counts, each measured for every source (report 000: 1 and 32).
    pub threads: Vec<usize>,
    pub rounds: usize,
    pub round: Duration,
    /// The `cached` source's TTL; longer than a run, so that it measures hits (report 000's 5 s).
    pub cache_ttl: Duration,
}

impl Default for LookupSpec {
    fn default() -> Self {
        LookupSpec {
            backends: Backend::ALL.to_vec(),
            sources: vec![SourceKind::File, SourceKind::Watch, SourceKind::Cached, SourceKind::Reload],
            threads: vec![1, 32],
            rounds: 5,
            round: Duration::from_millis(40),
            cache_ttl: signet_tls::source::DEFAULT_CACHE_TTL,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct LookupReport {
    /// Cores this process may run on: at 32 threads, at most this many look up at once.
    pub cores: usize,
    pub rounds: usize,
    pub round_ms: f64,
    pub rows: Vec<LookupRow>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LookupRow {
    pub source: String,
    pub backend: String,
    /// Per thread count: the median over rounds of ns per lookup (wall / lookups).
    pub ns_per_lookup: Vec<(usize, f64)>,
    /// Lookups made in all rounds, all thread counts.
    pub lookups: u64,
}

/// One source on one backend, ready to be looked up.
struct Subject {
    source: SourceKind,
    backend: Backend,
    acceptor: Acceptor,
    /// `file` and `watch`: the reloader, alive while measured (it is idle: nothing changes).
    _reloader: Option<signet_tls::Reloader>,
}

pub fn run_lookup(spec: &LookupSpec, progress: &mut dyn FnMut(String)) -> Result<LookupReport, BenchError> {
    if spec.backends.is_empty() || spec.sources.is_empty() || spec.threads.is_empty() {
        return Err(BenchError::Usage("nothing to measure: no backend, source or thread count".into()));
    }
    if spec.threads.iter().any(|t| !(1..=1024).contains(t)) || spec.rounds == 0 || spec.round.is_zero() {
        return Err(BenchError::Usage("--threads must be 1..=1024, --rounds and --round-ms at least 1".into()));
    }
    let setup = |e: &dyn std::fmt::Display| BenchError::Setup(e.to_string());
    // A throwaway pair on disk: reload and cached read it as a server would.
    let dir = tempfile::tempdir().map_err(|e| setup(&e))?;
    let pem = signet_tls::testing::TestPki::new().server_pem();
    let files = FileSource::new(dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&files.cert, &pem.chain).map_err(|e| setup(&e))?;
    std::fs::write(&files.key, &pem.key).map_err(|e| setup(&e))?;
    // The file and watch reloaders run here, as they do in the server.
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().map_err(|e| setup(&e))?;
    let _entered = runtime.enter();

    let mut subjects = Vec::new();
    for &backend in &spec.backends {
        for &source in &spec.sources {
            let (acceptor, reloader) = match (source.trigger(), source.freshness(spec.cache_ttl)) {
                (Some(trigger), _) => {
                    let acceptor = Acceptor::new(backend, &files.load().map_err(|e| setup(&e))?).map_err(|e| setup(&e))?;
                    let reloader = files.watch(acceptor.clone(), signet_tls::reloader::DEFAULT_RELOAD_INTERVAL, trigger);
                    (acceptor, Some(reloader))
                }
                (None, Some(freshness)) => (Acceptor::per_handshake(backend, &files, freshness, HTTP_ALPN, None).map_err(|e| setup(&e))?, None),
                (None, None) => return Err(BenchError::Setup(format!("source {source} has neither a trigger nor a freshness"))),
            };
            subjects.push(Subject { source, backend, acceptor, _reloader: reloader });
        }
    }

    // samples[subject][thread count] = ns per lookup of each round.
    let mut samples: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); spec.threads.len()]; subjects.len()];
    let mut lookups = vec![0u64; subjects.len()];
    let acceptors: Vec<&Acceptor> = subjects.iter().map(|s| &s.acceptor).collect();
    for (t, &threads) in spec.threads.iter().enumerate() {
        measure(&acceptors, threads, spec.rounds, spec.round, &mut |i, ns, n| {
            samples[i][t].push(ns);
            lookups[i] += n;
        });
        progress(format!("{threads} thread(s): {} rounds done", spec.rounds));
    }
    let rows = subjects
        .iter()
        .zip(samples.iter_mut().zip(lookups))
        .map(|(s, (per_threads, lookups))| LookupRow {
            source: s.source.name().to_string(),
            backend: s.backend.name().to_string(),
            ns_per_lookup: spec.threads.iter().zip(per_threads.iter_mut()).map(|(&t, ns)| (t, median(ns))).collect(),
            lookups,
        })
        .collect();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    Ok(LookupReport { cores, rounds: spec.rounds, round_ms: spec.round.as_secs_f64() * 1e3, rows })
}

/// `rounds` rounds over every acceptor, in alternating order, on one pool of `threads`
/// threads (made once: creating 32 threads per round costs more than a short round on a
/// loaded machine). `record` gets, per round and acceptor, the ns per lookup and the number
/// of lookups.
///
/// A round is a window of `round` that opens when the first thread starts; only batches that
/// end inside it count, and ns per lookup is the window / those lookups. With more threads
/// than cores, a thread may be woken long after the window opened or closed: timing the
/// window in the threads (not in the coordinating thread, which may itself wait for a core)
/// keeps those waits out of the figure.
fn measure(acceptors: &[&Acceptor], threads: usize, rounds: usize, round: Duration, record: &mut dyn FnMut(usize, f64, u64)) {
    // The acceptor measured now; past the end: the pool's threads return.
    let current = AtomicUsize::new(usize::MAX);
    let total = AtomicU64::new(0);
    // When the window opened, in ns since `epoch`; 0 until the first thread starts.
    let epoch = Instant::now();
    let opened = AtomicU64::new(0);
    let (start, done) = (Barrier::new(threads + 1), Barrier::new(threads + 1));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                start.wait();
                let Some(acceptor) = acceptors.get(current.load(Ordering::Acquire)) else { return };
                let now = (epoch.elapsed().as_nanos() as u64).max(1);
                let opened_at = match opened.compare_exchange(0, now, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => now,
                    Err(first) => first,
                };
                let deadline = epoch + Duration::from_nanos(opened_at) + round;
                // In half lookups: a batch that the deadline cut counts as half done (the
                // thread may have been preempted anywhere in it), which matters for slow
                // lookups when 32 threads share 2 cores.
                let mut halves = 0u64;
                // Batches grow while they take under 20 µs: the clock read stays out of a fast
                // lookup's figure, and a slow one (reload) is checked after every lookup.
                let mut batch = 1u64;
                loop {
                    let began = Instant::now();
                    if began >= deadline {
                        break;
                    }
                    for _ in 0..batch {
                        acceptor.lookup();
                    }
                    let ended = Instant::now();
                    if ended > deadline {
                        halves += batch;
                        break;
                    }
                    halves += 2 * batch;
                    if batch < 256 && ended - began < Duration::from_micros(20) {
                        batch *= 2;
                    }
                }
                total.fetch_add(halves, Ordering::Relaxed);
                done.wait();
            });
        }
        for r in 0..rounds {
            // Alternate the order, so that no acceptor always runs right after another's heavy round.
            let order: Vec<usize> = if r % 2 == 0 { (0..acceptors.len()).collect() } else { (0..acceptors.len()).rev().collect() };
            for i in order {
                current.store(i, Ordering::Release);
                total.store(0, Ordering::Relaxed);
                opened.store(0, Ordering::Relaxed);
                start.wait();
                done.wait();
                let lookups = total.load(Ordering::Relaxed).max(1) as f64 / 2.0;
                record(i, round.as_nanos() as f64 / lookups, lookups as u64);
            }
        }
        current.store(usize::MAX, Ordering::Release);
        start.wait();
    });
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Report 000's figures (Go, `GetCertificate` on a Ryzen 9 5950X), for the rows they match.
fn report_000(source: &str) -> &'static str {
    match source {
        "reload" => "~90 µs; ~30 µs at 32",
        "cached" => "~0.2 ns; ~68 ns at 32",
        _ => "",
    }
}

impl LookupReport {
    pub fn table(&self) -> String {
        let mut columns: Vec<(String, Align)> = vec![("source".into(), Align::Left), ("backend".into(), Align::Left)];
        if let Some(row) = self.rows.first() {
            for (threads, _) in &row.ns_per_lookup {
                let label = if *threads == 1 { "1 thread ns/lookup".to_string() } else { format!("{threads} threads ns/lookup") };
                columns.push((label, Align::Right));
            }
        }
        columns.push(("report 000 (Go)".into(), Align::Left));
        let refs: Vec<(&str, Align)> = columns.iter().map(|(h, a)| (h.as_str(), *a)).collect();
        let mut table = Table::new(&refs);
        for row in &self.rows {
            let mut cells = vec![row.source.clone(), row.backend.clone()];
            cells.extend(row.ns_per_lookup.iter().map(|(_, ns)| ns_cell(*ns)));
            cells.push(report_000(&row.source).to_string());
            table.row(cells);
        }
        format!(
            "Certificate lookup per handshake (median of {} rounds of {:.0} ms; wall time / lookups of all threads; {} cores):\n\n{}",
            self.rounds,
            self.round_ms,
            self.cores,
            table.render()
        )
    }
}

fn ns_cell(ns: f64) -> String {
    if ns >= 100.0 {
        format!("{ns:.0}")
    } else {
        format!("{ns:.1}")
    }
}
