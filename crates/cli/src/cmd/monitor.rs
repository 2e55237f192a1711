//! `signet monitor`: follow transparency logs, verify them, and alert on watched identities
//! (the library is `signet_witness::monitor`; this is its command line).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use signet_witness::monitor::{self, metrics::Metrics, Alerts, Api, Followed, Monitor, Source, WatchList};

#[derive(clap::Args)]
pub struct Args {
    /// A C2SP tile log to follow, by its tile root: `<URL>/checkpoint` and `<URL>/tile/…`.
    /// For signet's Rekor v2 log that is `https://HOST/api/v2`. Repeatable.
    #[arg(long = "log", value_name = "URL")]
    logs: Vec<String>,
    /// A Rekor v1 log to follow through its JSON API (`<URL>/api/v1/log`, …). Repeatable.
    #[arg(long = "rekor-v1", value_name = "URL")]
    v1_logs: Vec<String>,
    /// An RFC 6962 CT log to follow (`<URL>/ct/v1/get-sth`, …): every certificate and
    /// precertificate it logs is matched. For signet's CT log that is the instance's URL. Repeatable.
    #[arg(long = "ct", value_name = "URL")]
    ct_logs: Vec<String>,
    /// The watch list (TOML: emails, uris, san_regex, issuers, keys, digests).
    #[arg(long, value_name = "FILE")]
    watch: PathBuf,
    /// Where each log's state is kept between runs.
    #[arg(long, value_name = "DIR", default_value = "./signet-monitor")]
    state: PathBuf,
    /// A trusted_root.json (`signet trust export`, or Sigstore's): a log's checkpoints must be
    /// signed by a tlog key whose baseUrl the log's URL starts with.
    #[arg(long, value_name = "FILE")]
    trusted_root: Option<PathBuf>,
    /// A log's checkpoint key, as URL=PEM_FILE (a PUBLIC KEY); adds to the trusted root's. Repeatable.
    #[arg(long = "log-key", value_name = "URL=FILE")]
    log_keys: Vec<String>,
    /// Catch up once, then exit: 0 when every log verified, 1 when one misbehaved, served
    /// a bad checkpoint, or could not be read.
    #[arg(long)]
    once: bool,
    /// Seconds between polls.
    #[arg(long, default_value_t = 30)]
    interval: u64,
    /// POST each alert (JSON) here, with retries. https, or http to loopback.
    #[arg(long, value_name = "URL")]
    webhook: Option<String>,
    /// Serve Prometheus metrics on this address (e.g. 127.0.0.1:9464).
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<SocketAddr>,
    /// CA certificates (PEM) for HTTPS to the logs and the webhook, instead of the system's
    /// (e.g. the tls_ca.pem of `signet trust export` for a --dev instance).
    #[arg(long, value_name = "FILE")]
    ca_file: Option<PathBuf>,
    /// Threads that fetch and read entries (default: twice the CPUs, at most 8).
    #[arg(long)]
    workers: Option<usize>,
}

fn usage(msg: String) -> ExitCode {
    errln!("signet monitor: {msg}");
    ExitCode::from(2)
}

pub fn run(a: Args) -> ExitCode {
    let monitor = match build(&a) {
        Ok(m) => m,
        Err(e) => return usage(e),
    };
    if !a.once {
        monitor.run();
    }
    let sum = monitor.poll_all();
    monitor.alerts.flush(Duration::from_secs(30));
    let unparsed = if sum.unparsed > 0 { format!(" ({} of unknown kinds or malformed)", sum.unparsed) } else { String::new() };
    errln!("signet monitor: {} entries read{unparsed}, {} matched{}", sum.read, sum.matches, match (sum.problem, sum.failed) {
        (true, _) => "; a log misbehaved or served a bad checkpoint (see the alerts)",
        (false, true) => "; a log could not be read",
        _ => "",
    });
    if sum.problem || sum.failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn build(a: &Args) -> Result<Monitor, String> {
    if a.logs.is_empty() && a.v1_logs.is_empty() && a.ct_logs.is_empty() {
        return Err("give at least one --log URL (a tile log), --rekor-v1 URL or --ct URL".into());
    }
    let watch = WatchList::load(&a.watch).map_err(|e| e.to_string())?;
    let trust = match &a.ca_file {
        Some(f) => signet_tls::Trust::PemFile(f.clone()),
        None => signet_tls::Trust::Platform,
    };
    let tls = signet_tls::client_config(&trust).map_err(|e| e.to_string())?;
    let fetcher = signet_tls::Fetcher::new(tls).with_timeout(Duration::from_secs(30));
    let root = a.trusted_root.as_ref().map(|f| RootFile::open(f)).transpose()?;
    let mut given = Vec::new();
    for k in &a.log_keys {
        let (url, file) = k.split_once('=').ok_or_else(|| format!("--log-key {k:?} is not URL=FILE"))?;
        given.push((url.trim_end_matches('/').to_string(), monitor::keys::from_pem_file(std::path::Path::new(file)).map_err(|e| e.to_string())?));
    }
    let mut logs = Vec::new();
    let all = a.logs.iter().map(|u| (u, Api::Tiles)).chain(a.v1_logs.iter().map(|u| (u, Api::V1))).chain(a.ct_logs.iter().map(|u| (u, Api::Ct)));
    for (url, api) in all {
        let source = Source::new(url, api, fetcher.clone());
        let mine: Vec<_> = given.iter().filter(|(u, _)| *u == source.url).map(|(_, k)| k.clone()).collect();
        // A CT log's API is under its URL (`<url>/ct/v1`), and its trusted-root entry's baseUrl
        // may name that (signet exports `<url>/ct`; Sigstore's name the log's prefix).
        let (id, ct) = (source.id().to_string(), api == Api::Ct);
        let keys_now = {
            let (root, mine) = (root.clone(), mine.clone());
            move || {
                let mut keys = root.as_ref().map(|r| monitor::keys::from_trusted_root(&r.now(), &id, ct)).unwrap_or_default();
                keys.extend(mine.iter().cloned());
                keys
            }
        };
        if keys_now().is_empty() {
            return Err(format!(
                "no key to verify {}'s checkpoints: give --trusted-root (a tlog, or for --ct a ctlog, whose baseUrl it starts with) or --log-key {}=PEM_FILE",
                source.url, source.url
            ));
        }
        // The trusted root is read again when its file changes: a log that rotates to a new
        // key (a new shard) is followed once the operator's root lists that key, without a restart.
        let keys = match root {
            Some(_) => monitor::Keys::Live(Arc::new(keys_now)),
            None => mine.into(),
        };
        logs.push(Followed { source, keys });
    }
    let metrics = Arc::new(Metrics::default());
    if let Some(addr) = a.metrics_listen {
        let bound = monitor::metrics::serve(addr, metrics.clone()).map_err(|e| format!("--metrics-listen {addr}: {e}"))?;
        errln!("signet monitor: metrics on http://{bound}/metrics");
    }
    let workers = a.workers.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get() * 2).min(8)).max(1);
    Ok(Monitor {
        logs,
        watch,
        store: monitor::state::Store::open(&a.state).map_err(|e| e.to_string())?,
        alerts: Alerts::new(a.webhook.clone().map(|u| (u, fetcher.clone().with_timeout(Duration::from_secs(10)))), metrics),
        workers,
        interval: Duration::from_secs(a.interval.max(1)),
    })
}

/// `--trusted-root`, read again whenever the file's modification time or length changes. A
/// file that cannot be read or parsed keeps the last good root (with a warning).
#[derive(Clone)]
struct RootFile(Arc<RootFileInner>);

struct RootFileInner {
    path: PathBuf,
    last: std::sync::Mutex<(Option<(std::time::SystemTime, u64)>, Arc<signet_verify::trust_root::TrustedRoot>)>,
}

impl RootFile {
    fn open(path: &std::path::Path) -> Result<RootFile, String> {
        let stamp = stamp(path);
        let root = read_root(path).map_err(|e| format!("--trusted-root {e}"))?;
        Ok(RootFile(Arc::new(RootFileInner { path: path.to_path_buf(), last: std::sync::Mutex::new((stamp, Arc::new(root))) })))
    }

    fn now(&self) -> Arc<signet_verify::trust_root::TrustedRoot> {
        let mut last = self.0.last.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let stamp = stamp(&self.0.path);
        if stamp.is_some() && stamp != last.0 {
            match read_root(&self.0.path) {
                Ok(root) => *last = (stamp, Arc::new(root)),
                Err(e) => errln!("signet monitor: --trusted-root changed but cannot be read ({e}); the last good one stays in use"),
            }
        }
        last.1.clone()
    }
}

fn stamp(path: &std::path::Path) -> Option<(std::time::SystemTime, u64)> {
    std::fs::metadata(path).ok().and_then(|m| Some((m.modified().ok()?, m.len())))
}

fn read_root(path: &std::path::Path) -> Result<signet_verify::trust_root::TrustedRoot, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    signet_verify::trust_root::TrustedRoot::from_json(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}
