//! `signet bench tls`: report 003's measurements for signet's TLS backends, side by side in
//! one run — the TLS 1.3 handshake (median and p99 over new connections, cipher named), and
//! per payload size the throughput and per-message latency over one connection.
//!
//! - [`servers`]: the in-process servers, one per backend (echo, or HTTP GET of N bytes).
//! - [`client`]: the one rustls client that measures them all.
//! - [`cpu`]: the servers' own CPU time per handshake, from `/proc`.
//! - [`compare`]: report 003's GO/NO-GO: parity within a margin, or a CPU saving.
//! - [`lookup`]: `signet bench tls lookup`, report 000's per-handshake certificate lookup for
//!   each certificate source.
//! - [`rotation`]: `signet bench tls rotation`, how soon a rewritten certificate is served.
//!
//! External servers (`--target NAME=HOST:PORT`, e.g. nginx) are measured by the same client
//! with the same method, between the in-process ones. Servers are measured in turn, size by
//! size and in alternating batches of handshakes, so that a slow second on a shared machine
//! falls on all of them alike rather than on whichever ran then.

pub mod client;
pub mod compare;
pub mod cpu;
pub mod lookup;
pub mod rotation;
pub mod servers;

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use serde::Serialize;
use signet_tls::{Acceptor, Backend, CertifiedPair};

use crate::table::{self, Align, Table};
use client::{quantile, Agreed, Client};
pub use servers::Method;

pub use crate::error::BenchError;

/// The sizes of report 003's table, plus 64 KiB (where it saw a cliff).
pub const REPORT_SIZES: [usize; 7] = [1, 64, 256, 1024, 4096, 16384, 65536];

pub struct Spec {
    pub method: Method,
    /// In-process servers, measured in this order.
    pub backends: Vec<Backend>,
    /// External servers: a name for the table, and where they listen.
    pub targets: Vec<(String, SocketAddr)>,
    /// CA certificates that sign the external servers' (and `cert`'s) certificates.
    pub ca_file: Option<PathBuf>,
    /// SNI and certificate name.
    pub server_name: String,
    /// The in-process servers' certificate and key; a throwaway P-256 pair when absent.
    pub cert: Option<(PathBuf, PathBuf)>,
    pub handshakes: usize,
    pub sizes: Vec<usize>,
    /// Seconds per size and server, split over `repeats` rounds.
    pub seconds_per_size: f64,
    pub repeats: usize,
    /// At most this many messages per round.
    pub max_messages: usize,
    /// Keep-alive connections per server for the payloads, each with one message in flight
    /// (1: report 003's one message at a time).
    pub connections: usize,
    /// The process ids of external servers, by name, to read their CPU time.
    pub pids: Vec<(String, u32)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// `echo` or `get`.
    pub method: String,
    /// Connections per server for the payloads.
    pub connections: usize,
    pub servers: Vec<ServerResult>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ServerResult {
    pub name: String,
    pub agreed: Agreed,
    pub handshakes: usize,
    pub handshake_ms_p50: f64,
    pub handshake_ms_p99: f64,
    /// The server's CPU time per 1,000 full handshakes, in ms: the median of its batches of 25
    /// (None when `/proc` has no figure for it: an external server without `--pid`).
    pub handshake_cpu_ms_per_1000: Option<f64>,
    /// Handshakes that resumed a session from a ticket, one at a time.
    pub resumed: usize,
    pub resumed_ms_p50: f64,
    pub resumed_ms_p99: f64,
    pub payloads: Vec<PayloadResult>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PayloadResult {
    pub bytes: usize,
    pub messages: usize,
    /// Payload bytes per second one way, in MB/s (10^6 bytes): the median of the rounds.
    pub mb_s: f64,
    /// Per-message round trip: the median of the rounds' medians (and of their p99s).
    pub latency_ms_p50: f64,
    pub latency_ms_p99: f64,
}

struct Server {
    name: String,
    addr: SocketAddr,
    _local: Option<servers::LocalServer>,
    cpu: Option<cpu::CpuSource>,
}

impl Spec {
    /// Checks the counts and durations of the measurement.
    pub fn check_limits(&self) -> Result<(), BenchError> {
        if !(0.01..=60.0).contains(&self.seconds_per_size) || self.handshakes == 0 || self.max_messages == 0 || self.repeats == 0 {
            return Err(BenchError::Limits);
        }
        Ok(())
    }
}

/// The backends `--backends` names.
pub fn parse_backends(names: &[String]) -> Result<Vec<Backend>, BenchError> {
    names.iter().map(|b| b.parse::<Backend>()).collect::<Result<Vec<_>, _>>().map_err(BenchError::Backend)
}

/// `--target NAME=HOST:PORT`: the name, and the first address HOST resolves to.
pub fn parse_target(t: &str) -> Result<(String, SocketAddr), BenchError> {
    let given = || t.to_string();
    let (name, host) = t.split_once('=').ok_or_else(|| BenchError::TargetSyntax { given: given() })?;
    let addr = host
        .to_socket_addrs()
        .map_err(|source| BenchError::TargetResolve { given: given(), source })?
        .next()
        .ok_or_else(|| BenchError::TargetNoAddress { given: given(), host: host.to_string() })?;
    if name.is_empty() {
        return Err(BenchError::TargetName { given: given() });
    }
    Ok((name.to_string(), addr))
}

/// `--pid NAME=PID`.
pub fn parse_pid(p: &str) -> Result<(String, u32), BenchError> {
    p.split_once('=')
        .and_then(|(name, pid)| Some((name.to_string(), pid.parse().ok()?)))
        .filter(|(name, _)| !name.is_empty())
        .ok_or_else(|| BenchError::PidSyntax { given: p.to_string() })
}

/// Runs the whole measurement; `progress` gets one line per step.
pub fn run(spec: &Spec, progress: &mut dyn FnMut(String)) -> Result<Report, BenchError> {
    if spec.backends.is_empty() && spec.targets.is_empty() {
        return Err(BenchError::Usage("nothing to measure: no --backend and no --target".into()));
    }
    if spec.sizes.iter().any(|s| *s == 0 || *s > servers::MAX_BODY) {
        return Err(BenchError::Usage(format!("--sizes must be 1..={} bytes", servers::MAX_BODY)));
    }
    let (pair, mut roots) = certificate(spec)?;
    if let Some(ca) = &spec.ca_file {
        roots.extend(read_certs(ca)?);
    }
    let mut all = Vec::new();
    for backend in &spec.backends {
        let acceptor = Acceptor::new(*backend, &pair).map_err(|e| BenchError::Setup(e.to_string()))?;
        let local = servers::LocalServer::start(acceptor, spec.method).map_err(|e| BenchError::Setup(format!("starting the {backend} server: {e}")))?;
        let cpu = local.tid.map(cpu::CpuSource::Thread);
        all.push(Server { name: backend.name().to_string(), addr: local.addr, _local: Some(local), cpu });
    }
    for (name, addr) in &spec.targets {
        let cpu = spec.pids.iter().find(|(n, _)| n == name).map(|(_, pid)| cpu::CpuSource::Process(*pid));
        all.push(Server { name: name.clone(), addr: *addr, _local: None, cpu });
    }
    if let Some((name, _)) = spec.pids.iter().find(|(n, _)| !spec.targets.iter().any(|(t, _)| t == n)) {
        return Err(BenchError::Usage(format!("--pid {name}=…: no --target is named {name:?}")));
    }
    if spec.connections == 0 || spec.connections > 1024 {
        return Err(BenchError::Usage("--connections must be 1..=1024".into()));
    }
    let client = Client::new(client_config(roots)?, &spec.server_name, spec.method)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| BenchError::Setup(e.to_string()))?;
    rt.block_on(measure(spec, &all, &client, progress))
}

async fn measure(spec: &Spec, all: &[Server], client: &Client, progress: &mut dyn FnMut(String)) -> Result<Report, BenchError> {
    // Handshakes in alternating batches, each server's total capped in time as well.
    const BATCH: usize = 25;
    let mut times: Vec<Vec<u64>> = vec![Vec::new(); all.len()];
    // Each server's CPU per handshake in each of its own batches (none works while another is
    // measured); the figure is the median batch, so that one batch that shared its core with
    // something else does not decide it.
    let mut cpu_per_handshake: Vec<Option<Vec<f64>>> = all.iter().map(|s| s.cpu.as_ref().map(|_| Vec::new())).collect();
    let mut agreed: Vec<Option<Agreed>> = vec![None; all.len()];
    let deadline = std::time::Instant::now() + Duration::from_secs_f64(4.0 * all.len() as f64);
    while times.iter().any(|t| t.len() < spec.handshakes) && std::time::Instant::now() < deadline {
        for (i, server) in all.iter().enumerate() {
            let before = server.cpu.as_ref().and_then(cpu::CpuSource::ns);
            let mut open = Vec::with_capacity(BATCH);
            let batch = BATCH.min(spec.handshakes.saturating_sub(times[i].len()));
            for _ in 0..batch {
                let (took, tls) = client.handshake(&server.name, server.addr).await?;
                agreed[i].get_or_insert_with(|| Client::agreed(&tls));
                times[i].push(took.as_nanos() as u64);
                open.push(tls);
            }
            // Closed after the batch, inside its CPU window: a connection's teardown is part of its cost.
            for mut tls in open {
                let _ = tokio::io::AsyncWriteExt::shutdown(&mut tls).await;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
            let after = server.cpu.as_ref().and_then(cpu::CpuSource::ns);
            match (cpu_per_handshake[i].as_mut(), before, after) {
                (Some(batches), Some(b), Some(a)) if batch > 0 => batches.push(a.saturating_sub(b) as f64 / batch as f64),
                (Some(_), Some(_), Some(_)) => {}
                _ => cpu_per_handshake[i] = None,
            }
        }
    }
    // Resumed handshakes the same way, after one that takes the first ticket.
    let mut resumed: Vec<Vec<u64>> = vec![Vec::new(); all.len()];
    let resumers: Vec<_> = all.iter().map(|_| client.resumer()).collect();
    for (server, resumer) in all.iter().zip(&resumers) {
        client.resumed(resumer, &server.name, server.addr, false).await?;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs_f64(4.0 * all.len() as f64);
    while resumed.iter().any(|t| t.len() < spec.handshakes) && std::time::Instant::now() < deadline {
        for (i, server) in all.iter().enumerate() {
            for _ in 0..BATCH.min(spec.handshakes.saturating_sub(resumed[i].len())) {
                resumed[i].push(client.resumed(&resumers[i], &server.name, server.addr, true).await?.as_nanos() as u64);
            }
        }
    }
    let mut results: Vec<ServerResult> = all
        .iter()
        .zip(times.iter_mut().zip(agreed).zip(resumed.iter_mut()).zip(cpu_per_handshake.iter_mut()))
        .map(|(server, (((t, agreed), r), cpu))| {
            t.sort_unstable();
            r.sort_unstable();
            ServerResult {
                name: server.name.clone(),
                agreed: agreed.unwrap_or(Agreed { version: "none".into(), cipher: "none".into() }),
                handshakes: t.len(),
                handshake_ms_p50: quantile(t, 0.5) / 1e6,
                handshake_ms_p99: quantile(t, 0.99) / 1e6,
                handshake_cpu_ms_per_1000: cpu.as_mut().filter(|b| !b.is_empty()).map(|batches| {
                    batches.sort_by(f64::total_cmp);
                    batches[batches.len() / 2] / 1e3
                }),
                resumed: r.len(),
                resumed_ms_p50: quantile(r, 0.5) / 1e6,
                resumed_ms_p99: quantile(r, 0.99) / 1e6,
                payloads: Vec::new(),
            }
        })
        .collect();
    for r in &results {
        progress(format!(
            "{:<10} handshake p50 {:.3} ms over {} ({}); resumed p50 {:.3} ms over {}",
            r.name, r.handshake_ms_p50, r.handshakes, r.agreed.cipher, r.resumed_ms_p50, r.resumed
        ));
    }
    // Each size is measured in `repeats` short rounds, servers alternating within a round;
    // a server's MB/s is the median of its rounds, so that one stalled round (another
    // process took the core) does not decide the row.
    let repeats = spec.repeats.max(1);
    let budget = Duration::from_secs_f64(spec.seconds_per_size / repeats as f64);
    for size in &spec.sizes {
        let mut rounds: Vec<Vec<client::PayloadRun>> = vec![Vec::new(); all.len()];
        for round in 0..repeats {
            let order: Vec<usize> = if round % 2 == 0 { (0..all.len()).collect() } else { (0..all.len()).rev().collect() };
            for i in order {
                rounds[i].push(match spec.connections {
                    1 => client.payload(&all[i].name, all[i].addr, *size, budget, spec.max_messages).await?,
                    n => client.payload_concurrent(&all[i].name, all[i].addr, *size, budget, spec.max_messages, n).await?,
                });
            }
        }
        for (i, runs) in rounds.iter().enumerate() {
            let mut rates: Vec<f64> = runs.iter().map(|r| (*size * r.messages) as f64 / r.elapsed.as_secs_f64() / 1e6).collect();
            rates.sort_by(f64::total_cmp);
            let mut p50s: Vec<f64> = runs.iter().map(|r| r.median_us).collect();
            p50s.sort_by(f64::total_cmp);
            let mut p99s: Vec<f64> = runs.iter().map(|r| r.p99_us).collect();
            p99s.sort_by(f64::total_cmp);
            let result = PayloadResult {
                bytes: *size,
                messages: runs.iter().map(|r| r.messages).sum(),
                mb_s: rates[rates.len() / 2],
                latency_ms_p50: p50s[p50s.len() / 2] / 1e3,
                latency_ms_p99: p99s[p99s.len() / 2] / 1e3,
            };
            progress(format!("{:<10} {:>6} B  {:>9.2} MB/s  p50 {:.3} ms", all[i].name, size, result.mb_s, result.latency_ms_p50));
            results[i].payloads.push(result);
        }
    }
    Ok(Report {
        method: match spec.method { Method::Echo => "echo", Method::Get => "get" }.into(),
        connections: spec.connections,
        servers: results,
    })
}

/// The in-process servers' pair, and the roots that verify it.
fn certificate(spec: &Spec) -> Result<(CertifiedPair, Vec<CertificateDer<'static>>), BenchError> {
    match &spec.cert {
        Some((cert, key)) => {
            if spec.ca_file.is_none() {
                return Err(BenchError::Usage("--tls-cert needs --ca-file: the CA that signed it, for the client to trust".into()));
            }
            let pair = CertifiedPair::from_files(cert, key).map_err(|e| BenchError::Setup(e.to_string()))?;
            Ok((pair, Vec::new()))
        }
        None => {
            if !spec.targets.is_empty() && spec.ca_file.is_none() {
                return Err(BenchError::Usage("--target needs --ca-file: the CA that signed the target's certificate".into()));
            }
            let pki = signet_tls::testing::TestPki::new();
            let pem = pki.server_pem();
            let pair = CertifiedPair::from_pem(pem.chain.as_bytes(), pem.key.as_bytes(), "generated", "generated")
                .map_err(|e| BenchError::Setup(e.to_string()))?;
            let roots = CertificateDer::pem_slice_iter(pki.ca_pem.as_bytes()).collect::<Result<Vec<_>, _>>().map_err(|e| BenchError::Setup(e.to_string()))?;
            Ok((pair, roots))
        }
    }
}

fn read_certs(path: &std::path::Path) -> Result<Vec<CertificateDer<'static>>, BenchError> {
    let pem = std::fs::read(path).map_err(|e| BenchError::Usage(format!("--ca-file {}: {e}", path.display())))?;
    CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| BenchError::Usage(format!("--ca-file {}: not PEM: {e}", path.display())))
}

fn client_config(roots: Vec<CertificateDer<'static>>) -> Result<rustls::ClientConfig, BenchError> {
    let mut store = rustls::RootCertStore::empty();
    for root in roots {
        store.add(root).map_err(|e| BenchError::Usage(format!("--ca-file: not a usable CA certificate: {e}")))?;
    }
    Ok(rustls::ClientConfig::builder_with_provider(signet_tls::client::provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| BenchError::Setup(e.to_string()))?
        .with_root_certificates(store)
        .with_no_client_auth())
}

impl Report {
    /// Report 003's two tables: handshakes, then payloads, each server beside the first.
    pub fn tables(&self) -> String {
        let Some(base) = self.servers.first() else { return String::new() };
        let mut hs = Table::new(&[
            ("server", Align::Left),
            ("protocol", Align::Left),
            ("cipher", Align::Left),
            ("handshakes", Align::Right),
            ("handshake p50 ms", Align::Right),
            ("p99 ms", Align::Right),
            (&format!("p50 vs {}", base.name), Align::Right),
            ("resumed p50 ms", Align::Right),
            ("resumed p99 ms", Align::Right),
            ("resumed/s, one at a time", Align::Right),
            ("server CPU ms / 1,000 full", Align::Right),
            (&format!("CPU vs {}", base.name), Align::Right),
        ]);
        for s in &self.servers {
            hs.row(vec![
                s.name.clone(),
                s.agreed.version.clone(),
                s.agreed.cipher.clone(),
                s.handshakes.to_string(),
                format!("{:.3}", s.handshake_ms_p50),
                format!("{:.3}", s.handshake_ms_p99),
                delta(s.handshake_ms_p50, base.handshake_ms_p50),
                format!("{:.3}", s.resumed_ms_p50),
                format!("{:.3}", s.resumed_ms_p99),
                table::num(1e3 / s.resumed_ms_p50, 0),
                s.handshake_cpu_ms_per_1000.map_or("n/a".into(), |c| format!("{c:.0}")),
                match (s.handshake_cpu_ms_per_1000, base.handshake_cpu_ms_per_1000) {
                    (Some(c), Some(b)) => format!("{:.2}×", c / b),
                    _ => "n/a".into(),
                },
            ]);
        }
        let mut columns: Vec<(String, Align)> = vec![("payload".into(), Align::Right)];
        for s in &self.servers {
            columns.push((format!("{} MB/s", s.name), Align::Right));
            columns.push((format!("{} p50 ms", s.name), Align::Right));
        }
        for s in &self.servers[1..] {
            columns.push((format!("{} vs {} MB/s", s.name, base.name), Align::Right));
        }
        let refs: Vec<(&str, Align)> = columns.iter().map(|(h, a)| (h.as_str(), *a)).collect();
        let mut pay = Table::new(&refs);
        for (k, p) in base.payloads.iter().enumerate() {
            let mut row = vec![size_name(p.bytes)];
            for s in &self.servers {
                row.push(table::num(s.payloads[k].mb_s, 2));
                row.push(format!("{:.3}", s.payloads[k].latency_ms_p50));
            }
            for s in &self.servers[1..] {
                row.push(delta(s.payloads[k].mb_s, p.mb_s));
            }
            pay.row(row);
        }
        let how = match (self.method.as_str(), self.connections) {
            ("echo", 1) => "echo over one connection, one message in flight".to_string(),
            ("echo", n) => format!("echo over {n} connections at once, one message in flight on each"),
            (_, 1) => "HTTP/1.1 GET of an N-byte body over one keep-alive connection, one request in flight".to_string(),
            (_, n) => format!("HTTP/1.1 GET of an N-byte body over {n} keep-alive connections at once, one request in flight on each"),
        };
        format!("TLS handshakes (full: no resumption; resumed: from the previous connection's ticket; new connection each):\n\n{}\nPayloads ({how}):\n\n{}", hs.render(), pay.render())
    }
}

fn delta(v: f64, base: f64) -> String {
    if base > 0.0 && v.is_finite() {
        format!("{:+.1}%", (v / base - 1.0) * 100.0)
    } else {
        "n/a".into()
    }
}

fn size_name(bytes: usize) -> String {
    match bytes {
        b if b >= 1024 && b % 1024 == 0 => format!("{} KiB", b / 1024),
        b => format!("{b} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_and_pids_parse_or_say_what_was_expected() {
        assert_eq!(parse_target("nginx=127.0.0.1:8443").unwrap(), ("nginx".into(), "127.0.0.1:8443".parse().unwrap()));
        assert_eq!(parse_target("nginx").unwrap_err().to_string(), "--target \"nginx\": expected NAME=HOST:PORT");
        assert_eq!(parse_target("=127.0.0.1:1").unwrap_err().to_string(), "--target \"=127.0.0.1:1\": the name before = is empty");
        assert!(matches!(parse_target("x=no port"), Err(BenchError::TargetResolve { .. })));
        assert_eq!(parse_pid("nginx=12").unwrap(), ("nginx".into(), 12));
        for bad in ["nginx", "=12", "nginx=x"] {
            assert_eq!(parse_pid(bad).unwrap_err().to_string(), format!("--pid {bad:?}: expected NAME=PID, e.g. nginx=1234"));
        }
        assert_eq!(parse_backends(&["openssl".into()]).unwrap(), vec![Backend::Openssl]);
        let err = parse_backends(&["boring".into()]).unwrap_err();
        assert!(err.is_usage() && err.to_string().starts_with("--backends: "), "{err}");
    }
}
