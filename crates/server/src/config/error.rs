//! What reading and checking the configuration fails with; every message names the setting.

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading config {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("config {path}: {message}")]
    Parse { path: String, message: String },
    #[error("environment variable {name}: {why}")]
    Env { name: String, why: String },
    /// `segment` of the variable's key is a value in the config file, where a table was expected.
    #[error("environment variable {name}: {segment} is set in the config file as something other than a table")]
    EnvNotATable { name: String, segment: String },
    #[error("environment variable {name}: an empty key")]
    EnvEmptyKey { name: String },
    #[error(transparent)]
    Tracing(#[from] TracingError),
    #[error("{0}")]
    Invalid(String),
}

/// What is wrong with `[tracing]`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TracingError {
    #[error("tracing.otlp_endpoint {endpoint:?} is not a URL: {source}")]
    NotAUrl { endpoint: String, source: http::uri::InvalidUri },
    #[error("tracing.otlp_endpoint {endpoint:?} must start with http:// or https://")]
    Scheme { endpoint: String },
    #[error("tracing.otlp_endpoint {endpoint:?} has no host")]
    NoHost { endpoint: String },
    #[error("tracing.otlp_endpoint {endpoint:?}: user info is not allowed; use an https endpoint")]
    UserInfo { endpoint: String },
    #[error("tracing.otlp_endpoint {endpoint:?}: plain http is allowed only to loopback hosts (127.0.0.0/8, ::1, localhost); use https")]
    PlainHttp { endpoint: String },
    #[error("tracing.otlp_endpoint {endpoint:?}: a query string is not allowed")]
    Query { endpoint: String },
    /// `setting` under `tracing.`, the values it takes, and the one it was given.
    #[error("tracing.{setting} must be {expected}, got {got}")]
    OutOfRange { setting: &'static str, expected: &'static str, got: String },
    #[error("tracing.service_name must be 1 to 128 characters")]
    ServiceName,
}

/// Why signet does not fetch keys from a URL.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UrlError {
    #[error("{url:?} must look like https://HOST[:PORT][/PATH]")]
    Shape { url: String },
    #[error("{url:?} is plain http; keys are fetched over https (plain http only for loopback hosts: 127.0.0.0/8, ::1, localhost)")]
    PlainHttp { url: String },
}
