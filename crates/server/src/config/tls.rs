//! `[tls]`: HTTPS on the listener, its certificate source, mTLS.

use std::path::PathBuf;

use serde::Deserialize;

use super::error::ConfigError;

/// HTTPS: with `cert` and `key`, from those files; without them, under `--dev` (or with
/// `source = "issued"`), from a certificate the instance's own CA issues ([`TlsMode`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlsSettings {
    /// PEM certificate chain, leaf first. May be a symlink (e.g. in a Kubernetes secret mount).
    pub cert: Option<PathBuf>,
    /// PEM private key of the leaf certificate.
    pub key: Option<PathBuf>,
    /// `rustls` (the default) or `openssl`.
    pub backend: Option<String>,
    /// Seconds between two re-reads of the files; a changed pair is installed for new handshakes.
    pub reload_interval_secs: u64,
    /// `file` (the default: re-read on the timer), `watch` (also at once on an inotify
    /// event in the files' directories), `reload` (read at every handshake) or `cached`
    /// (read at a handshake once the copy is `cache_ttl_secs` old).
    pub source: Option<String>,
    /// `cached` only: how long a read pair is served before a handshake reads the files again.
    pub cache_ttl_secs: Option<u64>,
    /// mTLS: the PEM bundle of the CAs that issue client certificates, re-read like the pair.
    pub client_ca: Option<PathBuf>,
    /// `optional` (the default with `client_ca`) or `required`.
    pub client_auth: Option<String>,
    /// Serve plain HTTP even under `--dev` (`--plain-http`): behind a proxy that terminates
    /// TLS, and for benchmarks of the HTTP layer alone.
    pub plain_http: bool,
    /// `issued` only: the lifetime of each issued certificate (renewed at half of it).
    pub issued_lifetime_secs: Option<u64>,
}

/// What a server speaks, once `[tls]` and `--dev` are taken together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    /// Plain HTTP: `plain_http`, or no certificate outside `--dev`.
    Plain,
    /// HTTPS with `cert` and `key`, re-read as `source` says.
    Files,
    /// HTTPS with a certificate issued by the instance's own CA, in memory
    /// ([`signet_tls::issued`]): `--dev` without a certificate, or `source = "issued"`.
    Issued,
}

impl Default for TlsSettings {
    fn default() -> Self {
        TlsSettings {
            cert: None,
            key: None,
            backend: None,
            reload_interval_secs: 5,
            source: None,
            cache_ttl_secs: None,
            client_ca: None,
            client_auth: None,
            plain_http: false,
            issued_lifetime_secs: None,
        }
    }
}

impl TlsSettings {
    /// The backend named by `backend`, rustls when none is.
    pub fn backend(&self) -> Result<signet_tls::Backend, ConfigError> {
        match &self.backend {
            None => Ok(signet_tls::Backend::default()),
            Some(name) => name.parse().map_err(|e: signet_tls::UnknownBackend| ConfigError::Invalid(format!("tls.backend: {e}"))),
        }
    }

    /// The certificate source: `file` unless `source` names another.
    pub fn source(&self) -> Result<signet_tls::SourceKind, ConfigError> {
        match &self.source {
            None => Ok(signet_tls::SourceKind::File),
            Some(name) => name.parse().map_err(|e: signet_tls::source::UnknownSource| ConfigError::Invalid(format!("tls.source: {e}"))),
        }
    }

    /// The `cached` source's TTL: `cache_ttl_secs`, or report 000's 5 s.
    pub fn cache_ttl(&self) -> std::time::Duration {
        self.cache_ttl_secs.map_or(signet_tls::source::DEFAULT_CACHE_TTL, std::time::Duration::from_secs)
    }

    /// Whether signet serves HTTPS, and with which certificate. Call after `validate`.
    pub fn mode(&self, dev: bool) -> TlsMode {
        if self.plain_http {
            TlsMode::Plain
        } else if self.cert.is_some() {
            TlsMode::Files
        } else if dev || self.source.as_deref() == Some("issued") {
            TlsMode::Issued
        } else {
            TlsMode::Plain
        }
    }

    /// The lifetime of an issued certificate: `issued_lifetime_secs`, or an hour.
    pub fn issued_lifetime(&self) -> std::time::Duration {
        self.issued_lifetime_secs.map_or(signet_tls::issued::DEFAULT_LIFETIME, std::time::Duration::from_secs)
    }

    /// The client-certificate mode, when a client CA bundle is given.
    pub fn client_auth_mode(&self) -> Result<Option<signet_tls::ClientAuthMode>, ConfigError> {
        match (&self.client_ca, &self.client_auth) {
            (None, None) => Ok(None),
            (None, Some(_)) => Err(ConfigError::Invalid(
                "tls.client_auth (--tls-client-auth) needs tls.client_ca (--tls-client-ca), the CAs that issue client certificates".into(),
            )),
            (Some(_), None) => Ok(Some(signet_tls::ClientAuthMode::Optional)),
            (Some(_), Some(mode)) => mode.parse().map(Some).map_err(|e: signet_tls::client_auth::UnknownClientAuthMode| ConfigError::Invalid(format!("tls.client_auth: {e}"))),
        }
    }

    pub(super) fn validate(&self, dev: bool) -> Result<(), ConfigError> {
        self.backend()?;
        let source = self.source()?;
        if self.plain_http {
            let set = [
                ("tls.cert", self.cert.is_some()),
                ("tls.key", self.key.is_some()),
                ("tls.backend", self.backend.is_some()),
                ("tls.source", self.source.is_some()),
                ("tls.cache_ttl_secs", self.cache_ttl_secs.is_some()),
                ("tls.client_ca", self.client_ca.is_some()),
                ("tls.client_auth", self.client_auth.is_some()),
                ("tls.issued_lifetime_secs", self.issued_lifetime_secs.is_some()),
            ];
            if let Some((name, _)) = set.iter().find(|(_, is_set)| *is_set) {
                return Err(ConfigError::Invalid(format!("tls.plain_http (--plain-http) serves plain HTTP, so {name} is not used; remove one of them")));
            }
            return self.check_reload_interval();
        }
        if let Some(ttl) = self.cache_ttl_secs {
            if source != signet_tls::SourceKind::Cached {
                return Err(ConfigError::Invalid(format!(
                    "tls.cache_ttl_secs (--tls-cache-ttl) is for tls.source = \"cached\" (--tls-source cached); the source is {source}"
                )));
            }
            if !(1..=3600).contains(&ttl) {
                return Err(ConfigError::Invalid(format!("tls.cache_ttl_secs (--tls-cache-ttl) must be 1..=3600 seconds, not {ttl}")));
            }
        }
        if source == signet_tls::SourceKind::Issued && (self.cert.is_some() || self.key.is_some()) {
            return Err(ConfigError::Invalid(
                "tls.source = \"issued\" (--tls-source issued) serves a certificate the instance's own CA issues; it takes no tls.cert or tls.key (--tls-cert, --tls-key)".into(),
            ));
        }
        if self.source.is_some() && source != signet_tls::SourceKind::Issued && self.cert.is_none() {
            return Err(ConfigError::Invalid(format!(
                "tls.source = \"{source}\" (--tls-source) needs tls.cert and tls.key (--tls-cert, --tls-key): it says how they are re-read"
            )));
        }
        let mode = self.mode(dev);
        match (&self.cert, &self.key) {
            (Some(_), None) | (None, Some(_)) => {
                return Err(ConfigError::Invalid(
                    "tls.cert (--tls-cert) and tls.key (--tls-key) go together; give both, or neither (plain HTTP, or under --dev a certificate signet issues itself)".into(),
                ))
            }
            (None, None) if self.backend.is_some() && mode == TlsMode::Plain => {
                return Err(ConfigError::Invalid(
                    "tls.backend (--tls-backend) needs HTTPS: tls.cert and tls.key (--tls-cert, --tls-key), or --dev (an issued certificate)".into(),
                ))
            }
            _ => {}
        }
        if self.client_auth_mode()?.is_some() && mode != TlsMode::Files {
            return Err(ConfigError::Invalid(
                "tls.client_ca (--tls-client-ca) needs tls.cert and tls.key (--tls-cert, --tls-key): client certificates are asked for over HTTPS, and the bundle is re-read with the pair".into(),
            ));
        }
        if let Some(secs) = self.issued_lifetime_secs {
            if mode != TlsMode::Issued {
                return Err(ConfigError::Invalid(
                    "tls.issued_lifetime_secs is for an issued certificate (--dev without tls.cert, or tls.source = \"issued\")".into(),
                ));
            }
            if !(2..=604_800).contains(&secs) {
                return Err(ConfigError::Invalid(format!("tls.issued_lifetime_secs must be 2..=604800 seconds (a week), not {secs}")));
            }
        }
        self.check_reload_interval()
    }

    fn check_reload_interval(&self) -> Result<(), ConfigError> {
        if !(1..=3600).contains(&self.reload_interval_secs) {
            return Err(ConfigError::Invalid("tls.reload_interval_secs must be 1..=3600".into()));
        }
        Ok(())
    }
}
