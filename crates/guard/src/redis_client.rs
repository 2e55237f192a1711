//! A client of the Redis that `guard.redis` names, its URL and TLS trust checked; shared by the
//! config's check and the shared limits.

use std::path::{Path, PathBuf};

/// Why `guard.redis` gives no client, or Redis did not do what was asked. A URL in it has
/// its password hidden.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedisClientError {
    #[error("guard.redis.url {url:?}: {source}; expected redis://[user:password@]host:port[/db], or rediss://… for TLS")]
    Url { url: String, source: redis::RedisError },
    #[error("guard.redis.ca_file is for TLS, but guard.redis.url {url:?} is not a rediss:// URL")]
    CaFileWithoutTls { url: String },
    #[error("guard.redis.ca_file {}: {source}", path.display())]
    CaFileRead { path: PathBuf, source: std::io::Error },
    #[error("guard.redis.ca_file {}: no PEM CERTIFICATE in it; expected the CA certificate(s) that signed Redis's", path.display())]
    CaFileEmpty { path: PathBuf },
    #[error("guard.redis.ca_file {}: {source}; expected a PEM file of CA certificates", path.display())]
    CaFileTls { path: PathBuf, source: redis::RedisError },
    /// Redis did not answer a command (`signet admin ban lift --redis`).
    #[error("Redis at {url}: {source}")]
    Unreachable { url: String, source: redis::RedisError },
}

/// A client of the Redis at `url`: `redis://` in the clear, `rediss://` over TLS (rustls),
/// trusting the CA in `ca_file` (PEM) when one is given, else the system's roots.
pub fn client(url: &str, ca_file: Option<&Path>) -> Result<redis::Client, RedisClientError> {
    let bad = |source| RedisClientError::Url { url: redact(url), source };
    let Some(path) = ca_file else { return redis::Client::open(url).map_err(bad) };
    if !url.starts_with("rediss://") {
        return Err(RedisClientError::CaFileWithoutTls { url: redact(url) });
    }
    let pem = std::fs::read(path).map_err(|source| RedisClientError::CaFileRead { path: path.to_path_buf(), source })?;
    // The redis crate would take a file with no certificate in it as an empty trust store.
    let blocks = signet_core::pem::decode_all(&pem).unwrap_or_default();
    if !blocks.iter().any(|b| b.label == "CERTIFICATE") {
        return Err(RedisClientError::CaFileEmpty { path: path.to_path_buf() });
    }
    redis::Client::build_with_tls(url, redis::TlsCertificates { client_tls: None, root_cert: Some(pem) })
        .map_err(|source| RedisClientError::CaFileTls { path: path.to_path_buf(), source })
}

/// The URL without its password, for messages.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}***{}", &url[..s + 3], &url[at..]),
        _ => url.to_string(),
    }
}
