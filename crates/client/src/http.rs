//! The HTTP(S) client of the signing flow and the admin commands: signet's one client
//! ([`signet_tls::Fetcher`]), so connections to an instance are kept and reused across the
//! CA, log and TSA calls (HTTP/2 when the server offers it), and servers are verified against
//! the platform's roots, read once per process (`SSL_CERT_FILE` and `SSL_CERT_DIR` are
//! honoured, which is how a `--dev` instance's `tls_ca.pem` is given), or a PEM bundle.
//! Plain `http://` only to loopback hosts: these requests carry identity and API tokens.

use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;
use signet_tls::{Fetcher, Trust};

use crate::{service_err, ClientError};

pub struct Http {
    /// Or why the trust could not be loaded, told at each request.
    fetcher: Result<Fetcher, signet_tls::TrustError>,
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

    /// A client that verifies HTTPS servers against `trust`. A trust that cannot be loaded is
    /// reported at the first request, not here: callers that build one need not handle it.
    pub fn with_trust(timeout: Duration, trust: &Trust) -> Self {
        let fetcher = signet_tls::client_config(trust).map(|tls| Fetcher::new(tls).with_timeout(timeout).with_max_bytes(16 << 20));
        Http { fetcher }
    }

    fn fetcher(&self, service: &'static str, url: &str) -> Result<&Fetcher, ClientError> {
        self.fetcher.as_ref().map_err(|why| service_err(service, url, format!("cannot verify HTTPS servers: {why}")))
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
        let mut req = http::Request::post(url).header("content-type", content_type).header("accept", accept);
        if let Some(token) = bearer {
            req = req.header("authorization", format!("Bearer {token}"));
        }
        let req = req.body(Bytes::from(body)).map_err(|e| service_err(service, url, e))?;
        self.exchange(service, url, self.fetcher(service, url)?, req)
    }

    /// A GET whose reply must be 2xx, at most `limit` bytes.
    pub fn get(&self, service: &'static str, url: &str, limit: u64) -> Result<Reply, ClientError> {
        let fetcher = self.fetcher(service, url)?.clone().with_max_bytes(usize::try_from(limit).unwrap_or(usize::MAX));
        let req = http::Request::get(url).body(Bytes::new()).map_err(|e| service_err(service, url, e))?;
        self.exchange(service, url, &fetcher, req)
    }

    /// A GET of a JSON document, with an API token if given.
    pub fn get_json(&self, service: &'static str, url: &str, bearer: Option<&str>) -> Result<Value, ClientError> {
        let mut req = http::Request::get(url).header("accept", "application/json");
        if let Some(token) = bearer {
            req = req.header("authorization", format!("Bearer {token}"));
        }
        let req = req.body(Bytes::new()).map_err(|e| service_err(service, url, e))?;
        let reply = self.exchange(service, url, self.fetcher(service, url)?, req)?;
        serde_json::from_slice(&reply.body).map_err(|e| service_err(service, url, format!("reply is not JSON: {e}")))
    }

    fn exchange(&self, service: &'static str, url: &str, fetcher: &Fetcher, req: http::Request<Bytes>) -> Result<Reply, ClientError> {
        let resp = fetcher.send(url, req).map_err(|e| service_err(service, url, e.failure))?;
        let status = resp.status().as_u16();
        let body = resp.into_body().to_vec();
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
