//! `signet bench tls`: report 003's TLS table for signet's backends, measured side by side
//! in one run, optionally beside external servers such as nginx; and `signet bench tls
//! lookup`, report 000's certificate lookup per source. See `signet_lab::tlsbench`.

use std::path::PathBuf;
use std::process::ExitCode;

use signet_lab::tlsbench::lookup::{run_lookup, LookupSpec};
use signet_lab::tlsbench::{self, BenchError, Method, Spec};
use signet_tls::Backend;

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    what: Option<What>,
    #[command(flatten)]
    backends: BackendArgs,
}

#[derive(clap::Subcommand)]
enum What {
    /// Report 000: the cost of obtaining the certificate for one handshake, per certificate
    /// source (file, watch, cached, reload) and backend, on 1 and 32 threads.
    Lookup(LookupArgs),
    /// Report 003's GO/NO-GO: measures servers A and B in one run (backends, or --target
    /// names) and says GO when B is within the margins of A on every measure (handshake,
    /// throughput at each size) or saves CPU per handshake; exit 1 on NO-GO.
    Compare(CompareArgs),
    /// Rotation lag: how soon a certificate rewritten on disk is served by each source (file,
    /// watch) and backend; every handshake meanwhile must succeed.
    Rotation(RotationArgs),
}

#[derive(clap::Args)]
struct RotationArgs {
    /// Backends, comma-separated [default: rustls,openssl].
    #[arg(long, value_delimiter = ',')]
    backends: Option<Vec<String>>,
    /// Sources, comma-separated: file, watch [default: both].
    #[arg(long, value_delimiter = ',')]
    sources: Option<Vec<String>>,
    /// Rotations per source and backend.
    #[arg(long, default_value_t = 20)]
    rotations: usize,
    /// The sources' timer, in ms (file's only trigger; watch's fallback).
    #[arg(long, default_value_t = 1000)]
    interval_ms: u64,
    /// Write the machine-readable result here.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(clap::Args)]
struct CompareArgs {
    /// The baseline: rustls, openssl, or the NAME of a --target.
    a: String,
    /// The candidate judged against A.
    b: String,
    /// Margins in percent: parity=P (handshake and throughput), or handshake=, throughput=,
    /// cpu= (the CPU saving that is GO on its own) [default: parity=10,cpu=10, report 003's].
    #[arg(long, default_value = "parity=10,cpu=10")]
    criteria: String,
    #[command(flatten)]
    common: BackendArgs,
}

#[derive(clap::Args)]
struct LookupArgs {
    /// Backends, comma-separated [default: rustls,openssl].
    #[arg(long, value_delimiter = ',')]
    backends: Option<Vec<String>>,
    /// Sources, comma-separated [default: file,watch,cached,reload].
    #[arg(long, value_delimiter = ',')]
    sources: Option<Vec<String>>,
    /// Thread counts, comma-separated [default: 1,32].
    #[arg(long, value_delimiter = ',')]
    threads: Option<Vec<usize>>,
    /// Rounds per cell, interleaved across sources; a cell is the median of its rounds.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Milliseconds per round (the default run takes about 16 × rounds × this: ~3 s). Raise
    /// it for steadier figures.
    #[arg(long, default_value_t = 40)]
    round_ms: u64,
    /// Write the machine-readable result here.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// `signet bench tls` without a subcommand: report 003's handshake and payload tables.
#[derive(clap::Args)]
struct BackendArgs {
    /// What a message is: `echo` (bytes echoed over the TLS stream, report 003's method) or
    /// `get` (HTTP/1.1 GET /bytes/N answered with N bytes; the method for comparing with a
    /// web server such as nginx serving files of those sizes).
    #[arg(long, default_value = "echo", value_parser = ["echo", "get"])]
    method: String,
    /// In-process servers to measure, comma-separated [default: rustls,openssl].
    #[arg(long, value_delimiter = ',')]
    backends: Option<Vec<String>>,
    /// An external server to measure as well, as NAME=HOST:PORT (repeatable), e.g.
    /// nginx=127.0.0.1:8443. It must speak the chosen --method.
    #[arg(long = "target", value_name = "NAME=HOST:PORT")]
    targets: Vec<String>,
    /// PEM CA certificates that signed the external servers' and --tls-cert's certificates.
    #[arg(long)]
    ca_file: Option<PathBuf>,
    /// The name the client asks for (SNI) and verifies.
    #[arg(long, default_value = "localhost")]
    server_name: String,
    /// The in-process servers' certificate chain (default: a throwaway ECDSA P-256 one).
    /// Give the external servers' own, so that every server signs with the same key type.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// New connections per server: this many full handshakes, then as many resumed from tickets.
    #[arg(long, default_value_t = 500)]
    handshakes: usize,
    /// Payload sizes in bytes, comma-separated [default: 1,64,256,1024,4096,16384,65536].
    #[arg(long, value_delimiter = ',')]
    sizes: Option<Vec<usize>>,
    /// Seconds of messages per size and server, split over --repeats rounds.
    #[arg(long, default_value_t = 0.6)]
    seconds_per_size: f64,
    /// Rounds per size, the servers alternating; MB/s is the median of a server's rounds.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// At most this many messages per round.
    #[arg(long, default_value_t = 50_000)]
    max_messages: usize,
    /// Keep-alive connections per server for the payloads, each with one message in flight
    /// (1: one message at a time, report 003's method).
    #[arg(long, default_value_t = 1)]
    connections: usize,
    /// The process id of a --target server, as NAME=PID (repeatable), to report its CPU time
    /// per handshake (nginx with `master_process off`; the in-process servers' is always read).
    #[arg(long = "pid", value_name = "NAME=PID")]
    pids: Vec<String>,
    /// Write the machine-readable result here.
    #[arg(long)]
    json: Option<PathBuf>,
}

pub fn run(a: Args) -> ExitCode {
    match a.what {
        Some(What::Lookup(l)) => lookup(l),
        Some(What::Compare(c)) => compare(c),
        Some(What::Rotation(r)) => rotation(r),
        None => backends(a.backends),
    }
}

fn lookup(a: LookupArgs) -> ExitCode {
    let usage = |m: String| {
        errln!("signet bench tls lookup: {m}");
        ExitCode::from(2)
    };
    let mut spec = LookupSpec::default();
    if let Some(names) = a.backends {
        match parse_all(&names, "--backends") {
            Ok(b) => spec.backends = b,
            Err(e) => return usage(e),
        }
    }
    if let Some(names) = a.sources {
        match parse_all(&names, "--sources") {
            Ok(s) => spec.sources = s,
            Err(e) => return usage(e),
        }
    }
    if let Some(threads) = a.threads {
        spec.threads = threads;
    }
    if !(1..=60_000).contains(&a.round_ms) {
        return usage("--round-ms must be 1..=60000".into());
    }
    spec.rounds = a.rounds;
    spec.round = std::time::Duration::from_millis(a.round_ms);
    finish("lookup", run_lookup(&spec, &mut |line| errln!("  {line}")), a.json, |r| serde_json::to_string_pretty(r), |r| r.table())
}

/// Parses each of a comma-separated flag's values.
fn parse_all<T: std::str::FromStr>(names: &[String], flag: &str) -> Result<Vec<T>, String>
where
    T::Err: std::fmt::Display,
{
    names.iter().map(|n| n.parse::<T>()).collect::<Result<Vec<_>, _>>().map_err(|e| format!("{flag}: {e}"))
}

/// Ends `signet bench tls <command>`: a usage error exits 2, another error 1; a report is
/// written to `json` when asked, and its table printed.
fn finish<R>(
    command: &str,
    run: Result<R, BenchError>,
    json: Option<PathBuf>,
    to_json: impl Fn(&R) -> serde_json::Result<String>,
    table: impl Fn(&R) -> String,
) -> ExitCode {
    let report = match run {
        Ok(r) => r,
        Err(e) if e.is_usage() => {
            errln!("signet bench tls {command}: {e}");
            return ExitCode::from(2);
        }
        Err(e) => {
            errln!("signet bench tls {command}: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(path) = json {
        let written = to_json(&report).map_err(|e| e.to_string()).and_then(|text| std::fs::write(&path, text).map_err(|e| e.to_string()));
        if let Err(e) = written {
            errln!("signet bench tls {command}: writing {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    out!("{}", table(&report));
    ExitCode::SUCCESS
}

fn rotation(a: RotationArgs) -> ExitCode {
    use signet_lab::tlsbench::rotation::{run_rotation, RotationSpec};
    let usage = |m: String| {
        errln!("signet bench tls rotation: {m}");
        ExitCode::from(2)
    };
    let mut spec = RotationSpec::default();
    if let Some(names) = a.backends {
        match parse_all(&names, "--backends") {
            Ok(b) => spec.backends = b,
            Err(e) => return usage(e),
        }
    }
    if let Some(names) = a.sources {
        match parse_all(&names, "--sources") {
            Ok(s) => spec.sources = s,
            Err(e) => return usage(e),
        }
    }
    if !(10..=3_600_000).contains(&a.interval_ms) {
        return usage("--interval-ms must be 10..=3600000".into());
    }
    spec.rotations = a.rotations;
    spec.interval = std::time::Duration::from_millis(a.interval_ms);
    finish("rotation", run_rotation(&spec, &mut |line| errln!("  {line}")), a.json, |r| serde_json::to_string_pretty(r), |r| r.table())
}

fn spec_of(a: &BackendArgs) -> Result<Spec, BenchError> {
    let backends = a.backends.as_deref().map_or_else(|| Ok(Backend::ALL.to_vec()), tlsbench::parse_backends)?;
    let targets = a.targets.iter().map(|t| tlsbench::parse_target(t)).collect::<Result<Vec<_>, _>>()?;
    let pids = a.pids.iter().map(|p| tlsbench::parse_pid(p)).collect::<Result<Vec<_>, _>>()?;
    let spec = Spec {
        method: if a.method == "get" { Method::Get } else { Method::Echo },
        backends,
        targets,
        ca_file: a.ca_file.clone(),
        server_name: a.server_name.clone(),
        cert: a.tls_cert.clone().zip(a.tls_key.clone()),
        handshakes: a.handshakes,
        sizes: a.sizes.clone().unwrap_or_else(|| tlsbench::REPORT_SIZES.to_vec()),
        seconds_per_size: a.seconds_per_size,
        repeats: a.repeats,
        max_messages: a.max_messages,
        connections: a.connections,
        pids,
    };
    spec.check_limits()?;
    Ok(spec)
}

fn compare(c: CompareArgs) -> ExitCode {
    let usage = |m: String| {
        errln!("signet bench tls compare: {m}");
        ExitCode::from(2)
    };
    let criteria = match c.criteria.parse::<tlsbench::compare::Criteria>() {
        Ok(criteria) => criteria,
        Err(e) => return usage(format!("--criteria: {e}")),
    };
    if c.common.backends.is_some() {
        return usage("--backends is not used: the servers are A and B".into());
    }
    if c.a == c.b {
        return usage(format!("A and B are both {:?}; compare two different servers", c.a));
    }
    let mut spec = match spec_of(&c.common) {
        Ok(spec) => spec,
        Err(e) => return usage(e.to_string()),
    };
    if c.common.sizes.is_none() {
        spec.sizes = tlsbench::compare::SIZES.to_vec();
    }
    let report = match tlsbench::compare::measure(spec, &c.a, &c.b, &mut |line| errln!("  {line}")) {
        Ok(r) => r,
        Err(e) if e.is_usage() => return usage(e.to_string()),
        Err(e) => {
            errln!("signet bench tls compare: {e}");
            return ExitCode::FAILURE;
        }
    };
    if !super::bench_json::write_json("tls compare", c.common.json.as_deref(), &report) {
        return ExitCode::FAILURE;
    }
    match tlsbench::compare::judge(&report, &c.a, &c.b, &criteria) {
        Ok(verdict) => {
            out!("{}", report.tables());
            out!("\n{}", verdict.text);
            if verdict.go { ExitCode::SUCCESS } else { ExitCode::FAILURE }
        }
        Err(e) => {
            errln!("signet bench tls compare: {e}");
            ExitCode::FAILURE
        }
    }
}

fn backends(a: BackendArgs) -> ExitCode {
    let usage = |m: String| {
        errln!("signet bench tls: {m}");
        ExitCode::from(2)
    };
    let spec = match spec_of(&a) {
        Ok(spec) => spec,
        Err(e) => return usage(e.to_string()),
    };
    let report = match tlsbench::run(&spec, &mut |line| errln!("  {line}")) {
        Ok(r) => r,
        Err(e) if e.is_usage() => return usage(e.to_string()),
        Err(e) => {
            errln!("signet bench tls: {e}");
            return ExitCode::FAILURE;
        }
    };
    if !super::bench_json::write_json("tls", a.json.as_deref(), &report) {
        return ExitCode::FAILURE;
    }
    out!("{}", report.tables());
    ExitCode::SUCCESS
}
