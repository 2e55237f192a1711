//! The open-loop load generator.
//!
//! Requests are scheduled at a constant arrival rate, independent of how fast responses come
//! back, and each latency is measured from the request's *intended* send time. A server that
//! stalls therefore shows its stall in the percentiles instead of silently slowing the
//! generator down (coordinated omission; the wrk2 method). Workers each own one client (a
//! keep-alive connection, an HTTP/2 stream slot, or a slot for new connections; see
//! [`crate::transport`]) and send every W-th scheduled request (wrk2's striping); a run is
//! bounded in count and in time and stops by itself.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use hdrhistogram::Histogram;
use http::{Method, Uri};
use tokio::time::Instant;

use crate::conn::{Conn, ConnError};
use crate::dial::{Dialer, Setup};
use crate::result::{Bucket, KindResult, Latency, LoadResult, Second};
use crate::server_cpu::{CpuTime, ServerCpu};
use crate::transport::{Client, HttpVersion, Transport, TransportError};
use crate::txn::{self, SeedError, Transactions, TxnError, TxnFailure, TxnSpec};
use crate::workload::{RequestMaker, Workload};

#[derive(Debug, Clone)]
pub struct LoadSpec {
    pub target: Uri,
    pub workload: Workload,
    pub rate: f64,
    pub duration: Duration,
    pub connections: usize,
    pub method: Method,
    pub body: Bytes,
    /// Extra `(name, value)` headers of `custom` requests, e.g. `Authorization`.
    pub headers: Vec<(String, String)>,
    /// How long one request may take before it counts as a timeout.
    pub timeout: Duration,
    pub progress: bool,
    /// Identity token for the `cert`, `sign` and `mixed` workloads.
    pub token: Option<String>,
    /// Where `sign` transactions append: Rekor v1 or v2.
    pub rekor_version: u8,
    /// Entries appended before the clock starts, for `verify` transactions to look up.
    pub seed_entries: usize,
    /// Seeds the per-arrival choices of `mixed` and `verify`.
    pub rng_seed: u64,
    /// Sample the server process during the run (`--preset soak`).
    pub soak: Option<SoakSpec>,
    /// The server's process: its CPU over the measured window, per answered operation
    /// ([`crate::server_cpu`]).
    pub server_pid: Option<u32>,
    /// Sample the disk's `fdatasync` latency in this directory during the run.
    pub disk_probe: Option<std::path::PathBuf>,
    /// Arrivals sent at the same rate before `duration` starts, and not recorded: the
    /// server's caches and the kernel's connection state settle first.
    pub warmup: Duration,
    /// HTTP version, keep-alive or new connections, and TLS trust.
    pub transport: Transport,
}

#[derive(Debug, Clone, Copy)]
pub struct SoakSpec {
    pub pid: u32,
    /// RSS or fd growth above this percentage is "growth".
    pub threshold_pct: f64,
}

/// What the workers execute per arrival: one prepared request, or a transaction.
#[derive(Clone)]
enum Driver {
    Requests(Arc<RequestMaker>),
    Transactions(Arc<Transactions>),
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The run cannot be made as specified (exit 2), or it broke down on the generator's side.
    #[error("invalid load spec: {0}")]
    Spec(#[from] SpecError),
    /// The target (a URL, or the path of a request made before the clock starts) failed.
    #[error("target {target}: {source}")]
    Target { target: String, source: TargetError },
}

/// What [`LoadError::Spec`] says is wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    #[error("rate must be in (0, 1000000], got {0}")]
    Rate(f64),
    #[error("duration must be between 1 s and 24 h")]
    Duration,
    #[error("warm-up must be at most 1 h, got {} s", .0.as_secs_f64())]
    Warmup(Duration),
    #[error("connections must be 1..=4096, got {0}")]
    Connections(usize),
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("the {} workload needs --token with an identity token (signet dev-token)", .0.name())]
    NeedsToken(Workload),
    #[error("the cert-grpc workload needs --http 2: gRPC runs over HTTP/2 only")]
    GrpcNeedsHttp2,
    #[error("rekor version must be 1 or 2, got {0}")]
    RekorVersion(u8),
    #[error("--server-pid {pid}: cannot read /proc/{pid}: {source}")]
    ServerPid { pid: u32, source: std::io::Error },
    #[error("the {} workload needs --seed N > 0 entries to look up", .0.name())]
    NeedsSeed(Workload),
    #[error(transparent)]
    Transactions(#[from] TxnError),
    #[error("--disk-probe {}: {source}", .dir.display())]
    DiskProbe { dir: std::path::PathBuf, source: std::io::Error },
    #[error("disk probe: {0}")]
    DiskProbeFinish(#[source] std::io::Error),
    /// The task that prepares the requests or transactions panicked.
    #[error("{0}")]
    Prepare(#[source] tokio::task::JoinError),
    #[error("worker failed: {0}")]
    Worker(#[source] tokio::task::JoinError),
    #[error("soak sampler failed: {0}")]
    SoakSampler(#[source] tokio::task::JoinError),
}

/// What [`LoadError::Target`] says went wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TargetError {
    #[error(transparent)]
    Seed(#[from] SeedError),
    #[error(transparent)]
    Conn(#[from] ConnError),
    #[error("status {status}, not JSON: {source}")]
    NotJson { status: u16, source: serde_json::Error },
    #[error("log is empty or has no treeSize; run log-append first")]
    EmptyLog,
}

/// Why an arrival failed. Its text is the key the result's `errors` counts it under
/// (`status_503`, `timeout`, `io`, or a transaction's `cert_status_500`, `sign_timeout`).
#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error("status_{0}")]
    Status(u16),
    #[error("{}", .0.kind())]
    Conn(#[source] ConnError),
    #[error("timeout")]
    Timeout,
    #[error(transparent)]
    Transaction(#[from] TxnFailure),
    #[error("{}_timeout", .0.name())]
    TransactionTimeout(txn::Kind),
}

/// The most requests one run may schedule, whatever rate × duration asks for.
pub const MAX_REQUESTS: u64 = 5_000_000;

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 120_000_000, 3).expect("valid bounds")
}

/// Where every worker records its outcomes. The generator runs on one thread, so the lock is
/// never contended. One recorder per run, rather than per worker, matters: a per-worker
/// histogram for every second (about 140 KB each) made 256 connections allocate 36 MB at each
/// second boundary, which stalled the event loop and put tens of milliseconds into p99.
struct Recorder {
    total: Histogram<u64>,
    /// Seconds (of intended send time) that may still receive samples.
    open_seconds: BTreeMap<u64, Histogram<u64>>,
    /// Seconds no request can land in any more, summarised; this keeps a 24 h soak small.
    closed_seconds: Vec<Second>,
    /// A second closes this many seconds after it ends: no request outlives its timeout.
    settle_s: u64,
    errors: BTreeMap<String, u64>,
    ok: u64,
    expired: u64,
    /// Transaction workloads: histogram, ok and errors per kind.
    by_kind: BTreeMap<&'static str, (Histogram<u64>, u64, u64)>,
    /// Connections opened by measured arrivals: setup time (TCP + TLS + HTTP/2 preface), TLS alone.
    connect: Histogram<u64>,
    handshake: Histogram<u64>,
}

impl Recorder {
    fn new(timeout: Duration) -> Recorder {
        Recorder {
            total: new_histogram(),
            open_seconds: BTreeMap::new(),
            closed_seconds: Vec::new(),
            settle_s: timeout.as_secs() + 2,
            errors: BTreeMap::new(),
            ok: 0,
            expired: 0,
            by_kind: BTreeMap::new(),
            connect: new_histogram(),
            handshake: new_histogram(),
        }
    }

    fn record_setup(&mut self, setup: Setup) {
        self.connect.saturating_record(setup.total_us);
        if let Some(us) = setup.tls_us {
            self.handshake.saturating_record(us);
        }
    }

    /// Records one outcome: its latency in µs, or why it failed. `second` is the second
    /// of its intended send time, `now_s` the second it completed in.
    fn record(&mut self, second: u64, now_s: u64, kind: Option<&'static str>, outcome: Result<u64, Failure>) {
        if let Some(kind) = kind {
            let e = self.by_kind.entry(kind).or_insert_with(|| (new_histogram(), 0, 0));
            match &outcome {
                Ok(us) => {
                    e.0.saturating_record(*us);
                    e.1 += 1;
                }
                Err(_) => e.2 += 1,
            }
        }
        match outcome {
            Ok(us) => {
                self.total.saturating_record(us);
                self.open_seconds.entry(second).or_insert_with(new_histogram).saturating_record(us);
                self.ok += 1;
            }
            Err(failure) => *self.errors.entry(failure.to_string()).or_insert(0) += 1,
        }
        self.close_seconds_before(now_s.saturating_sub(self.settle_s));
    }

    fn close_seconds_before(&mut self, limit: u64) {
        while let Some(entry) = self.open_seconds.first_entry() {
            if *entry.key() >= limit {
                break;
            }
            let (t, h) = entry.remove_entry();
            let l = Latency::from_histogram(&h);
            self.closed_seconds.push(Second { t, ok: h.len(), p50_ms: l.p50, p99_ms: l.p99 });
        }
    }
}

pub async fn run(spec: LoadSpec) -> Result<LoadResult, LoadError> {
    if !(spec.rate > 0.0 && spec.rate <= 1_000_000.0) {
        return Err(SpecError::Rate(spec.rate).into());
    }
    if spec.duration.is_zero() || spec.duration > Duration::from_secs(24 * 3600) {
        return Err(SpecError::Duration.into());
    }
    if spec.warmup > Duration::from_secs(3600) {
        return Err(SpecError::Warmup(spec.warmup).into());
    }
    if spec.connections == 0 || spec.connections > 4096 {
        return Err(SpecError::Connections(spec.connections).into());
    }
    spec.transport.check(&spec.target, spec.connections).map_err(SpecError::from)?;
    let dialers = spec.transport.dialers(&spec.target).map_err(SpecError::from)?;
    let warm = (spec.rate * spec.warmup.as_secs_f64()).ceil() as u64;
    let total = (warm + (spec.rate * spec.duration.as_secs_f64()).ceil() as u64).min(MAX_REQUESTS);

    if matches!(spec.workload, Workload::Cert | Workload::CertGrpc)
        && crate::workload::token_challenge(spec.token.as_deref().unwrap_or("")).is_none()
    {
        return Err(SpecError::NeedsToken(spec.workload).into());
    }
    if spec.workload == Workload::CertGrpc && spec.transport.http != crate::transport::HttpVersion::Http2 {
        return Err(SpecError::GrpcNeedsHttp2.into());
    }
    if !matches!(spec.rekor_version, 1 | 2) {
        return Err(SpecError::RekorVersion(spec.rekor_version).into());
    }
    if let Some(soak) = spec.soak {
        crate::soak::read_proc(soak.pid).map_err(|source| SpecError::ServerPid { pid: soak.pid, source })?;
    }
    if let Some(pid) = spec.server_pid {
        CpuTime::of(pid).map_err(|source| SpecError::ServerPid { pid, source })?;
    }
    let driver = if spec.workload.is_transaction() {
        let seeded = if spec.workload == Workload::Sign {
            Vec::new()
        } else {
            if spec.seed_entries == 0 {
                return Err(SpecError::NeedsSeed(spec.workload).into());
            }
            crate::txn::seed_entries(&dialers.setup, &spec.target, spec.seed_entries)
                .await
                .map_err(|e| LoadError::Target { target: spec.target.to_string(), source: e.into() })?
        };
        let (target, token) = (spec.target.clone(), spec.token.clone());
        let txn = TxnSpec { workload: spec.workload, count: total as usize, rng_seed: spec.rng_seed, rekor_version: spec.rekor_version };
        let t = tokio::task::spawn_blocking(move || Transactions::prepare(&target, &txn, token.as_deref(), &seeded))
            .await
            .map_err(SpecError::Prepare)?
            .map_err(SpecError::from)?;
        Driver::Transactions(Arc::new(t))
    } else {
        let read_size = if spec.workload == Workload::LogRead { tree_size(&dialers.setup, &spec.target).await? } else { 0 };
        let (target, kind, method, body) = (spec.target.clone(), spec.workload, spec.method.clone(), spec.body.clone());
        let (token, headers) = (spec.token.clone(), spec.headers.clone());
        let maker = tokio::task::spawn_blocking(move || {
            RequestMaker::prepare(&target, kind, total as usize, method, body, read_size, token.as_deref(), &headers)
        })
        .await
        .map_err(SpecError::Prepare)?;
        Driver::Requests(maker)
    };

    // Open every keep-alive connection before the clock starts, as wrk does.
    let clients = spec
        .transport
        .clients(&dialers.workers, spec.connections)
        .await
        .map_err(|e| LoadError::Target { target: spec.target.to_string(), source: e.into() })?;
    let start = Instant::now() + Duration::from_millis(20);
    let interval = Duration::from_secs_f64(1.0 / spec.rate);
    let measure_from = start + interval.mul_f64(warm as f64);
    let hard_stop = measure_from + spec.duration + spec.timeout;
    let schedule = Schedule { start, interval, warm, measure_from, total, hard_stop };

    // Client k of W sends requests k, k + W, k + 2W, ... each at its own intended time, as
    // wrk2 does: no shared queue to contend on, and a slow response delays (and is billed to)
    // the requests behind it on that client. W is the connection count, times the streams
    // per connection for HTTP/2.
    let disk = match &spec.disk_probe {
        Some(dir) => Some(
            crate::disk::DiskProbe::start(dir, start.into_std())
                .map_err(|source| SpecError::DiskProbe { dir: dir.clone(), source })?,
        ),
        None => None,
    };
    let stride = clients.len() as u64;
    let recorder = Arc::new(Mutex::new(Recorder::new(spec.timeout)));
    let mut workers = Vec::with_capacity(clients.len());
    for (k, client) in clients.into_iter().enumerate() {
        let (driver, timeout, recorder) = (driver.clone(), spec.timeout, recorder.clone());
        workers.push(tokio::spawn(async move { worker(client, k as u64, stride, schedule, driver, timeout, recorder).await }));
    }
    // The server's CPU from the first measured arrival: the warm-up's is not billed.
    let cpu_from = spec.server_pid.map(|pid| {
        tokio::spawn(async move {
            tokio::time::sleep_until(measure_from).await;
            CpuTime::of(pid).ok()
        })
    });
    let soak = spec.soak.map(|s| {
        let (stop, stopped) = tokio::sync::oneshot::channel();
        (s, stop, tokio::spawn(crate::soak::sample(s.pid, start, stopped)))
    });

    let progress = spec.progress.then(|| {
        let bar = indicatif::ProgressBar::new((spec.warmup + spec.duration).as_secs().max(1));
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {elapsed}/{len}s [{bar:30}] {msg}")
                .expect("template")
                .progress_chars("=> "),
        );
        bar.set_message(format!("{} at {}/s", spec.workload.name(), spec.rate));
        bar
    });
    if let Some(bar) = &progress {
        let bar = bar.clone();
        let secs = (spec.warmup + spec.duration).as_secs();
        tokio::spawn(async move {
            for s in 0..=secs {
                tokio::time::sleep_until(start + Duration::from_secs(s)).await;
                bar.set_position(s);
            }
        });
    }
    for w in workers {
        w.await.map_err(SpecError::Worker)?;
    }
    let cpu_to = spec.server_pid.and_then(|pid| CpuTime::of(pid).ok());
    let mut recorder = std::mem::replace(&mut *lock(&recorder), Recorder::new(spec.timeout));
    recorder.close_seconds_before(u64::MAX);
    let Recorder { total: total_hist, closed_seconds: per_second, errors, ok, expired: dropped, by_kind: kinds, connect, handshake, .. } =
        recorder;
    let disk = match disk {
        Some(probe) => {
            let mut report = probe.finish().map_err(SpecError::DiskProbeFinish)?;
            // The probe's seconds count from the start; the run's from the warm-up's end.
            let offset = measure_from.saturating_duration_since(start).as_secs();
            let p99: Vec<(u64, f64)> = per_second.iter().map(|s| (s.t + offset, s.p99_ms)).collect();
            report.attribute(&p99);
            Some(report)
        }
        None => None,
    };
    let soak = match soak {
        Some((s, stop, task)) => {
            let _ = stop.send(());
            let samples = task.await.map_err(SpecError::SoakSampler)?;
            Some(crate::soak::SoakReport::new(s.pid, s.threshold_pct, samples))
        }
        None => None,
    };
    let elapsed = measure_from.elapsed().as_secs_f64().max(spec.duration.as_secs_f64());
    let server_cpu = match (spec.server_pid, cpu_from) {
        (Some(pid), Some(from)) => match (from.await.map_err(SpecError::Worker)?, cpu_to) {
            (Some(before), Some(after)) => ServerCpu::between(pid, before, after, ok, elapsed),
            _ => None,
        },
        _ => None,
    };
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    Ok(LoadResult {
        workload: spec.workload.name().to_string(),
        target: spec.target.to_string(),
        offered_rps: spec.rate,
        achieved_rps: ok as f64 / elapsed,
        duration_s: elapsed,
        connections: spec.connections,
        scheduled: total.saturating_sub(warm),
        warmup_s: spec.warmup.as_secs_f64(),
        ok,
        latency_ms: Latency::from_histogram(&total_hist),
        errors,
        dropped,
        per_second,
        histogram: Bucket::from_histogram(&total_hist),
        by_kind: kinds
            .into_iter()
            .map(|(k, (h, ok, errors))| {
                let r = KindResult { ok, errors, achieved_rps: ok as f64 / elapsed, latency_ms: Latency::from_histogram(&h) };
                (k.to_string(), r)
            })
            .collect(),
        soak,
        disk,
        server_cpu,
        http: spec.transport.http.name().to_string(),
        streams: (spec.transport.http == HttpVersion::Http2 && !spec.transport.new_connection).then_some(spec.transport.streams),
        new_connection: spec.transport.new_connection,
        tls: dialers.workers.tls_info(),
        connects: connect.len(),
        connect_ms: (!connect.is_empty()).then(|| Latency::from_histogram(&connect)),
        tls_handshake_ms: (!handshake.is_empty()).then(|| Latency::from_histogram(&handshake)),
    })
}

#[derive(Clone, Copy)]
struct Schedule {
    start: Instant,
    /// Arrivals before this index are warm-up: sent, not recorded.
    warm: u64,
    /// The intended time of the first recorded arrival.
    measure_from: Instant,
    interval: Duration,
    total: u64,
    hard_stop: Instant,
}

async fn worker(
    mut conn: Client,
    first: u64,
    stride: u64,
    schedule: Schedule,
    driver: Driver,
    timeout: Duration,
    recorder: Arc<Mutex<Recorder>>,
) {
    let mut i = first;
    while i < schedule.total {
        let intended = schedule.start + schedule.interval.mul_f64(i as f64);
        if intended > Instant::now() {
            tokio::time::sleep_until(intended).await;
        }
        if Instant::now() >= schedule.hard_stop {
            // The run's time is up: what this connection still owes is dropped.
            lock(&recorder).expired += (schedule.total - i).div_ceil(stride);
            break;
        }
        let (kind, err) = match &driver {
            Driver::Requests(maker) => {
                let err = match tokio::time::timeout(timeout, conn.send(&maker.request(i))).await {
                    Ok(Ok(reply)) if (200..300).contains(&reply.status) => None,
                    Ok(Ok(reply)) => Some(Failure::Status(reply.status)),
                    Ok(Err(e)) => Some(Failure::Conn(e)),
                    Err(_) => {
                        conn.reset();
                        Some(Failure::Timeout)
                    }
                };
                (None, err)
            }
            // One timeout covers the whole transaction, from its first request to its last.
            Driver::Transactions(txns) => match tokio::time::timeout(timeout, txns.execute(&mut conn, i)).await {
                Ok((kind, result)) => (Some(kind.name()), result.err().map(Failure::from)),
                Err(_) => {
                    conn.reset();
                    (Some(txns.kind(i).name()), Some(Failure::TransactionTimeout(txns.kind(i))))
                }
            },
        };
        if i >= schedule.warm {
            let now = Instant::now();
            let us = now.saturating_duration_since(intended).as_micros().max(1) as u64;
            let second = intended.saturating_duration_since(schedule.measure_from).as_secs();
            let now_s = now.saturating_duration_since(schedule.measure_from).as_secs();
            let mut r = lock(&recorder);
            r.record(second, now_s, kind, err.map_or(Ok(us), Err));
            for setup in conn.drain_setups() {
                r.record_setup(setup);
            }
        } else {
            conn.drain_setups().for_each(drop);
        }
        i += stride;
    }
}

fn lock(recorder: &Mutex<Recorder>) -> std::sync::MutexGuard<'_, Recorder> {
    recorder.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The current Rekor v1 tree size, so reads pick indices that exist.
async fn tree_size(dialer: &Arc<Dialer>, target: &Uri) -> Result<u64, LoadError> {
    let path = format!("{}/api/v1/log", target.path().trim_end_matches('/'));
    let mut conn = Conn::new(dialer);
    let (status, body) = conn
        .fetch(&crate::conn::request_bytes("GET", target, &path, None))
        .await
        .map_err(|e| LoadError::Target { target: path.clone(), source: e.into() })?;
    let v: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|source| LoadError::Target { target: path.clone(), source: TargetError::NotJson { status, source } })?;
    match v.get("treeSize").and_then(|s| s.as_u64()) {
        Some(n) if n > 0 => Ok(n),
        _ => Err(LoadError::Target { target: path, source: TargetError::EmptyLog }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorder_closes_each_second_once_no_request_can_land_in_it() {
        let mut r = Recorder::new(Duration::from_secs(1)); // settles 3 s after a second ends
        r.record(0, 0, None, Ok(1_000));
        r.record(0, 2, None, Ok(3_000));
        r.record(1, 2, Some("sign"), Ok(2_000));
        r.record(1, 2, Some("sign"), Err(Failure::Status(500)));
        assert!(r.closed_seconds.is_empty(), "second 0 may still receive a late response");
        r.record(4, 4, None, Ok(5_000));
        assert_eq!(r.closed_seconds.iter().map(|s| (s.t, s.ok)).collect::<Vec<_>>(), vec![(0, 2)]);
        assert_eq!(r.open_seconds.keys().copied().collect::<Vec<_>>(), vec![1, 4], "only unsettled seconds stay in memory");
        r.close_seconds_before(u64::MAX);
        assert_eq!(r.closed_seconds.iter().map(|s| (s.t, s.ok)).collect::<Vec<_>>(), vec![(0, 2), (1, 1), (4, 1)]);
        assert_eq!((r.ok, r.total.len()), (4, 4));
        assert_eq!(r.errors.get("status_500"), Some(&1));
        assert_eq!(r.by_kind.get("sign").map(|k| (k.1, k.2)), Some((1, 1)));
        assert!((r.closed_seconds[0].p99_ms - 3.0).abs() < 0.01);
    }
}
