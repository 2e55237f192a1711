//! `signet bench tls rotation`: how soon a rewritten certificate is served (report 000's
//! rotation lag; issue 15 asks ≤ 1 s for `watch`), per source and backend.
//!
//! A server presents pair A from files. The bench replaces both files (a new file renamed
//! over each, as a secret manager writes them), and from that moment makes new handshakes,
//! one every millisecond, each without resumption, until one presents the new certificate:
//! the lag is the time from the rename to that handshake. Every handshake in between must
//! succeed (with the old certificate); a failed one is counted. Then back to A, and so on.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde::Serialize;
use signet_tls::{Acceptor, Backend, FileSource, SourceKind};

use super::servers::{LocalServer, Method};
use crate::error::BenchError;
use crate::table::{Align, Table};

pub struct RotationSpec {
    pub backends: Vec<Backend>,
    /// `file` and/or `watch` (the sources that install a pair off the handshake path).
    pub sources: Vec<SourceKind>,
    pub rotations: usize,
    /// The timer of both sources (`watch` falls back to it).
    pub interval: Duration,
}

impl Default for RotationSpec {
    fn default() -> Self {
        RotationSpec {
            backends: Backend::ALL.to_vec(),
            sources: vec![SourceKind::File, SourceKind::Watch],
            rotations: 20,
            interval: Duration::from_secs(1),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RotationReport {
    pub interval_ms: f64,
    pub rows: Vec<RotationRow>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RotationRow {
    pub source: String,
    pub backend: String,
    pub rotations: usize,
    pub lag_ms_p50: f64,
    pub lag_ms_p99: f64,
    pub lag_ms_max: f64,
    /// Handshakes that failed while a rotation was under way (none is the target).
    pub failed_handshakes: usize,
}

/// A new certificate not served within this long is an error.
const GIVE_UP: Duration = Duration::from_secs(15);

pub fn run_rotation(spec: &RotationSpec, progress: &mut dyn FnMut(String)) -> Result<RotationReport, BenchError> {
    if let Some(bad) = spec.sources.iter().find(|s| s.trigger().is_none()) {
        return Err(BenchError::Usage(format!("--sources: {bad} is not rotated by rewriting files off the handshake path; expected file or watch")));
    }
    if spec.rotations == 0 {
        return Err(BenchError::Usage("--rotations must be at least 1".into()));
    }
    let pki = signet_tls::testing::TestPki::new();
    let pairs = [pki.server_pem(), pki.issue_server()];
    let leaf = |chain: &str| -> Result<Vec<u8>, BenchError> {
        let first = CertificateDer::pem_slice_iter(chain.as_bytes()).next();
        Ok(first.ok_or_else(|| BenchError::Setup("no certificate".into()))?.map_err(|e| BenchError::Setup(e.to_string()))?.to_vec())
    };
    let leaves = [leaf(&pairs[0].chain)?, leaf(&pairs[1].chain)?];
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(pki.ca_pem.as_bytes()) {
        roots.add(ca.map_err(|e| BenchError::Setup(e.to_string()))?).map_err(|e| BenchError::Setup(e.to_string()))?;
    }
    let mut config = rustls::ClientConfig::builder_with_provider(signet_tls::client::provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| BenchError::Setup(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.resumption = rustls::client::Resumption::disabled();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().map_err(|e| BenchError::Setup(e.to_string()))?;
    let mut rows = Vec::new();
    for source in &spec.sources {
        for backend in &spec.backends {
            let dir = tempfile::tempdir().map_err(|e| BenchError::Setup(e.to_string()))?;
            let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
            replace(&cert, &key, &pairs[0].chain, &pairs[0].key)?;
            let files = FileSource::new(&cert, &key);
            let pair = files.load().map_err(|e| BenchError::Setup(e.to_string()))?;
            let acceptor = Acceptor::new(*backend, &pair).map_err(|e| BenchError::Setup(e.to_string()))?;
            let server = LocalServer::start(acceptor.clone(), Method::Echo).map_err(|e| BenchError::Setup(e.to_string()))?;
            let trigger = source.trigger().unwrap_or_default();
            let row = rt.block_on(async {
                let _reloading = files.watch(acceptor, spec.interval, trigger);
                let mut lags = Vec::with_capacity(spec.rotations);
                let mut failed = 0;
                for n in 0..spec.rotations {
                    // Off the timer's beat: a rotation lands anywhere in its interval.
                    tokio::time::sleep(Duration::from_millis(150 + (n as u64 * 97) % 400)).await;
                    let next = (n + 1) % 2;
                    replace(&cert, &key, &pairs[next].chain, &pairs[next].key)?;
                    let written = Instant::now();
                    loop {
                        match presented(&connector, server.addr).await {
                            Ok(der) if der == leaves[next] => break,
                            Ok(_) => {}
                            Err(_) => failed += 1,
                        }
                        if written.elapsed() > GIVE_UP {
                            return Err(BenchError::Protocol {
                                peer: backend.name().into(),
                                why: format!("{source}: the rewritten certificate was not served within {} s", GIVE_UP.as_secs()),
                            });
                        }
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    lags.push(written.elapsed().as_nanos() as u64);
                }
                lags.sort_unstable();
                Ok::<_, BenchError>(RotationRow {
                    source: source.name().into(),
                    backend: backend.name().into(),
                    rotations: lags.len(),
                    lag_ms_p50: super::client::quantile(&lags, 0.5) / 1e6,
                    lag_ms_p99: super::client::quantile(&lags, 0.99) / 1e6,
                    lag_ms_max: lags.last().copied().unwrap_or(0) as f64 / 1e6,
                    failed_handshakes: failed,
                })
            })?;
            progress(format!("{:<6} {:<8} lag p50 {:.1} ms, max {:.1} ms, failed handshakes {}", row.source, row.backend, row.lag_ms_p50, row.lag_ms_max, row.failed_handshakes));
            rows.push(row);
        }
    }
    Ok(RotationReport { interval_ms: spec.interval.as_secs_f64() * 1e3, rows })
}

/// Both files replaced, each by a rename over it (never half-written), certificate first.
fn replace(cert: &Path, key: &Path, cert_pem: &str, key_pem: &str) -> Result<(), BenchError> {
    for (path, text) in [(cert, cert_pem), (key, key_pem)] {
        let tmp = path.with_extension("new");
        std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path)).map_err(|e| BenchError::Setup(format!("{}: {e}", path.display())))?;
    }
    Ok(())
}

/// Why a handshake during a rotation failed: counted, not reported.
#[derive(Debug, thiserror::Error)]
enum Failed {
    #[error("connect: {0}")]
    Connect(#[source] std::io::Error),
    #[error("TLS handshake: {0}")]
    Handshake(#[source] std::io::Error),
    #[error("no certificate")]
    NoCertificate,
}

/// The leaf certificate a new handshake is shown.
async fn presented(connector: &tokio_rustls::TlsConnector, addr: std::net::SocketAddr) -> Result<Vec<u8>, Failed> {
    let tcp = tokio::net::TcpStream::connect(addr).await.map_err(Failed::Connect)?;
    let name = ServerName::try_from("localhost").expect("localhost is a DNS name");
    let mut tls = connector.connect(name, tcp).await.map_err(Failed::Handshake)?;
    let der = tls.get_ref().1.peer_certificates().and_then(|c| c.first()).map(|c| c.to_vec()).ok_or(Failed::NoCertificate)?;
    let _ = tokio::io::AsyncWriteExt::shutdown(&mut tls).await;
    Ok(der)
}

impl RotationReport {
    pub fn table(&self) -> String {
        let mut t = Table::new(&[
            ("source", Align::Left),
            ("backend", Align::Left),
            ("rotations", Align::Right),
            ("lag p50 ms", Align::Right),
            ("p99 ms", Align::Right),
            ("max ms", Align::Right),
            ("failed handshakes", Align::Right),
            ("watch: ≤ 1 s", Align::Left),
        ]);
        for r in &self.rows {
            let target = match r.source.as_str() {
                "watch" if r.lag_ms_max <= 1000.0 && r.failed_handshakes == 0 => "met",
                "watch" => "not met",
                _ => "(timer: ≤ the interval)",
            };
            t.row(vec![
                r.source.clone(),
                r.backend.clone(),
                r.rotations.to_string(),
                format!("{:.1}", r.lag_ms_p50),
                format!("{:.1}", r.lag_ms_p99),
                format!("{:.1}", r.lag_ms_max),
                r.failed_handshakes.to_string(),
                target.into(),
            ]);
        }
        format!("Rotation lag: from the rename of the new certificate and key to the first new handshake that presents it (timer interval {:.0} ms):\n\n{}", self.interval_ms, t.render())
    }
}
