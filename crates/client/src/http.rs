//! A blocking HTTP(S) client for the signing flow: one agent, so connections to the same
//! instance are reused across the CA, log and TSA calls.
//!
//! HTTPS is rustls with the aws-lc-rs provider, as everywhere in signet
//! ([`signet_tls::client`]), verifying servers against the platform's roots (read once per
//! process; `SSL_CERT_FILE` and `SSL_CERT_DIR` are honoured, which is how a `--dev`
//! instance's `tls_ca.pem` is given) or a PEM bundle.

use std::sync::Arc;
use std::time::Duration;

use signet_tls::Trust;

use serde_json::Value;

use crate::{service_err, ClientError};

pub struct Http {
    agent: ureq::Agent,
    /// Why HTTPS cannot be used (no root certificates could be read), said at the first
    /// https:// request rather than at construction: plain-HTTP use does not need them.
    tls_unavailable: Option<String>,
}

/// A reply that passed the status check.
pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Default for Http {
    fn default() -> Self {
        Self::new(Duration::from_secs(30))
    }
}

impl Http {
    /// A client that trusts the platform's roots.
    pub fn new(timeout: Duration) -> Self {
        Self::with_trust(timeout, &Trust::Platform)
    }

    /// A client that verifies HTTPS servers against `trust`.
    pub fn with_trust(timeout: Duration, trust: &Trust) -> Self {
        let (roots, tls_unavailable) = match signet_tls::client::root_certificates(trust) {
            Ok(certs) => (certs.iter().map(|c| ureq::tls::Certificate::from_der(c.as_ref()).to_owned()).collect(), None),
            Err(e) => (Vec::new(), Some(e.to_string())),
        };
        let tls = ureq::tls::TlsConfig::builder()
            .provider(ureq::tls::TlsProvider::Rustls)
            .unversioned_rustls_crypto_provider(signet_tls::client::provider())
            .root_certs(ureq::tls::RootCerts::Specific(Arc::new(roots)))
            .build();
        let agent = ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(timeout)).tls_config(tls).build().into();
        Http { agent, tls_unavailable }
    }

    fn check_tls(&self, service: &'static str, url: &str) -> Result<(), ClientError> {
        match &self.tls_unavailable {
            Some(why) if url.starts_with("https://") => Err(service_err(service, url, format!("cannot verify HTTPS servers: {why}"))),
            _ => Ok(()),
        }
    }

    pub fn post(
        &self,
        service: &'static str,
        url: &str,
        content_type: &str,
        accept: &str,
        body: Vec<u8>,
        bearer: Option<&str>,
    ) -> Result<Reply, ClientError> {
        self.check_tls(service, url)?;
        let mut req = self.agent.post(url).header("content-type", content_type).header("accept", accept);
        if let Some(token) = bearer {
            req = req.header("authorization", format!("Bearer {token}"));
        }
        let mut resp = req.send(body).map_err(|e| service_err(service, url, e))?;
        let status = resp.status().as_u16();
        let body = resp.body_mut().with_config().limit(16 << 20).read_to_vec().map_err(|e| service_err(service, url, e))?;
        if !(200..300).contains(&status) {
            return Err(service_err(service, url, format!("HTTP {status}: {}", error_message(&body))));
        }
        Ok(Reply { status, body })
    }

    /// A GET whose reply must be 2xx, at most `limit` bytes.
    pub fn get(&self, service: &'static str, url: &str, limit: u64) -> Result<Reply, ClientError> {
        self.check_tls(service, url)?;
        let mut resp = self.agent.get(url).call().map_err(|e| service_err(service, url, e))?;
        let status = resp.status().as_u16();
        let body = resp.body_mut().with_config().limit(limit).read_to_vec().map_err(|e| service_err(service, url, e))?;
        if !(200..300).contains(&status) {
            return Err(service_err(service, url, format!("HTTP {status}: {}", error_message(&body))));
        }
        Ok(Reply { status, body })
    }

    pub fn post_json(&self, service: &'static str, url: &str, body: &Value, bearer: Option<&str>) -> Result<Value, ClientError> {
        let reply = self.post(service, url, "application/json", "application/json", body.to_string().into_bytes(), bearer)?;
        serde_json::from_slice(&reply.body).map_err(|e| service_err(service, url, format!("reply is not JSON: {e}")))
    }
}

/// The `message` of a JSON error reply, or the start of the body.
fn error_message(body: &[u8]) -> String {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        if let Some(m) = v.get("message").and_then(Value::as_str) {
            return m.to_string();
        }
    }
    String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned()
}
