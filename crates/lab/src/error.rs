//! What the lab's load generator can fail with, per connection.

#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    #[error("connect: {0}")]
    Connect(std::io::Error),
    #[error("{0}")]
    Tls(String),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("malformed response: {0}")]
    Protocol(&'static str),
    #[error("HTTP/2: {0}")]
    Http2(String),
}

impl ConnError {
    pub fn kind(&self) -> &'static str {
        match self {
            ConnError::Connect(_) => "connect",
            ConnError::Tls(_) => "tls",
            ConnError::Io(_) => "io",
            ConnError::Protocol(_) => "protocol",
            ConnError::Http2(_) => "http2",
        }
    }
}

/// A `signet bench micro` run.
#[derive(Debug, thiserror::Error)]
pub enum MicroError {
    /// A selector that names nothing, and the names that exist.
    #[error("{0}")]
    Usage(String),
    #[error("reading criterion's results: {0}")]
    Results(String),
}

/// A `signet bench tls` run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    #[error("{0}")]
    Usage(String),
    /// `--target` that is not `NAME=HOST:PORT`, or whose host does not resolve.
    #[error("--target {given:?}: expected NAME=HOST:PORT")]
    TargetSyntax { given: String },
    #[error("--target {given:?}: {source}")]
    TargetResolve { given: String, source: std::io::Error },
    #[error("--target {given:?}: {host} resolves to no address")]
    TargetNoAddress { given: String, host: String },
    #[error("--target {given:?}: the name before = is empty")]
    TargetName { given: String },
    #[error("--pid {given:?}: expected NAME=PID, e.g. nginx=1234")]
    PidSyntax { given: String },
    #[error("--backends: {0}")]
    Backend(#[source] signet_tls::UnknownBackend),
    #[error("--seconds-per-size must be 0.01..=60, --handshakes, --repeats and --max-messages at least 1")]
    Limits,
    /// A server to compare that is neither a backend nor a `--target`.
    #[error("{0:?} is neither a backend (rustls, openssl) nor the NAME of a --target")]
    UnknownServer(String),
    /// A server to judge that the report does not hold.
    #[error("{0:?} was not measured")]
    NotMeasured(String),
    #[error("{0}")]
    Setup(String),
    #[error("{peer}: {what}: {source}")]
    Io { peer: String, what: &'static str, source: std::io::Error },
    #[error("{peer}: TLS handshake failed: {why}")]
    Handshake { peer: String, why: String },
    #[error("{peer}: {why}")]
    Protocol { peer: String, why: String },
}

impl BenchError {
    /// A bad option rather than a failed run (exit 2, not 1).
    pub fn is_usage(&self) -> bool {
        use BenchError::*;
        matches!(
            self,
            Usage(_)
                | TargetSyntax { .. }
                | TargetResolve { .. }
                | TargetNoAddress { .. }
                | TargetName { .. }
                | PidSyntax { .. }
                | Backend(_)
                | Limits
                | UnknownServer(_)
                | NotMeasured(_)
        )
    }
}
