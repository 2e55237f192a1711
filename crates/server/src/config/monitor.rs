//! `[monitor]`: the monitor over this instance's own Rekor v2 log.

use std::path::PathBuf;

use serde::Deserialize;

/// `[monitor]`: off while `watch` is unset.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MonitorSettings {
    /// The watch list (TOML: emails, uris, san_regex, issuers, keys, digests; docs/monitor.md).
    pub watch: Option<PathBuf>,
    /// Seconds between polls.
    pub interval_secs: u64,
    /// POST each alert (JSON) here, with retries: https, or http to loopback.
    pub webhook: Option<String>,
    /// CA certificates (PEM) for the webhook's HTTPS and this instance's, when its certificate
    /// is not one the system trusts (the issued certificate of `--dev` is trusted by itself).
    pub ca_file: Option<PathBuf>,
}

impl Default for MonitorSettings {
    fn default() -> Self {
        MonitorSettings { watch: None, interval_secs: 30, webhook: None, ca_file: None }
    }
}

impl MonitorSettings {
    pub fn enabled(&self) -> bool {
        self.watch.is_some()
    }
}
