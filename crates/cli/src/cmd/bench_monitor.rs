//! `signet bench monitor`: how fast `signet monitor` catches up with a long log (issue 16:
//! ≥ 20,000 entries/s from 0 on a 1M-entry log, checkpoint and consistency verification and
//! certificate parsing included).
//!
//! The log is written through the storage API in batches of 4,096 (real tiles, signed
//! checkpoints) with realistic entries: Rekor v2 hashedrekords, each a real ECDSA signature
//! over its own artifact by the key of one of a few Fulcio-style certificates (email SAN,
//! OIDC issuer extension, issued by a CA). It is kept in `--dir` and reused by later runs.
//! It is served over loopback HTTP by the log's own tile routes, and the monitor follows it
//! from an empty state: every entry bundle fetched, every leaf hashed into the tree that
//! must meet the signed root, every body and certificate parsed and matched. Then the log
//! grows and the monitor follows again (a consistency proof from tiles, the new entries).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
use serde_json::json;
use signet_core::hash::sha256;
use signet_keys::Signer as LogKey;
use signet_core::{b64, jcs};
use signet_log::checkpoint::NoteSigner;
use signet_log::merkle;
use signet_log::storage::{NewEntry, SqliteStorage, Storage};
use signet_log::tiles::{self, TilePath, TILE_WIDTH};
use signet_log::tree::{StoredNodes, Tree};
use signet_log::{BatchPolicy, Log, LogConfig};
use signet_witness::monitor::{self, metrics::Metrics, Alerts, Api, Followed, Monitor, Source, WatchList};

#[derive(clap::Args)]
pub struct Args {
    /// Entries in the log the monitor catches up with.
    #[arg(long, default_value_t = 1_000_000)]
    entries: u64,
    /// Entries added after the catch-up, for the second (following) measurement.
    #[arg(long, default_value_t = 20_000)]
    grow: u64,
    /// Directory of the test log; an existing log is kept and added to.
    #[arg(long, default_value = "target/bench-monitor")]
    dir: PathBuf,
    /// Certificates the entries are signed under.
    #[arg(long, default_value_t = 8)]
    certs: usize,
    /// The monitor's worker threads (default: as `signet monitor`).
    #[arg(long)]
    workers: Option<usize>,
    /// Write the machine-readable result here.
    #[arg(long)]
    json: Option<PathBuf>,
}

const LOG: u8 = 1;
const ORIGIN: &str = "monitor.bench";
const ISSUER: &str = "https://oauth2.sigstore.dev/auth";

pub fn run(a: Args) -> ExitCode {
    match bench(&a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            errln!("signet bench monitor: {e}");
            ExitCode::FAILURE
        }
    }
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
fn signers(n: usize) -> Result<Vec<Signer>, String> {
    let e = |e: rcgen::Error| e.to_string();
    let ca_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(e)?;
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(e)?;
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name.push(rcgen::DnType::OrganizationName, "bench.example");
    ca.distinguished_name.push(rcgen::DnType::CommonName, "bench-intermediate");
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let fulcio = |arc: u64, value: &str| rcgen::CustomExtension::from_oid_content(&[1, 3, 6, 1, 4, 1, 57264, 1, arc], utf8(value));
    (0..n)
        .map(|i| {
            let rng = SystemRandom::new();
            let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).map_err(|e| e.to_string())?;
            let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref()).map_err(|e| e.to_string())?;
            let rc_key = rcgen::KeyPair::try_from(pkcs8.as_ref()).map_err(e)?;
            let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(e)?;
            params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::CodeSigning];
            params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
            if i % 2 == 0 {
                let email = format!("signer{i}@bench.example");
                params.subject_alt_names = vec![rcgen::SanType::Rfc822Name(email.try_into().map_err(e)?)];
                params.custom_extensions = vec![fulcio(8, ISSUER)];
            } else {
                let repo = format!("https://github.com/bench-org/repo{i}");
                let workflow = format!("{repo}/.github/workflows/release.yml@refs/heads/main");
                params.subject_alt_names = vec![rcgen::SanType::URI(workflow.as_str().try_into().map_err(e)?)];
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
            let cert = params.signed_by(&rc_key, &issuer).map_err(e)?;
            Ok(Signer { key, cert_der: cert.der().to_vec() })
        })
        .collect()
}

/// The artifact of entry `i`.
fn artifact(i: u64) -> Vec<u8> {
    format!("bench artifact {i}").into_bytes()
}

/// Entry `i`: a hashedrekord 0.0.2 body as signet stores it (see `signet_log::rekor::v2`).
fn body(i: u64, signer: &Signer) -> Result<Vec<u8>, String> {
    let message = artifact(i);
    let sig = signer.key.sign(&SystemRandom::new(), &message).map_err(|e| e.to_string())?;
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

fn key(dir: &Path) -> Result<Arc<LogKey>, String> {
    LogKey::load_or_generate(&dir.join("log.pem"), signet_keys::Algorithm::EcdsaP256Sha256).map(Arc::new).map_err(|e| e.to_string())
}

/// Appends entries until the log in `dir` holds `target` (or `grow` more than it holds,
/// when `target` is 0), 4,096 per commit. The log's size after.
fn fill(dir: &Path, target: u64, grow: u64, certs: usize) -> Result<u64, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let storage = Arc::new(SqliteStorage::open(&dir.join("log.sqlite")).map_err(|e| e.to_string())?);
    let signer = NoteSigner::new(ORIGIN, key(dir)?);
    let size = storage.latest_checkpoint(LOG).map_err(|e| e.to_string())?.map_or(0, |c| c.size);
    let target = if target == 0 { size + grow } else { target };
    if size >= target {
        return Ok(size);
    }
    let nodes = StoredNodes { storage: storage.clone(), log: LOG };
    let mut tree = Tree::open(Box::new(nodes), 0, size).map_err(|e| e.to_string())?;
    let certs = signers(certs.max(1))?;
    errln!("filling {} from {size} to {target} entries", dir.display());
    let started = Instant::now();
    while tree.size() < target {
        let old = tree.size();
        let new = (old + 4096).min(target);
        // Signing dominates: both cores sign half the batch each.
        let mid = old + (new - old) / 2;
        let make = |from: u64, to: u64| -> Result<Vec<Vec<u8>>, String> {
            (from..to).map(|i| body(i, &certs[(i % certs.len() as u64) as usize])).collect()
        };
        let (first, second) = std::thread::scope(|s| {
            let h = s.spawn(|| make(mid, new));
            let first = make(old, mid);
            (first, h.join().unwrap_or_else(|_| Err("a filler thread panicked".into())))
        });
        let entries: Vec<NewEntry> = first?
            .into_iter()
            .chain(second?)
            .zip(old..new)
            .map(|(body, index)| NewEntry { index, leaf_hash: merkle::leaf_hash(&body), digest: None, identity: None, public_key: None, body, stamp: None, integrated_time: None, attestation: None })
            .collect();
        super::bench_scale::commit_entries(storage.as_ref(), &mut tree, &signer, (LOG, ORIGIN), old, entries)?;
        if new % 200_000 < 4096 {
            errln!("  {new} entries ({:.0} s)", started.elapsed().as_secs_f64());
        }
    }
    storage.flush_keys().map_err(|e| e.to_string())?;
    Ok(target)
}

/// Serves the log's checkpoint and tiles on loopback, as signet's `/api/v2` does; its URL.
/// The log is reopened for each phase, so that it serves what `fill` wrote since, on the
/// same port (`port`, or any free one the first time): the monitor's state is per URL.
async fn serve(dir: &Path, port: u16) -> Result<(String, tokio::task::JoinHandle<()>, Arc<LogKey>), String> {
    use axum::extract::{Path as UrlPath, State};
    use axum::http::StatusCode;
    use axum::routing::get;

    let storage: Arc<dyn Storage> = Arc::new(SqliteStorage::open(&dir.join("log.sqlite")).map_err(|e| e.to_string())?);
    let key = key(dir)?;
    let cfg = LogConfig {
        id: LOG,
        origin: ORIGIN.into(),
        key_name: ORIGIN.into(),
        key: key.clone(),
        batch: BatchPolicy::default(),
        stamper: None,
        max_pending: 0,
        tile_cache: signet_log::DEFAULT_TILE_CACHE,
        genesis: None,
        note_key: None,
    };
    let log = Log::open(cfg, storage).await.map_err(|e| e.to_string())?;
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
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))).await.map_err(|e| e.to_string())?;
    let url = format!("http://{}", listener.local_addr().map_err(|e| e.to_string())?);
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((url, task, key))
}

/// One digest watched (entry 777's artifact), and identities no entry has: every entry is
/// parsed and matched in full, and exactly one alert is expected.
fn watch_list() -> Result<WatchList, String> {
    WatchList::parse(&format!(
        "digests = [\"sha256:{}\"]\nemails = [\"nobody@bench.example\"]\nsan_regex = ['^spiffe://']\n",
        hex::encode(sha256(&artifact(777)))
    ))
}

struct Phase {
    name: &'static str,
    entries: u64,
    bytes: u64,
    seconds: f64,
}

fn bench(a: &Args) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().map_err(|e| e.to_string())?;
    fill(&a.dir, a.entries, 0, a.certs)?;
    // A fresh state: the monitor starts from 0.
    let state = a.dir.join("monitor-state");
    let _ = std::fs::remove_dir_all(&state);
    let fetcher = signet_tls::Fetcher::new(signet_tls::client_config(&signet_tls::Trust::Platform).map_err(|e| e.to_string())?)
        .with_timeout(Duration::from_secs(60));
    let workers = a.workers.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get() * 2).min(8)).max(1);
    let mut phases = Vec::new();
    let mut matches = 0;
    let mut port = 0;
    for name in ["catch up from 0", "follow a grown log"] {
        if !phases.is_empty() {
            fill(&a.dir, 0, a.grow, a.certs)?;
        }
        let (url, task, log_key) = rt.block_on(serve(&a.dir, port))?;
        port = url.rsplit(':').next().and_then(|p| p.parse().ok()).unwrap_or(0);
        let public = signet_core::pubkey::PublicKey::from_spki(log_key.spki_der()).map_err(|e| e.to_string())?;
        let m = Monitor {
            logs: vec![Followed { source: Source::new(&url, Api::Tiles, fetcher.clone()), keys: vec![public].into() }],
            watch: watch_list()?,
            store: monitor::state::Store::open(&state)?,
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
            return Err(format!("{name}: the monitor reported a problem or could not read the log"));
        }
        if sum.unparsed > 0 {
            return Err(format!("{name}: {} entries were not read (every entry is a hashedrekord with a certificate)", sum.unparsed));
        }
        matches += sum.matches;
        phases.push(Phase { name, entries: sum.read, bytes: sum.bytes, seconds });
    }
    let _ = std::fs::remove_dir_all(&state);
    if matches != 1 {
        return Err(format!("expected exactly one match (entry 777's digest), got {matches}"));
    }
    let rows: Vec<serde_json::Value> = phases
        .iter()
        .map(|p| json!({"phase": p.name, "entries": p.entries, "body_bytes": p.bytes, "seconds": p.seconds, "entries_per_second": p.entries as f64 / p.seconds.max(1e-9)}))
        .collect();
    let result = json!({"bench": "monitor", "log_entries": phases.iter().map(|p| p.entries).sum::<u64>(), "certificates": a.certs, "workers": workers, "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()), "phases": rows});
    if let Some(path) = &a.json {
        std::fs::write(path, serde_json::to_vec_pretty(&result).map_err(|e| e.to_string())?).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    outln!("{:<22} {:>10} {:>11} {:>9} {:>12} {:>8}", "phase", "entries", "bytes/entry", "seconds", "entries/s", "MB/s");
    for p in &phases {
        let per = |x: f64| x / p.seconds.max(1e-9);
        outln!(
            "{:<22} {:>10} {:>11.0} {:>9.2} {:>12.0} {:>8.0}",
            p.name, p.entries, p.bytes as f64 / p.entries.max(1) as f64, p.seconds, per(p.entries as f64), per(p.bytes as f64) / 1e6
        );
    }
    Ok(())
}
