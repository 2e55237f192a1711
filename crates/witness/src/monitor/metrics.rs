//! Prometheus metrics of the monitor, and a minimal endpoint that serves them.
//!
//! Updated once per page of entries, not per entry, so one mutex is no contention.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use super::kind::Kind;

#[derive(Default)]
struct PerLog {
    entries: u64,
    unparsed: u64,
    size: u64,
    fetch_errors: u64,
    last_success: i64,
    alerts: BTreeMap<&'static str, u64>,
}

/// One per-log metric family: name, type, help, and how to read it.
type Family = (&'static str, &'static str, &'static str, fn(&PerLog) -> f64);

#[derive(Default)]
pub struct Metrics {
    logs: parking_lot::Mutex<BTreeMap<String, PerLog>>,
    webhook: parking_lot::Mutex<BTreeMap<&'static str, u64>>,
}

impl Metrics {
    fn with(&self, log: &str, f: impl FnOnce(&mut PerLog)) {
        let mut logs = self.logs.lock();
        f(logs.entry(log.to_string()).or_default());
    }

    pub fn entries(&self, log: &str, read: u64, unparsed: u64) {
        self.with(log, |l| {
            l.entries += read;
            l.unparsed += unparsed;
        });
    }

    pub fn verified(&self, log: &str, size: u64) {
        self.with(log, |l| {
            l.size = size;
            l.last_success = jiff::Timestamp::now().as_second();
        });
    }

    pub fn fetch_error(&self, log: &str) {
        self.with(log, |l| l.fetch_errors += 1);
    }

    pub fn alert(&self, log: &str, kind: Kind) {
        self.with(log, |l| *l.alerts.entry(kind.name()).or_default() += 1);
    }

    pub fn webhook(&self, outcome: &'static str) {
        *self.webhook.lock().entry(outcome).or_default() += 1;
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let logs = self.logs.lock();
        let families: [Family; 5] = [
            ("signet_monitor_entries_total", "counter", "Entries read and checked against the watch list.", |l| l.entries as f64),
            ("signet_monitor_entries_unparsed_total", "counter", "Entries whose body the monitor could not read.", |l| l.unparsed as f64),
            ("signet_monitor_tree_size", "gauge", "Size of the newest verified checkpoint.", |l| l.size as f64),
            ("signet_monitor_fetch_errors_total", "counter", "Polls that failed to fetch from the log.", |l| l.fetch_errors as f64),
            ("signet_monitor_last_success_timestamp_seconds", "gauge", "When a checkpoint last verified.", |l| l.last_success as f64),
        ];
        for (name, kind, help, value) in families {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (log, l) in logs.iter() {
                let _ = writeln!(out, "{name}{{log=\"{}\"}} {}", escape(log), value(l));
            }
        }
        let _ = writeln!(out, "# HELP signet_monitor_alerts_total Alerts raised, by kind.\n# TYPE signet_monitor_alerts_total counter");
        for (log, l) in logs.iter() {
            for kind in [Kind::Match, Kind::Inconsistent, Kind::BadSignature, Kind::EntriesMismatch, Kind::OriginChanged, Kind::Rotated] {
                let n = l.alerts.get(kind.name()).copied().unwrap_or(0);
                let _ = writeln!(out, "signet_monitor_alerts_total{{log=\"{}\",kind=\"{}\"}} {n}", escape(log), kind.name());
            }
        }
        let _ = writeln!(out, "# HELP signet_monitor_webhook_total Webhook deliveries, by outcome.\n# TYPE signet_monitor_webhook_total counter");
        let webhook = self.webhook.lock();
        for outcome in ["sent", "failed", "dropped"] {
            let _ = writeln!(out, "signet_monitor_webhook_total{{outcome=\"{outcome}\"}} {}", webhook.get(outcome).copied().unwrap_or(0));
        }
        out
    }
}

fn escape(label: &str) -> String {
    label.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Serves `render()` to every GET on `addr`, from one thread. A scrape is one small
/// request, so this needs no HTTP stack: read the head (bounded, with a timeout), answer, close.
pub fn serve(addr: SocketAddr, metrics: std::sync::Arc<Metrics>) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let bound = listener.local_addr()?;
    std::thread::Builder::new().name("monitor-metrics".into()).spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let mut head = [0u8; 4096];
            let mut got = 0;
            while got < head.len() {
                match stream.read(&mut head[got..]) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got += n,
                }
                if head[..got].windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            let body = metrics.render();
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    })?;
    Ok(bound)
}
