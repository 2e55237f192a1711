//! The URLs the configuration names: a public URL's host, and where keys may be fetched from.

use super::error::{ConfigError, UrlError};

/// Extracts the host from an http(s) URL: `https://log.example:8443/x` → `log.example`.
pub fn host_of(url: &str) -> Result<String, ConfigError> {
    let bad = || ConfigError::Invalid(format!("public URL {url:?} must look like http(s)://HOST[:PORT][/PATH]"));
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://")).ok_or_else(bad)?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return Err(bad());
    }
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        authority.rsplit_once(':').map_or(authority, |(h, port)| {
            if port.chars().all(|c| c.is_ascii_digit()) { h } else { authority }
        })
    };
    if host.is_empty() || host.contains(':') && !authority.starts_with('[') {
        return Err(bad());
    }
    Ok(host.to_ascii_lowercase())
}

/// An URL signet may fetch keys from: https, or http to a loopback host.
pub fn check_url(url: &str) -> Result<(), UrlError> {
    let host = host_of(url).map_err(|_| UrlError::Shape { url: url.to_string() })?;
    if url.starts_with("http://") && !signet_tls::is_loopback_host(&host) {
        return Err(UrlError::PlainHttp { url: url.to_string() });
    }
    Ok(())
}
