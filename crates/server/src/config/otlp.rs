//! `[tracing]`: trace export over OTLP.

use serde::Deserialize;

/// `[tracing]`: where spans go, and how many.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TracingSettings {
    /// An OTLP/HTTP collector: `http://127.0.0.1:4318` (the path `/v1/traces` is added when
    /// none is given) or a full `https://…/v1/traces`. Unset: no spans are exported.
    pub otlp_endpoint: Option<String>,
    /// The share of traces started here that are exported, 0.0 to 1.0. A request that
    /// carries a sampled `traceparent` follows its caller's decision.
    pub sample_ratio: f64,
    /// `service.name` on every span.
    pub service_name: String,
    /// Spans wait at most this long before they are sent.
    pub export_interval_ms: u64,
    /// One export may take this long before it is given up.
    pub export_timeout_secs: u64,
    /// Spans held while the collector is slow; beyond it new spans are dropped.
    pub max_queue: usize,
    /// A PEM bundle of the CAs that may issue an https collector's certificate (default:
    /// the system's roots).
    pub ca_file: Option<std::path::PathBuf>,
}

impl Default for TracingSettings {
    fn default() -> Self {
        TracingSettings {
            otlp_endpoint: None,
            sample_ratio: 1.0,
            service_name: "signet".into(),
            export_interval_ms: 5_000,
            export_timeout_secs: 10,
            max_queue: 2_048,
            ca_file: None,
        }
    }
}

impl TracingSettings {
    /// The collector's traces URL, or None when export is off.
    pub fn traces_url(&self) -> Result<Option<String>, String> {
        let Some(endpoint) = self.otlp_endpoint.as_deref().filter(|e| !e.is_empty()) else { return Ok(None) };
        let uri: http::Uri = endpoint.parse().map_err(|e| format!("tracing.otlp_endpoint {endpoint:?} is not a URL: {e}"))?;
        match uri.scheme_str() {
            Some("http") | Some("https") => {}
            _ => return Err(format!("tracing.otlp_endpoint {endpoint:?} must start with http:// or https://")),
        }
        let Some(authority) = uri.authority() else { return Err(format!("tracing.otlp_endpoint {endpoint:?} has no host")) };
        if authority.as_str().contains('@') {
            return Err(format!("tracing.otlp_endpoint {endpoint:?}: user info is not allowed; use an https endpoint"));
        }
        if uri.scheme_str() == Some("http") && !signet_tls::is_loopback_host(authority.host()) {
            return Err(format!(
                "tracing.otlp_endpoint {endpoint:?}: plain http is allowed only to loopback hosts (127.0.0.0/8, ::1, localhost); use https"
            ));
        }
        if uri.query().is_some() {
            return Err(format!("tracing.otlp_endpoint {endpoint:?}: a query string is not allowed"));
        }
        Ok(Some(match uri.path() {
            "" | "/" => format!("{}/v1/traces", endpoint.trim_end_matches('/')),
            _ => endpoint.to_string(),
        }))
    }

    pub fn validate(&self) -> Result<(), String> {
        self.traces_url()?;
        if !(0.0..=1.0).contains(&self.sample_ratio) {
            return Err(format!("tracing.sample_ratio must be 0.0..=1.0, got {}", self.sample_ratio));
        }
        if self.service_name.is_empty() || self.service_name.len() > 128 {
            return Err("tracing.service_name must be 1 to 128 characters".into());
        }
        if !(10..=60_000).contains(&self.export_interval_ms) {
            return Err(format!("tracing.export_interval_ms must be 10..=60000, got {}", self.export_interval_ms));
        }
        if !(1..=300).contains(&self.export_timeout_secs) {
            return Err(format!("tracing.export_timeout_secs must be 1..=300, got {}", self.export_timeout_secs));
        }
        if !(1..=1_000_000).contains(&self.max_queue) {
            return Err(format!("tracing.max_queue must be 1..=1000000, got {}", self.max_queue));
        }
        Ok(())
    }
}
