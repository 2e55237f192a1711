//! Alerts: JSON lines on stdout, an optional webhook, and the metrics.
//!
//! The webhook is fed from a bounded queue by one thread, so a slow or dead receiver never
//! stalls the scan: each alert is POSTed with a few retries and backoff, and when the
//! queue is full the alert is dropped and counted (stdout still has it).

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::Serialize;
use signet_tls::Fetcher;

use super::entries::San;
use super::metrics::Metrics;
use super::watch::Match;

pub use super::kind::Kind;

/// The entry an alert of kind `match` is about.
#[derive(Debug, Clone, Serialize)]
pub struct EntryAlert {
    pub index: u64,
    pub leaf_hash: String,
    pub entry_kind: String,
    pub matched: Vec<Match>,
    pub identities: Vec<San>,
    pub issuers: Vec<String>,
    pub digests: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Alert {
    pub time: String,
    pub kind: Kind,
    pub log: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry: Option<EntryAlert>,
    /// The signed notes that prove a misbehaviour (two checkpoints that cannot both hold).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<String>,
}

impl Alert {
    pub fn new(kind: Kind, log: &str, origin: Option<&str>, detail: impl Into<String>) -> Alert {
        Alert {
            time: jiff::Timestamp::now().to_string(),
            kind,
            log: log.to_string(),
            origin: origin.map(str::to_string),
            detail: detail.into(),
            entry: None,
            evidence: Vec::new(),
        }
    }
}

/// Webhook delivery: attempts per alert, and the first backoff (doubled each time).
const WEBHOOK_ATTEMPTS: u32 = 5;
const WEBHOOK_BACKOFF: Duration = Duration::from_millis(250);
const WEBHOOK_QUEUE: usize = 1024;

struct Webhook {
    queue: SyncSender<Bytes>,
    /// Alerts queued or being sent, so that `--once` can wait for them before exiting.
    pending: Arc<AtomicUsize>,
}

/// Where alerts go.
pub struct Alerts {
    webhook: Option<Webhook>,
    metrics: Arc<Metrics>,
    stdout: parking_lot::Mutex<()>,
}

impl Alerts {
    pub fn new(webhook: Option<(String, Fetcher)>, metrics: Arc<Metrics>) -> Alerts {
        let webhook = webhook.map(|(url, fetcher)| {
            let (queue, rx) = sync_channel::<Bytes>(WEBHOOK_QUEUE);
            let pending = Arc::new(AtomicUsize::new(0));
            let (p, m) = (pending.clone(), metrics.clone());
            std::thread::Builder::new()
                .name("monitor-webhook".into())
                .spawn(move || {
                    for body in rx {
                        deliver(&fetcher, &url, body, &m);
                        p.fetch_sub(1, Ordering::AcqRel);
                    }
                })
                .map(|_| Webhook { queue, pending })
        });
        let webhook = match webhook {
            Some(Ok(w)) => Some(w),
            Some(Err(e)) => {
                tracing::error!(error = %e, "cannot start the webhook thread; alerts go to stdout only");
                None
            }
            None => None,
        };
        Alerts { webhook, metrics, stdout: parking_lot::Mutex::new(()) }
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    pub fn emit(&self, alert: &Alert) {
        let Ok(line) = serde_json::to_string(alert) else { return };
        // Counted first: whoever reads the line and then scrapes sees it counted.
        self.metrics.alert(&alert.log, alert.kind);
        {
            let _one = self.stdout.lock();
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
        if let Some(w) = &self.webhook {
            w.pending.fetch_add(1, Ordering::AcqRel);
            if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = w.queue.try_send(Bytes::from(line)) {
                w.pending.fetch_sub(1, Ordering::AcqRel);
                self.metrics.webhook("dropped");
            }
        }
    }

    /// Waits (at most `limit`) until every queued alert was delivered or given up on.
    pub fn flush(&self, limit: Duration) {
        let Some(w) = &self.webhook else { return };
        let deadline = Instant::now() + limit;
        while w.pending.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn deliver(fetcher: &Fetcher, url: &str, body: Bytes, metrics: &Metrics) {
    let mut backoff = WEBHOOK_BACKOFF;
    for attempt in 1..=WEBHOOK_ATTEMPTS {
        let request = http::Request::post(url).header(http::header::CONTENT_TYPE, "application/json").body(body.clone());
        let outcome = match request {
            Ok(r) => fetcher.send(url, r).map_err(|e| e.to_string()).and_then(|resp| match resp.status().is_success() {
                true => Ok(()),
                false => Err(format!("POST {url}: answered HTTP {}", resp.status().as_u16())),
            }),
            Err(e) => Err(e.to_string()),
        };
        match outcome {
            Ok(()) => {
                metrics.webhook("sent");
                return;
            }
            Err(e) if attempt == WEBHOOK_ATTEMPTS => {
                tracing::warn!(error = %e, attempts = attempt, "webhook: giving up on an alert (it is on stdout)");
            }
            Err(e) => {
                tracing::debug!(error = %e, attempt, "webhook: retrying");
                std::thread::sleep(backoff);
                backoff *= 2;
            }
        }
    }
    metrics.webhook("failed");
}
