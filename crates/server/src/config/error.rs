//! What reading and checking the configuration fails with; every message names the setting.

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading config {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("config {path}: {message}")]
    Parse { path: String, message: String },
    #[error("environment variable {name}: {why}")]
    Env { name: String, why: String },
    #[error("{0}")]
    Invalid(String),
}
