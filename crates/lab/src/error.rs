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
pub enum BenchError {
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Setup(String),
    #[error("{peer}: {what}: {source}")]
    Io { peer: String, what: &'static str, source: std::io::Error },
    #[error("{peer}: TLS handshake failed: {why}")]
    Handshake { peer: String, why: String },
    #[error("{peer}: {why}")]
    Protocol { peer: String, why: String },
}
