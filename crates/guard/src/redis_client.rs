//! A client of the Redis that `guard.redis` names, its URL and TLS trust checked; shared by the
//! config's check and the shared limits.

/// A client of the Redis at `url`: `redis://` in the clear, `rediss://` over TLS (rustls),
/// trusting the CA in `ca_file` (PEM) when one is given, else the system's roots.
pub fn client(url: &str, ca_file: Option<&std::path::Path>) -> Result<redis::Client, String> {
    let bad = |e: redis::RedisError| {
        format!("guard.redis.url {:?}: {e}; expected redis://[user:password@]host:port[/db], or rediss://… for TLS", redact(url))
    };
    let Some(path) = ca_file else { return redis::Client::open(url).map_err(bad) };
    if !url.starts_with("rediss://") {
        return Err(format!("guard.redis.ca_file is for TLS, but guard.redis.url {:?} is not a rediss:// URL", redact(url)));
    }
    let pem = std::fs::read(path).map_err(|e| format!("guard.redis.ca_file {}: {e}", path.display()))?;
    // The redis crate would take a file with no certificate in it as an empty trust store.
    let blocks = signet_core::pem::decode_all(&pem).unwrap_or_default();
    if !blocks.iter().any(|b| b.label == "CERTIFICATE") {
        return Err(format!("guard.redis.ca_file {}: no PEM CERTIFICATE in it; expected the CA certificate(s) that signed Redis's", path.display()));
    }
    redis::Client::build_with_tls(url, redis::TlsCertificates { client_tls: None, root_cert: Some(pem) })
        .map_err(|e| format!("guard.redis.ca_file {}: {e}; expected a PEM file of CA certificates", path.display()))
}

/// The URL without its password, for messages.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}***{}", &url[..s + 3], &url[at..]),
        _ => url.to_string(),
    }
}
