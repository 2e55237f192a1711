//! `[monitor]`: the monitor (`signet_witness::monitor`, as `signet monitor` runs it) inside
//! `serve`, over this instance's own Rekor v2 log, read through its public tile routes like
//! any outside monitor would: a checkpoint, its consistency with the last one, every entry
//! against the watch list. Alerts go to stdout (JSON lines, after the ready line), to the
//! webhook, and to `/metrics`; the state lives in `<data dir>/monitor`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use signet_core::pubkey::PublicKey;
use signet_witness::monitor::{self, metrics::Metrics, Alerts, Api, Followed, Keys, Monitor, Source, WatchList};

use crate::config::{ConfigError, MonitorSettings};

/// The metrics the monitor keeps, when `[monitor]` is on (shown on `/metrics`).
pub fn metrics(settings: &MonitorSettings) -> Option<Arc<Metrics>> {
    settings.enabled().then(|| Arc::new(Metrics::default()))
}

/// The monitor, checked and ready to follow `url` (this instance, as bound): made before the
/// ready line, so that a bad watch list stops the start, and run after it ([`Prepared::spawn`]).
pub struct Prepared(Monitor);

/// `v2` is the instance's Rekor v2 log: its keys are read at every poll, so that the monitor
/// follows it across online rotations (each shard's key, the retired ones included).
/// `own_ca`: the CA file of this instance's own HTTPS certificate, when it issues it itself
/// (else the platform's roots are trusted, unless `ca_file` says otherwise). The monitor's
/// state is kept under `data_dir`.
pub fn prepare(
    s: &MonitorSettings,
    own_ca: Option<PathBuf>,
    data_dir: &Path,
    url: &str,
    v2: Arc<crate::shards::active::ActiveShard>,
    metrics: Arc<Metrics>,
) -> Result<Option<Prepared>, ConfigError> {
    let Some(watch_path) = &s.watch else { return Ok(None) };
    let invalid = |what: &str, e: String| ConfigError::Invalid(format!("monitor.{what}: {e}"));
    let watch = WatchList::load(watch_path).map_err(|e| invalid("watch", e.to_string()))?;
    if !(1..=86_400).contains(&s.interval_secs) {
        return Err(invalid("interval_secs", format!("must be 1..=86400, got {}", s.interval_secs)));
    }
    let trust = match (&s.ca_file, own_ca) {
        (Some(f), _) => signet_tls::Trust::PemFile(f.clone()),
        (None, Some(own)) => signet_tls::Trust::PemFile(own),
        (None, None) => signet_tls::Trust::Platform,
    };
    let tls = signet_tls::client_config(&trust).map_err(|e| invalid("ca_file", e.to_string()))?;
    let fetcher = signet_tls::Fetcher::new(tls).with_timeout(Duration::from_secs(30));
    // Checked once here, so that a key the monitor cannot read stops the start; the polls
    // then ask for the keys as they are ([`v2_keys`]).
    PublicKey::from_spki(v2.log().key().spki_der()).map_err(|e| invalid("watch", format!("the Rekor v2 key: {e}")))?;
    let keys = Keys::Live(Arc::new(move || v2_keys(&v2)));
    let store = monitor::state::Store::open(&data_dir.join("monitor")).map_err(|e| invalid("watch", e.to_string()))?;
    let source = Source::new(&format!("{}/api/v2", url.trim_end_matches('/')), Api::Tiles, fetcher.clone());
    let monitor = Monitor {
        logs: vec![Followed { source, keys }],
        watch,
        store,
        alerts: Alerts::new(s.webhook.clone().map(|u| (u, fetcher.with_timeout(Duration::from_secs(10)))), metrics),
        workers: 2,
        interval: Duration::from_secs(s.interval_secs),
    };
    Ok(Some(Prepared(monitor)))
}

/// Every key the Rekor v2 log has signed with: each shard's, and the one serving now.
fn v2_keys(v2: &crate::shards::active::ActiveShard) -> Vec<PublicKey> {
    let current = v2.current();
    let spkis = current.registry.iter().map(|s| s.spki.as_slice()).chain([current.key.spki_der()]);
    let mut keys: Vec<PublicKey> = Vec::new();
    for spki in spkis {
        if let Ok(key) = PublicKey::from_spki(spki) {
            if !keys.iter().any(|k| k.spki_der == key.spki_der) {
                keys.push(key);
            }
        }
    }
    keys
}

impl Prepared {
    /// Follows the log on a thread of its own, polling every `interval_secs`.
    pub fn spawn(self) {
        let monitor = self.0;
        if let Err(e) = std::thread::Builder::new().name("monitor".into()).spawn(move || monitor.run()) {
            tracing::error!(error = %e, "cannot start the monitor's thread; [monitor] is off");
        }
    }
}
