//! `signet bench monitor`: how fast `signet monitor` catches up with a long log (issue 16:
//! ≥ 20,000 entries/s from 0 on a 1M-entry log, checkpoint and consistency verification and
//! certificate parsing included).
//!
//! The log is written through the storage API in batches of 4,096 ([`crate::fill`]: real
//! tiles, signed checkpoints) with realistic entries: Rekor v2 hashedrekords, each a real
//! ECDSA signature over its own artifact by the key of one of a few Fulcio-style certificates
//! (email SAN, OIDC issuer extension, issued by a CA). It is kept in the spec's `dir` and
//! reused by later runs. It is served over loopback HTTP by the log's own tile routes, and
//! the monitor follows it from an empty state: every entry bundle fetched, every leaf hashed
//! into the tree that must meet the signed root, every body and certificate parsed and
//! matched. Then the log grows and the monitor follows again (a consistency proof from
//! tiles, the new entries).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_lc_rs::error::{KeyRejected, Unspecified};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
use serde::Serialize;
use serde_json::json;
use signet_core::hash::sha256;
use signet_core::{b64, jcs};
use signet_keys::Signer as LogKey;
use signet_log::checkpoint::NoteSigner;
use signet_log::merkle;
use signet_log::storage::{NewEntry, SqliteStorage, Storage, StorageError};
use signet_log::tiles::{self, TilePath, TILE_WIDTH};
use signet_log::tree::{StoredNodes, Tree};
use signet_log::{BatchPolicy, Log, LogConfig, OpenError};
use signet_witness::monitor::state::{StateError, Store};
use signet_witness::monitor::{metrics::Metrics, Alerts, Api, Followed, Monitor, Source, WatchList};

use crate::fill::{self, FillError};

const LOG: u8 = 1;
const ORIGIN: &str = "monitor.bench";
const ISSUER: &str = "https://oauth2.sigstore.dev/auth";

/// The log to build, and the monitor that follows it.
#[derive(Debug, Clone)]
pub struct MonitorSpec {
    /// Entries in the log the monitor catches up with.
    pub entries: u64,
    /// Entries added after the catch-up, for the second (following) measurement.
    pub grow: u64,
    /// Directory of the test log; an existing log is kept and added to.
    pub dir: PathBuf,
    /// Certificates the entries are signed under.
    pub certs: usize,
    /// The monitor's worker threads (default: as `signet monitor`).
    pub workers: Option<usize>,
}

/// What `bench monitor` fails with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MonitorBenchError {
    #[error(transparent)]
    Fill(#[from] FillError),
    /// A certificate for the entries' signers could not be made.
    #[error(transparent)]
    Certificate(#[from] rcgen::Error),
    /// A signer's key could not be generated, or could not sign.
    #[error(transparent)]
    Signing(#[from] Unspecified),
    #[error(transparent)]
    KeyRejected(#[from] KeyRejected),
    #[error("a filler thread panicked")]
    FillerPanicked,
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The tokio runtime could not be built, or the log could not be served on loopback.
    #[error("{0}")]
    Io(#[source] std::io::Error),
    #[error(transparent)]
    Trust(#[from] signet_tls::TrustError),
    /// The log's own key is not a public key the monitor takes.
    #[error(transparent)]
    LogKey(#[from] signet_core::pubkey::KeyError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error("{phase}: the monitor reported a problem or could not read the log")]
    Problem { phase: &'static str },
    #[error("{phase}: {unparsed} entries were not read (every entry is a hashedrekord with a certificate)")]
    Unparsed { phase: &'static str, unparsed: u64 },
    #[error("expected exactly one match (entry 777's digest), got {0}")]
    Matches(u64),
}

/// A signer: its key, and the certificate a CA issued for it.
struct Signer {
    key: EcdsaKeyPair,
    cert_der: Vec<u8>,
}

/// DER of a short UTF8String (Fulcio's extension values).
fn utf8(text: &str) -> Vec<u8> {
    let mut der = vec![0x0c, text.len().min(127) as u8];
    der.extend_from_slice(&text.as_bytes()[..text.len().min(127)]);
    der
}

/// Certificates shaped like Fulcio's: half for an email identity, half for a GitHub
/// Actions workflow (URI SAN and the workflow extensions, 1.3.6.1.4.1.57264.1.8–.22), each
/// with an SCT-list-sized extension, issued by one CA; ~1.2 KB of DER, as real ones are.
fn signers(n: usize) -> Result<Vec<Signer>, MonitorBenchError> {
    let ca_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name.push(rcgen::DnType::OrganizationName, "bench.example");
    ca.distinguished_name.push(rcgen::DnType::CommonName, "bench-intermediate");
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let fulcio = |arc: u64, value: &str| rcgen::CustomExtension::from_oid_content(&[1, 3, 6, 1, 4, 1, 57264, 1, arc], utf8(value));
    (0..n)
        .map(|i| {
            let rng = SystemRandom::new();
            let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng)?;
            let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref())?;
            let rc_key = rcgen::KeyPair::try_from(pkcs8.as_ref())?;
            let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
            params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::CodeSigning];
            params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
            if i % 2 == 0 {
                let email = format!("signer{i}@bench.example");
                params.subject_alt_names = vec![rcgen::SanType::Rfc822Name(email.try_into()?)];
                params.custom_extensions = vec![fulcio(8, ISSUER)];
            } else {
                let repo = format!("https://github.com/bench-org/repo{i}");
                let workflow = format!("{repo}/.github/workflows/release.yml@refs/heads/main");
                params.subject_alt_names = vec![rcgen::SanType::URI(workflow.as_str().try_into()?)];
                let sha = hex::encode(&sha256(repo.as_bytes())[..20]);
                params.custom_extensions = vec![
                    fulcio(8, "https://token.actions.githubusercontent.com"),
                    fulcio(9, &workflow),
                    fulcio(10, &sha),
                    fulcio(11, "github-hosted"),
                    fulcio(12, &repo),
                    fulcio(13, &sha),
                    fulcio(14, "refs/heads/main"),
                    fulcio(15, "123456789"),
                    fulcio(16, "https://github.com/bench-org"),
                    fulcio(17, "987654321"),
                    fulcio(18, &workflow),
                    fulcio(19, &sha),
                    fulcio(20, "push"),
                    fulcio(21, &format!("{repo}/actions/runs/1/attempts/1")),
                    fulcio(22, "public"),
                ];
            }
            // The embedded SCT list (1.3.6.1.4.1.11129.2.4.2): an OCTET STRING of ~120 bytes.
            let mut sct = vec![0x04, 0x78];
            sct.extend((0..0x78u8).map(|b| b.wrapping_mul(31)));
            params.custom_extensions.push(rcgen::CustomExtension::from_oid_content(&[1, 3, 6, 1, 4, 1, 11129, 2, 4, 2], sct));
            let cert = params.signed_by(&rc_key, &issuer)?;
            Ok(Signer { key, cert_der: cert.der().to_vec() })
        })
        .collect()
}

/// The artifact of entry `i`.
fn artifact(i: u64) -> Vec<u8> {
    format!("bench artifact {i}").into_bytes()
}

/// Entry `i`: a hashedrekord 0.0.2 body as signet stores it (see `signet_log::rekor::v2`).
fn body(i: u64, signer: &Signer) -> Result<Vec<u8>, MonitorBenchError> {
    let message = artifact(i);
    let sig = signer.key.sign(&SystemRandom::new(), &message)?;
    Ok(jcs::to_vec(&json!({
        "apiVersion": "0.0.2",
        "kind": "hashedrekord",
        "spec": {"hashedRekordV002": {
            "data": {"algorithm": "SHA2_256", "digest": b64::encode(sha256(&message))},
            "signature": {"content": b64::encode(sig.as_ref()), "verifier": {
                "keyDetails": "PKIX_ECDSA_P256_SHA_256", "x509Certificate": {"rawBytes": b64::encode(&signer.cert_der)}}},
        }}
    })))
}

/// Appends entries until the log in `dir` holds `target` (or `grow` more than it holds,
/// when `target` is 0), 4,096 per commit. The log's size after.
fn fill(dir: &Path, target: u64, grow: u64, certs: usize, progress: &mut dyn FnMut(String)) -> Result<u64, MonitorBenchError> {
    fill::create_dir(dir)?;
    let storage = Arc::new(SqliteStorage::open(&dir.join("log.sqlite"))?);
    let signer = NoteSigner::new(ORIGIN, fill::key(dir)?);
    let size = storage.latest_checkpoint(LOG)?.map_or(0, |c| c.size);
    let target = if target == 0 { size + grow } else { target };
    if size >= target {
        return Ok(size);
    }
    let nodes = StoredNodes { storage: storage.clone(), log: LOG };
    let mut tree = Tree::open(Box::new(nodes), 0, size).map_err(FillError::from)?;
    let certs = signers(certs.max(1))?;
    progress(format!("filling {} from {size} to {target} entries", dir.display()));
    let started = Instant::now();
    while tree.size() < target {
        let old = tree.size();
        let new = (old + fill::BATCH).min(target);
        // Signing dominates: both cores sign half the batch each.
        let mid = old + (new - old) / 2;
        let make = |from: u64, to: u64| -> Result<Vec<Vec<u8>>, MonitorBenchError> {
            (from..to).map(|i| body(i, &certs[(i % certs.len() as u64) as usize])).collect()
        };
        let (first, second) = std::thread::scope(|s| {
            let h = s.spawn(|| make(mid, new));
            let first = make(old, mid);
            (first, h.join().unwrap_or(Err(MonitorBenchError::FillerPanicked)))
        });
        let entries: Vec<NewEntry> = first?
            .into_iter()
            .chain(second?)
            .zip(old..new)
            .map(|(body, index)| NewEntry { index, leaf_hash: merkle::leaf_hash(&body), digest: None, identity: None, public_key: None, body, stamp: None, integrated_time: None, attestation: None })
            .collect();
        fill::commit_entries(storage.as_ref(), &mut tree, &signer, (LOG, ORIGIN), old, entries)?;
        if new % 200_000 < fill::BATCH {
            progress(format!("  {new} entries ({:.0} s)", started.elapsed().as_secs_f64()));
        }
    }
    storage.flush_keys()?;
    Ok(target)
}

/// Serves the log's checkpoint and tiles on loopback, as signet's `/api/v2` does; its URL.
/// The log is reopened for each phase, so that it serves what `fill` wrote since, on the
/// same port (`port`, or any free one the first time): the monitor's state is per URL.
async fn serve(dir: &Path, port: u16) -> Result<(String, tokio::task::JoinHandle<()>, Arc<LogKey>), MonitorBenchError> {
    use axum::extract::{Path as UrlPath, State};
    use axum::http::StatusCode;
    use axum::routing::get;

    let storage: Arc<dyn Storage> = Arc::new(SqliteStorage::open(&dir.join("log.sqlite"))?);
    let key = fill::key(dir)?;
    let cfg = LogConfig {
        id: LOG,
        origin: ORIGIN.into(),
        key_name: ORIGIN.into(),
        key: key.clone(),
        batch: BatchPolicy::default(),
        stamper: None,
        max_pending: 0,
        tile_cache: signet_log::DEFAULT_TILE_CACHE,
        entry_cache: signet_log::DEFAULT_ENTRY_CACHE,
        genesis: None,
        note_key: None,
    };
    let log = Log::open(cfg, storage).await?;
    async fn checkpoint(State(log): State<Log>) -> String {
        log.head().note.clone()
    }
    async fn tile(State(log): State<Log>, UrlPath(path): UrlPath<String>) -> Result<Vec<u8>, StatusCode> {
        let found = match tiles::parse(&path).map_err(|_| StatusCode::BAD_REQUEST)? {
            TilePath::Hashes { level, index, width } => log.tile(level, index, width).map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?,
            TilePath::Entries { index, width } => {
                let entries = log.entries_async(index * TILE_WIDTH, width).await.map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?;
                match entries.len() as u64 == width {
                    true => Some(tiles::entry_bundle(entries.iter().map(|e| e.body.as_slice())).map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?),
                    false => None,
                }
            }
        };
        found.ok_or(StatusCode::NOT_FOUND)
    }
    let app = axum::Router::new().route("/checkpoint", get(checkpoint)).route("/tile/{*path}", get(tile)).with_state(log);
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))).await.map_err(MonitorBenchError::Io)?;
    let url = format!("http://{}", listener.local_addr().map_err(MonitorBenchError::Io)?);
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((url, task, key))
}

/// One digest watched (entry 777's artifact), and identities no entry has: every entry is
/// parsed and matched in full, and exactly one alert is expected.
fn watch_list() -> WatchList {
    let text = format!(
        "digests = [\"sha256:{}\"]\nemails = [\"nobody@bench.example\"]\nsan_regex = ['^spiffe://']\n",
        hex::encode(sha256(&artifact(777)))
    );
    WatchList::parse(&text).expect("the bench's watch list parses")
}

/// One measured poll of the monitor.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    pub phase: &'static str,
    pub entries: u64,
    pub body_bytes: u64,
    pub seconds: f64,
    pub entries_per_second: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct MonitorReport {
    /// `monitor`: what wrote this result.
    pub bench: &'static str,
    /// Entries read over both phases.
    pub log_entries: u64,
    pub certificates: usize,
    pub workers: usize,
    pub cpus: usize,
    pub phases: Vec<Phase>,
}

/// Builds (or grows) the log, then times the monitor catching up from 0 and following the
/// grown log. `progress` gets a line while the log is filled.
pub fn run(spec: &MonitorSpec, progress: &mut dyn FnMut(String)) -> Result<MonitorReport, MonitorBenchError> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().map_err(MonitorBenchError::Io)?;
    fill(&spec.dir, spec.entries, 0, spec.certs, progress)?;
    // A fresh state: the monitor starts from 0.
    let state = spec.dir.join("monitor-state");
    let _ = std::fs::remove_dir_all(&state);
    let fetcher = signet_tls::Fetcher::new(signet_tls::client_config(&signet_tls::Trust::Platform)?).with_timeout(Duration::from_secs(60));
    let workers = spec.workers.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get() * 2).min(8)).max(1);
    let mut phases = Vec::new();
    let mut matches = 0;
    let mut port = 0;
    for name in ["catch up from 0", "follow a grown log"] {
        if !phases.is_empty() {
            fill(&spec.dir, 0, spec.grow, spec.certs, progress)?;
        }
        let (url, task, log_key) = rt.block_on(serve(&spec.dir, port))?;
        port = url.rsplit(':').next().and_then(|p| p.parse().ok()).unwrap_or(0);
        let public = signet_core::pubkey::PublicKey::from_spki(log_key.spki_der())?;
        let m = Monitor {
            logs: vec![Followed { source: Source::new(&url, Api::Tiles, fetcher.clone()), keys: vec![public].into() }],
            watch: watch_list(),
            store: Store::open(&state)?,
            alerts: Alerts::new(None, Arc::new(Metrics::default())),
            workers,
            interval: Duration::from_secs(1),
        };
        let started = Instant::now();
        let sum = m.poll_all();
        let seconds = started.elapsed().as_secs_f64();
        task.abort();
        let _ = rt.block_on(task);
        if sum.problem || sum.failed {
            return Err(MonitorBenchError::Problem { phase: name });
        }
        if sum.unparsed > 0 {
            return Err(MonitorBenchError::Unparsed { phase: name, unparsed: sum.unparsed });
        }
        matches += sum.matches;
        let entries_per_second = sum.read as f64 / seconds.max(1e-9);
        phases.push(Phase { phase: name, entries: sum.read, body_bytes: sum.bytes, seconds, entries_per_second });
    }
    let _ = std::fs::remove_dir_all(&state);
    if matches != 1 {
        return Err(MonitorBenchError::Matches(matches));
    }
    Ok(MonitorReport {
        bench: "monitor",
        log_entries: phases.iter().map(|p| p.entries).sum(),
        certificates: spec.certs,
        workers,
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        phases,
    })
}

impl MonitorReport {
    /// One line per phase: entries, their average size, and the rates.
    pub fn table(&self) -> String {
        let mut out = format!("{:<22} {:>10} {:>11} {:>9} {:>12} {:>8}\n", "phase", "entries", "bytes/entry", "seconds", "entries/s", "MB/s");
        for p in &self.phases {
            let per = |x: f64| x / p.seconds.max(1e-9);
            out.push_str(&format!(
                "{:<22} {:>10} {:>11.0} {:>9.2} {:>12.0} {:>8.0}\n",
                p.phase,
                p.entries,
                p.body_bytes as f64 / p.entries.max(1) as f64,
                p.seconds,
                per(p.entries as f64),
                per(p.body_bytes as f64) / 1e6
            ));
        }
        out
    }
}
