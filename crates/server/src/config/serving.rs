//! `[http]` and `[limits]`: what the listener serves, and the bounds on every request.

use serde::Deserialize;

use std::net::SocketAddr;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Largest log entry body (the canonical entry, after parsing). Rekor v2 entry bundles
    /// prefix each entry with a 16-bit length (c2sp.org/tlog-tiles), so at most 65535.
    pub max_entry_bytes: usize,
    /// Largest body of the other requests (certificates, timestamps, searches, admin).
    pub max_small_body_bytes: usize,
    /// Most header fields in one request.
    pub max_header_count: usize,
    /// Most bytes of header names and values in one request.
    pub max_header_bytes: usize,
    /// Deepest nesting of arrays and objects in a JSON body.
    pub max_json_depth: usize,
    /// Largest intoto attestation (an envelope's decoded payload) kept and served with its
    /// entry as `attestation.data`, as Rekor's `max_attestation_size`. A larger one is logged
    /// all the same, and served without it; 0 keeps none.
    pub max_attestation_bytes: usize,
}

impl Limits {
    /// What the validation layer enforces.
    pub fn input(&self) -> signet_guard::InputLimits {
        signet_guard::InputLimits {
            max_body_bytes: self.max_body_bytes,
            max_small_body_bytes: self.max_small_body_bytes,
            max_header_count: self.max_header_count,
            max_header_bytes: self.max_header_bytes,
            max_json_depth: self.max_json_depth,
        }
    }
}

/// Connections: how long a client may take, how many may be open, how shutdown ends.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpSettings {
    /// A client must send a request's complete headers within this many seconds of the
    /// connection opening (or of the previous response), or it is closed.
    pub header_read_timeout_secs: u64,
    /// A connection on which nothing was read or written for this long is closed.
    pub idle_timeout_secs: u64,
    /// Open connections at most (TLS handshakes included). Beyond it a new connection is
    /// closed at once.
    pub max_connections: usize,
    /// On SIGTERM, in-flight requests get this long to finish before their connections close.
    pub shutdown_grace_secs: u64,
    /// One log line per request (`signet::access`), off by default.
    pub access_log: bool,
    /// Where `/metrics` is served, on a port of its own (with `/healthz` and `/readyz`), as
    /// Rekor and Fulcio serve theirs. Unset: on the public port under `--dev`, and nowhere in
    /// production, where the public port never serves it.
    pub metrics_listen: Option<SocketAddr>,
    /// Where the admin API (`/api/admin/…`) is served, likewise; it may be `metrics_listen`'s
    /// address. Unset: on the public port under `--dev`, and nowhere in production.
    pub admin_listen: Option<SocketAddr>,
}

/// Which listener serves a route ([`HttpSettings::surfaces`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// The Sigstore APIs, the trust documents, the explorer.
    Public,
    /// `/metrics`.
    Metrics,
    /// `/api/admin/…`.
    Admin,
}

impl Surface {
    /// The surface a route template belongs to.
    pub fn of(path: &str) -> Surface {
        match path {
            "/metrics" => Surface::Metrics,
            p if p.starts_with("/api/admin/") => Surface::Admin,
            _ => Surface::Public,
        }
    }

    /// The setting that moves this surface to a port of its own.
    pub fn setting(self) -> &'static str {
        match self {
            Surface::Public => "listen",
            Surface::Metrics => "http.metrics_listen",
            Surface::Admin => "http.admin_listen",
        }
    }
}

impl HttpSettings {
    /// What each listener serves: the public one (`None`) first, then each address of its
    /// own (`metrics_listen` and `admin_listen` share one when they name the same address).
    /// A surface with no address of its own is on the public port under `--dev`, else served
    /// nowhere.
    pub fn surfaces(&self, dev: bool) -> Vec<(Option<SocketAddr>, Vec<Surface>)> {
        let mut out = vec![(None, vec![Surface::Public])];
        for (surface, addr) in [(Surface::Metrics, self.metrics_listen), (Surface::Admin, self.admin_listen)] {
            match addr {
                None if dev => out[0].1.push(surface),
                None => {}
                Some(a) => match out.iter_mut().find(|(at, _)| *at == Some(a)) {
                    Some((_, list)) => list.push(surface),
                    None => out.push((Some(a), vec![surface])),
                },
            }
        }
        out
    }
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            header_read_timeout_secs: 10,
            idle_timeout_secs: 60,
            max_connections: 10_000,
            shutdown_grace_secs: 10,
            access_log: false,
            metrics_listen: None,
            admin_listen: None,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 128 * 1024,
            max_entry_bytes: 32 * 1024,
            max_small_body_bytes: 64 * 1024,
            max_header_count: 64,
            max_header_bytes: 16 * 1024,
            max_json_depth: 32,
            max_attestation_bytes: 100 * 1024,
        }
    }
}
