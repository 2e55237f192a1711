//! What reaching a database fails with: a URL that names no usable database, the runtime
//! that drives the connections, or a query's task that ended without an answer.

/// Every failure of this crate's connection layer. The stores wrap it in their own errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DbError {
    /// A PostgreSQL URL that cannot be used, and why (already naming the URL, redacted).
    #[error("{0}")]
    Url(String),
    /// TLS to PostgreSQL could not be set up (OpenSSL's reason).
    #[error("TLS to PostgreSQL: {0}")]
    Tls(String),
    /// The runtime that drives every connection could not start.
    #[error("starting the database client runtime: {0}")]
    Runtime(String),
    /// The database could not be reached, or refused the connection (in its own words).
    #[error("{0}")]
    Connect(String),
    /// No connection within this long.
    #[error("no connection within {} s", .0.as_secs())]
    NoAnswer(std::time::Duration),
    /// A statement failed, in the database's own words (or the driver's, with its causes).
    #[error("{0}")]
    Query(String),
    /// A database task ended without an answer: it panicked.
    #[error("a database task ended without an answer (it panicked)")]
    TaskLost,
}
