//! Configuration: one TOML file, then `SIGNET_*` environment variables, then flags.
//!
//! Unknown keys are errors that name the key: a typo in a security service's config must
//! not silently fall back to a default.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

mod ca;
pub mod env;
mod error;
mod keys;
mod log;
mod monitor;
mod oidc;
mod otlp;
mod serving;
mod tls;
mod tuf;
mod url;
mod witness;
#[cfg(test)]
mod tests;

pub use ca::CaSettings;
pub use error::{ConfigError, TracingError, UrlError};
pub use serving::{HttpSettings, Limits, Surface};
pub use keys::KeyPaths;
pub use log::LogSettings;
pub use monitor::MonitorSettings;
pub use oidc::{CiProviderSettings, IssuerSettings, OidcSettings};
pub use tls::{TlsMode, TlsSettings};
pub use otlp::TracingSettings;
pub use tuf::TufSettings;
pub use url::{check_url, host_of};
pub use witness::{LogWitnesses, WitnessMember, WitnessSettings, WitnessedLogSettings};

/// Every key of [`Config`] by the `SIGNET_*` variable that sets it (`signet config env`).
pub fn env_keys() -> &'static env::Keys {
    static KEYS: std::sync::OnceLock<env::Keys> = std::sync::OnceLock::new();
    KEYS.get_or_init(env::keys_of::<Config>)
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Address to bind.
    pub listen: SocketAddr,
    /// Where keys and the embedded database live.
    pub data_dir: PathBuf,
    /// The URL clients reach this instance at. Log origins are derived from its host.
    pub public_url: Option<String>,
    /// Generate missing keys and allow the development conveniences.
    pub dev: bool,
    /// `sqlite://PATH`; defaults to `<data_dir>/signet.sqlite`.
    pub storage: Option<String>,
    pub log: LogSettings,
    pub ca: CaSettings,
    pub keys: KeyPaths,
    pub limits: Limits,
    pub http: HttpSettings,
    pub oidc: OidcSettings,
    pub tls: TlsSettings,
    /// The TUF repository at `/tuf/` (docs/operations.md).
    pub tuf: TufSettings,
    /// Rate limits, bans and API tokens (docs/guard.md); all off by default.
    pub guard: signet_guard::GuardConfig,
    /// Trace export over OTLP (docs/operations.md); off by default.
    pub tracing: TracingSettings,
    /// signet as a witness for other logs (docs/witness.md); off unless it lists a log.
    pub witness: WitnessSettings,
    /// The monitor over this instance's own Rekor v2 log (docs/monitor.md); off unless `watch` is set.
    pub monitor: MonitorSettings,
    /// The file this was read from, if any: SIGHUP rereads its `[guard.roles]`.
    #[serde(skip)]
    pub source: Option<PathBuf>,
    /// `SIGNET_*` variables set that name no key (a misspelling does nothing): `config check`
    /// and `serve` point them out.
    #[serde(skip)]
    pub unknown_env: Vec<String>,
}

/// Every option, commented: what `signet config example` prints (and docs/configuration.md shows).
pub const EXAMPLE: &str = include_str!("config_example.toml");

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            data_dir: PathBuf::from("signet-data"),
            public_url: None,
            dev: false,
            storage: None,
            log: LogSettings::default(),
            ca: CaSettings::default(),
            keys: KeyPaths::default(),
            limits: Limits::default(),
            http: HttpSettings::default(),
            oidc: OidcSettings::default(),
            tls: TlsSettings::default(),
            tuf: TufSettings::default(),
            guard: signet_guard::GuardConfig::default(),
            tracing: TracingSettings::default(),
            witness: WitnessSettings::default(),
            monitor: MonitorSettings::default(),
            source: None,
            unknown_env: Vec::new(),
        }
    }
}

/// A TOML error with the line it points at: `line 3 (`batch_max_entries = "x"`): invalid
/// type: string "x", expected usize`. serde names the key in unknown-key errors; the quoted
/// line names it for type errors.
fn located(text: &str, e: &toml::de::Error) -> String {
    match e.span() {
        Some(span) => {
            let start = span.start.min(text.len());
            let line = text[..start].matches('\n').count() + 1;
            let content = text.lines().nth(line - 1).unwrap_or("").trim();
            format!("line {line} (`{content}`): {}", e.message())
        }
        None => e.message().to_string(),
    }
}

impl Config {
    /// Reads `path` (if given) over the defaults, then applies `SIGNET_*` variables
    /// ([`env`]: one for every key).
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let text = match path {
            Some(p) => std::fs::read_to_string(p).map_err(|source| ConfigError::Read { path: p.display().to_string(), source })?,
            None => String::new(),
        };
        let shown = path.map_or_else(|| "(none)".to_string(), |p| p.display().to_string());
        let mut cfg = Config::from_text(&text, &shown, std::env::vars())?;
        cfg.source = path.map(Path::to_path_buf);
        Ok(cfg)
    }

    /// The config file's `text` (empty: none) with the `SIGNET_*` variables among `vars` over it.
    fn from_text(text: &str, shown: &str, vars: impl IntoIterator<Item = (String, String)>) -> Result<Config, ConfigError> {
        // The file alone first, so that its errors name its lines.
        let from_file = toml::from_str::<Config>(text).map_err(|e| ConfigError::Parse { path: shown.to_string(), message: located(text, &e) })?;
        let mut table: toml::Table = toml::from_str(text).map_err(|e| ConfigError::Parse { path: shown.to_string(), message: located(text, &e) })?;
        let before = table.clone();
        let unknown = env::overlay::<Config>(env_keys(), &mut table, vars)?;
        let mut cfg = if table == before {
            from_file
        } else {
            table.try_into::<Config>().map_err(|e| ConfigError::Invalid(format!("the config with its SIGNET_* variables: {}", e.message())))?
        };
        cfg.unknown_env = unknown;
        Ok(cfg)
    }

    /// `text` as a config file with the `(name, value)` variables set.
    #[cfg(test)]
    fn with_env(text: &str, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        Config::from_text(text, "test.toml", vars.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    /// Checks the settings that have no safe default and fills in derived ones.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.tuf.validate()?;
        self.tracing.validate()?;
        // Only read here, not opened: `config check` must refuse a backend signet lacks.
        self.storage_url()?;
        for (name, addr) in [("http.metrics_listen", self.http.metrics_listen), ("http.admin_listen", self.http.admin_listen)] {
            if addr.is_some_and(|a| a == self.listen && a.port() != 0) {
                return Err(ConfigError::Invalid(format!("{name} is the public address ({}): give it a port of its own, or leave it unset", self.listen)));
            }
        }
        if self.log.batch_max_entries == 0 || self.log.batch_max_entries > 65_536 {
            return Err(ConfigError::Invalid("log.batch_max_entries must be 1..=65536".into()));
        }
        if self.log.batch_max_delay_ms > 10_000 || self.log.ct_batch_max_delay_ms > 10_000 {
            return Err(ConfigError::Invalid("log.batch_max_delay_ms and log.ct_batch_max_delay_ms must be at most 10000".into()));
        }
        for (name, mb) in [("log.tile_cache_mb", self.log.tile_cache_mb), ("log.entry_cache_mb", self.log.entry_cache_mb)] {
            if mb > 1 << 20 {
                return Err(ConfigError::Invalid(format!("{name} must be at most 1048576 (1 TiB), got {mb}")));
            }
        }
        if self.limits.max_body_bytes < 1024 {
            return Err(ConfigError::Invalid("limits.max_body_bytes must be at least 1024".into()));
        }
        let l = &self.limits;
        for (name, value, range) in [
            ("max_small_body_bytes", l.max_small_body_bytes, 1024..=l.max_body_bytes.max(1024)),
            // hyper refuses a request of more than 100 fields before signet sees it.
            ("max_header_count", l.max_header_count, 8..=100),
            ("max_header_bytes", l.max_header_bytes, 1024..=1 << 20),
            ("max_json_depth", l.max_json_depth, 4..=128),
        ] {
            if !range.contains(&value) {
                return Err(ConfigError::Invalid(format!("limits.{name} must be {}..={}, got {value}", range.start(), range.end())));
            }
        }
        if self.limits.max_attestation_bytes > self.limits.max_body_bytes {
            return Err(ConfigError::Invalid(format!(
                "limits.max_attestation_bytes must be at most limits.max_body_bytes ({}): an attestation arrives inside a request; got {}",
                self.limits.max_body_bytes, self.limits.max_attestation_bytes
            )));
        }
        if !(1024..=65_535).contains(&self.limits.max_entry_bytes) {
            return Err(ConfigError::Invalid(format!(
                "limits.max_entry_bytes must be 1024..=65535 (tile entry bundles carry 16-bit lengths), got {}",
                self.limits.max_entry_bytes
            )));
        }
        let http = &self.http;
        if !(1..=3600).contains(&http.header_read_timeout_secs) || !(1..=86_400).contains(&http.idle_timeout_secs) {
            return Err(ConfigError::Invalid(
                "http.header_read_timeout_secs must be 1..=3600 and http.idle_timeout_secs 1..=86400".into(),
            ));
        }
        if http.max_connections == 0 || http.shutdown_grace_secs > 3600 {
            return Err(ConfigError::Invalid("http.max_connections must be at least 1 and http.shutdown_grace_secs at most 3600".into()));
        }
        if !self.dev && self.public_url.is_none() {
            return Err(ConfigError::Invalid(
                "public_url is required outside --dev (log origins are derived from its host)".into(),
            ));
        }
        self.hostname()?;
        self.ca.intermediate_curve()?;
        self.tls.validate(self.dev)?;
        self.guard.validate().map_err(|e| ConfigError::Invalid(e.to_string()))?;
        let providers = self.oidc.providers()?;
        let fulcio = self.oidc.fulcio()?;
        let mut urls = std::collections::BTreeSet::new();
        for url in self.oidc.issuers.iter().map(|i| &i.url).chain(fulcio.iter().flat_map(|f| f.issuers.iter().map(|i| &i.spec.url))) {
            if !urls.insert(url) {
                return Err(ConfigError::Invalid(format!("oidc issuer {url} is configured twice")));
            }
        }
        for i in &self.oidc.issuers {
            i.spec().kind(&providers).map_err(|why| ConfigError::Invalid(format!("oidc issuer {}: {why}", i.url)))?;
            if i.url.contains('*') {
                signet_ca::oidc::meta::MetaPattern::new(&i.url).map_err(|why| ConfigError::Invalid(format!("oidc issuer {}: {why}", i.url)))?;
            }
            let invalid = |why: String| ConfigError::Invalid(format!("oidc issuer {}: {why}", i.url));
            match &i.jwks_file {
                Some(file) => {
                    if !file.exists() {
                        return Err(invalid(format!("jwks_file {} does not exist", file.display())));
                    }
                    if i.ca_file.is_some() {
                        return Err(invalid("ca_file applies only to OIDC discovery; drop it, or drop jwks_file".into()));
                    }
                }
                None => {
                    check_url(&i.url.replace('*', "0")).map_err(|why| invalid(format!("url: {why}")))?;
                    if let Some(ca) = i.ca_file.as_ref().filter(|f| !f.exists()) {
                        return Err(invalid(format!("ca_file {} does not exist", ca.display())));
                    }
                    if !(1..=86_400).contains(&i.min_refresh_interval_secs) {
                        return Err(invalid("min_refresh_interval_secs must be 1..=86400".into()));
                    }
                }
            }
        }
        for i in fulcio.iter().flat_map(|f| &f.issuers) {
            let invalid = |why: String| ConfigError::Invalid(format!("oidc issuer {} (from oidc.fulcio_config): {why}", i.spec.url));
            check_url(&i.spec.url.replace('*', "0")).map_err(|why| invalid(format!("url: {why}")))?;
            if i.spec.url.contains('*') {
                signet_ca::oidc::meta::MetaPattern::new(&i.spec.url).map_err(|e| invalid(e.to_string()))?;
            }
        }
        Ok(())
    }

    /// The URL clients use: `public_url`, or under `--dev` the listen address (https when
    /// TLS is configured).
    pub fn public_url(&self) -> String {
        match &self.public_url {
            Some(u) => u.trim_end_matches('/').to_string(),
            None => format!("{}://{}", self.scheme(), self.listen),
        }
    }

    /// `http` when [`TlsMode::Plain`], else `https`.
    pub fn scheme(&self) -> &'static str {
        match self.tls.mode(self.dev) {
            TlsMode::Plain => "http",
            TlsMode::Files | TlsMode::Issued => "https",
        }
    }

    /// The bare host of the public URL: no scheme, no port. It names the logs.
    pub fn hostname(&self) -> Result<String, ConfigError> {
        host_of(&self.public_url())
    }

    /// The store `storage` names: SQLite under the data dir unless it says otherwise.
    pub fn storage_url(&self) -> Result<signet_log::storage::StorageUrl, ConfigError> {
        signet_log::storage::StorageUrl::parse(self.storage.as_deref(), &self.data_dir).map_err(|e| ConfigError::Invalid(e.to_string()))
    }

    pub fn batch_delay(&self) -> Duration {
        Duration::from_millis(self.log.batch_max_delay_ms)
    }
}
