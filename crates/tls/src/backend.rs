//! Which TLS library terminates connections, chosen at runtime (`--tls-backend`).

use std::fmt;
use std::str::FromStr;

/// A server-side TLS implementation. Both speak TLS 1.3 and 1.2 and offer the same ALPN
/// protocols, so a client cannot tell them apart except by timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Backend {
    /// rustls with the aws-lc-rs crypto provider: memory-safe, the default.
    #[default]
    Rustls,
    /// OpenSSL 3 (the system's libssl), through `SslAcceptor`: for sites that must use it.
    Openssl,
}

impl Backend {
    pub const ALL: [Backend; 2] = [Backend::Rustls, Backend::Openssl];

    pub fn name(self) -> &'static str {
        match self {
            Backend::Rustls => "rustls",
            Backend::Openssl => "openssl",
        }
    }

    /// The library's version: rustls's crate version as built (from Cargo.lock), or the
    /// version string of the OpenSSL linked at run time (`OpenSSL 3.0.15 3 Sep 2024`).
    pub fn library_version(self) -> &'static str {
        match self {
            Backend::Rustls => env!("SIGNET_RUSTLS_VERSION"),
            Backend::Openssl => openssl::version::version(),
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("TLS backend {0:?} is not known; expected rustls or openssl")]
pub struct UnknownBackend(pub String);

impl FromStr for Backend {
    type Err = UnknownBackend;
    fn from_str(s: &str) -> Result<Backend, UnknownBackend> {
        Backend::ALL.into_iter().find(|b| b.name() == s).ok_or_else(|| UnknownBackend(s.to_string()))
    }
}

/// The ALPN protocols a server offers by default, most preferred first: HTTP/2 when the
/// client speaks it, HTTP/1.1 otherwise.
pub const HTTP_ALPN: &[&[u8]] = &[b"h2", b"http/1.1"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_say_what_is_expected() {
        for b in Backend::ALL {
            assert_eq!(b.name().parse::<Backend>().unwrap(), b);
        }
        let err = "wolfssl".parse::<Backend>().unwrap_err().to_string();
        assert_eq!(err, "TLS backend \"wolfssl\" is not known; expected rustls or openssl");
        // The versions are real: rustls 0.x.y from Cargo.lock, OpenSSL's own string.
        assert!(Backend::Rustls.library_version().starts_with("0."), "{}", Backend::Rustls.library_version());
        assert!(Backend::Openssl.library_version().starts_with("OpenSSL "), "{}", Backend::Openssl.library_version());
    }
}
