//! `[tracing]`: trace export over OTLP.

use serde::Deserialize;

use super::error::TracingError;

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
    pub fn traces_url(&self) -> Result<Option<String>, TracingError> {
        let Some(endpoint) = self.otlp_endpoint.as_deref().filter(|e| !e.is_empty()) else { return Ok(None) };
        let named = || endpoint.to_string();
        let uri: http::Uri = endpoint.parse().map_err(|source| TracingError::NotAUrl { endpoint: named(), source })?;
        match uri.scheme_str() {
            Some("http") | Some("https") => {}
            _ => return Err(TracingError::Scheme { endpoint: named() }),
        }
        let Some(authority) = uri.authority() else { return Err(TracingError::NoHost { endpoint: named() }) };
        if authority.as_str().contains('@') {
            return Err(TracingError::UserInfo { endpoint: named() });
        }
        if uri.scheme_str() == Some("http") && !signet_tls::is_loopback_host(authority.host()) {
            return Err(TracingError::PlainHttp { endpoint: named() });
        }
        if uri.query().is_some() {
            return Err(TracingError::Query { endpoint: named() });
        }
        Ok(Some(match uri.path() {
            "" | "/" => format!("{}/v1/traces", endpoint.trim_end_matches('/')),
            _ => endpoint.to_string(),
        }))
    }

    pub fn validate(&self) -> Result<(), TracingError> {
        self.traces_url()?;
        let out_of_range = |setting, expected, got: &dyn std::fmt::Display| TracingError::OutOfRange { setting, expected, got: got.to_string() };
        if !(0.0..=1.0).contains(&self.sample_ratio) {
            return Err(out_of_range("sample_ratio", "0.0..=1.0", &self.sample_ratio));
        }
        if self.service_name.is_empty() || self.service_name.len() > 128 {
            return Err(TracingError::ServiceName);
        }
        if !(10..=60_000).contains(&self.export_interval_ms) {
            return Err(out_of_range("export_interval_ms", "10..=60000", &self.export_interval_ms));
        }
        if !(1..=300).contains(&self.export_timeout_secs) {
            return Err(out_of_range("export_timeout_secs", "1..=300", &self.export_timeout_secs));
        }
        if !(1..=1_000_000).contains(&self.max_queue) {
            return Err(out_of_range("max_queue", "1..=1000000", &self.max_queue));
        }
        Ok(())
    }
}
