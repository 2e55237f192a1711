//! `signet bench`: the performance lab.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use signet_lab::load::SoakSpec;
use signet_lab::preset::{self, Preset};
use signet_lab::transport::{HttpVersion, Transport};
use signet_lab::{LoadSpec, Workload};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(clap::Subcommand)]
enum What {
    /// Open-loop load at a constant arrival rate; latency from intended send times.
    Load(Box<LoadArgs>),
    /// In-process bundle verification per bundle, optionally beside a peer verifier.
    Verify(super::bench_verify::Args),
    /// Compare two load results of one workload; exit 1 when p99, throughput or errors regressed.
    Compare(super::bench_gates::CompareArgs),
    /// Judge load results against a criteria file; print GO (exit 0) or NO-GO (exit 1).
    Gonogo(super::bench_gates::GonogoArgs),
    /// Print a summary table of load results and optionally write an HTML page with charts.
    Report(super::bench_gates::ReportArgs),
    /// The server's CPU per operation against the crypto floor of the operation, in one run.
    Cost(super::bench_cost::Args),
    /// Crypto micro-benchmarks: aws-lc-rs beside OpenSSL (libssl 3), median ops/s of interleaved repeats.
    Crypto(super::bench_crypto::Args),
    /// Criterion micro-benchmarks of the crates (core, log, ca), by suite or id filter; `--list` names them.
    Micro(super::bench_micro::Args),
    /// TLS backends side by side (report 003): handshake time, and throughput and latency per payload size; `tls lookup`: the certificate lookup per source (report 000).
    Tls(super::bench_tls::Args),
    /// One log of millions of entries on SQLite: open time, memory, lookup latency, bytes per entry.
    Scale(super::bench_scale::Args),
    /// `signet monitor` catching up with a long log (1M entries by default): entries/s.
    Monitor(super::bench_monitor::Args),
}

#[derive(clap::Args)]
struct LoadArgs {
    /// Base URL of the instance (for `custom`, the full URL to request).
    #[arg(long)]
    target: String,
    /// sign, verify, mixed (20% sign / 80% verify), log-append, log-append-v2, log-append-intoto, log-read, cert, tsa or custom.
    #[arg(long)]
    workload: Workload,
    /// low, medium, high, stress (100 / 1,000 / 10,000 / 50,000 per second for 30 s), or soak
    /// (100/s, needs --duration and --server-pid). Explicit --rate, --duration, --connections win.
    #[arg(long)]
    preset: Option<Preset>,
    /// Offered requests (transactions, for sign/verify/mixed) per second.
    #[arg(long)]
    rate: Option<f64>,
    /// Seconds of arrivals.
    #[arg(long)]
    duration: Option<f64>,
    /// Connections (64 without a preset): keep-alive connections, or with --new-connection
    /// the most connections open at once.
    #[arg(long)]
    connections: Option<usize>,
    /// HTTP version: 1.1, or 2 (h2c with prior knowledge over http://, ALPN h2 over https://).
    #[arg(long, default_value = "1.1")]
    http: HttpVersion,
    /// HTTP/2 keep-alive: the most concurrent streams per connection [default: 100].
    #[arg(long)]
    streams: Option<usize>,
    /// Open a new connection (TCP, and TLS for https) for every request and close it after;
    /// latency then includes the setup, which is also reported on its own (connect_ms).
    #[arg(long)]
    new_connection: bool,
    /// PEM CA certificates to trust for an https:// target (default: the platform's roots).
    #[arg(long)]
    ca_file: Option<PathBuf>,
    /// Per-request timeout in seconds.
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
    /// HTTP method for `custom`.
    #[arg(long, default_value = "GET")]
    method: String,
    /// Request body for `custom`; each `{n}` in it becomes a number unique to the request.
    #[arg(long, default_value = "")]
    body: String,
    /// Extra request header, as 'Name: value' (repeatable), e.g. 'Authorization: Bearer sgt_…';
    /// every workload but the sign, verify and mixed transactions.
    #[arg(long = "header")]
    headers: Vec<String>,
    /// Write the machine-readable result here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Identity token for the `cert`, `sign` and `mixed` workloads (e.g. from `signet dev-token`).
    #[arg(long)]
    token: Option<String>,
    /// Where `sign` transactions append: 1 (Rekor v1) or 2 (Rekor v2).
    #[arg(long, default_value_t = 1)]
    rekor_version: u8,
    /// Entries appended before the clock starts for `verify` and `mixed` to look up.
    #[arg(long, default_value_t = 1000)]
    seed: usize,
    /// Seed of the per-arrival choices (sign or verify; which digest).
    #[arg(long, default_value_t = 1)]
    rng_seed: u64,
    /// The server's process ID: its CPU per answered operation over the measured window is
    /// reported (from /proc), and `--preset soak` samples it every second.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Soak: RSS or fd growth above this percentage (first to last tenth of the run) is "growth".
    #[arg(long, default_value_t = signet_lab::soak::DEFAULT_GROWTH_PCT)]
    soak_growth_pct: f64,
    /// Sample the disk's own fdatasync latency in this directory during the run (4 KiB every
    /// 10 ms), to tell the disk's slow seconds from the server's. Use the server's data dir.
    #[arg(long)]
    disk_probe: Option<PathBuf>,
    /// Seconds of arrivals at the same rate before the measured --duration, not recorded.
    #[arg(long, default_value_t = 0.0)]
    warmup: f64,
}

pub fn run(args: Args) -> ExitCode {
    match args.what {
        What::Load(a) => load(*a),
        What::Verify(a) => super::bench_verify::run(a),
        What::Compare(a) => super::bench_gates::compare(a),
        What::Gonogo(a) => super::bench_gates::gonogo(a),
        What::Report(a) => super::bench_gates::report(a),
        What::Cost(a) => super::bench_cost::run(a),
        What::Crypto(a) => super::bench_crypto::run(a),
        What::Micro(a) => super::bench_micro::run(a),
        What::Tls(a) => super::bench_tls::run(a),
        What::Scale(a) => super::bench_scale::run(a),
        What::Monitor(a) => super::bench_monitor::run(a),
    }
}

fn load(a: LoadArgs) -> ExitCode {
    let usage = |m: String| {
        errln!("signet bench load: {m}");
        ExitCode::from(2)
    };
    let Ok(target) = a.target.parse() else { return usage(format!("--target {:?} is not a URL", a.target)) };
    let Ok(method) = a.method.parse() else { return usage(format!("--method {:?} is not an HTTP method", a.method)) };
    let r = match preset::resolve(a.preset, a.rate, a.duration, a.connections) {
        Ok(r) => r,
        Err(e) => return usage(e.to_string()),
    };
    let soak = match (a.preset, a.server_pid) {
        (Some(Preset::Soak), Some(_)) if !(a.soak_growth_pct >= 0.0) => {
            return usage(format!("--soak-growth-pct must be a percentage >= 0, got {}", a.soak_growth_pct))
        }
        (Some(Preset::Soak), Some(pid)) => Some(SoakSpec { pid, threshold_pct: a.soak_growth_pct }),
        (Some(Preset::Soak), None) => return usage("--preset soak needs --server-pid PID (the signet serve process to sample)".into()),
        _ => None,
    };
    if !(r.duration > 0.0 && r.duration <= 86_400.0) || !(a.timeout > 0.0 && a.timeout <= 600.0) {
        return usage("--duration must be in (0, 86400] and --timeout in (0, 600] seconds".into());
    }
    if !(0.0..=3600.0).contains(&a.warmup) {
        return usage(format!("--warmup must be in [0, 3600] seconds, got {}", a.warmup));
    }
    let streams = match (a.streams, a.http, a.new_connection) {
        (Some(_), HttpVersion::Http1, _) => return usage("--streams needs --http 2 (HTTP/1.1 sends one request at a time per connection)".into()),
        (Some(_), _, true) => return usage("--streams does not go with --new-connection (each request has its own connection)".into()),
        (Some(n), _, _) => n,
        (None, _, _) => Transport::default().streams,
    };
    let mut headers = Vec::new();
    for h in &a.headers {
        match h.split_once(':').map(|(n, v)| (n.trim(), v.trim())) {
            Some((n, v)) if http::HeaderName::try_from(n).is_ok() && http::HeaderValue::try_from(v).is_ok() => {
                headers.push((n.to_string(), v.to_string()))
            }
            _ => return usage(format!("--header {h:?} is not 'Name: value'")),
        }
    }
    // A transaction's requests are made as it goes, from what earlier ones answered.
    if !headers.is_empty() && matches!(a.workload, Workload::Sign | Workload::Verify | Workload::Mixed) {
        return usage("--header applies to single-request workloads (custom, log-append, log-append-v2, log-append-intoto, log-read, cert, tsa), not to sign, verify or mixed transactions".into());
    }
    let transport = Transport { http: a.http, streams, new_connection: a.new_connection, ca_file: a.ca_file };
    let spec = LoadSpec {
        target,
        workload: a.workload,
        rate: r.rate,
        duration: Duration::from_secs_f64(r.duration),
        connections: r.connections,
        method,
        body: a.body.into_bytes().into(),
        headers,
        timeout: Duration::from_secs_f64(a.timeout),
        progress: true,
        token: a.token,
        rekor_version: a.rekor_version,
        seed_entries: a.seed,
        rng_seed: a.rng_seed,
        soak,
        server_pid: a.server_pid,
        disk_probe: a.disk_probe,
        warmup: Duration::from_secs_f64(a.warmup),
        transport,
    };
    // One event-loop thread drives every connection: the generator shares its cores with the
    // server it measures, and one thread costs it less CPU per request than the work-stealing
    // runtime (docs/performance.md, "The measurements behind the code's shape"). Entries are
    // signed beforehand on every core.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    let result = match runtime.block_on(signet_lab::run(spec)) {
        Ok(r) => r,
        Err(e @ signet_lab::load::LoadError::Spec(_)) => return usage(e.to_string()),
        Err(e) => {
            errln!("signet bench load: {e}");
            return ExitCode::FAILURE;
        }
    };
    if !super::bench_json::write_json("load", a.json.as_deref(), &result) {
        return ExitCode::FAILURE;
    }
    out!("{}", result.table());
    ExitCode::SUCCESS
}
