//! Configuration: one TOML file, then `SIGNET_*` environment variables, then flags.
//!
//! Unknown keys are errors that name the key: a typo in a security service's config must
//! not silently fall back to a default.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use signet_keys::{KeySource, Pkcs11Settings};

pub mod env;

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
    pub tracing: crate::otel::TracingSettings,
    /// signet as a witness for other logs (docs/witness.md); off unless it lists a log.
    pub witness: crate::witnessing::WitnessSettings,
    /// The monitor over this instance's own Rekor v2 log (docs/monitor.md); off unless `watch` is set.
    pub monitor: crate::monitoring::MonitorSettings,
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

/// The TUF repository that publishes the trust documents: on by default. Each role's
/// metadata is valid this many seconds when signed, and is signed again at half of it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TufSettings {
    pub enabled: bool,
    pub root_expiry_secs: u64,
    pub targets_expiry_secs: u64,
    pub snapshot_expiry_secs: u64,
    pub timestamp_expiry_secs: u64,
}

impl Default for TufSettings {
    fn default() -> Self {
        let e = signet_trust::tuf::Expiry::default();
        TufSettings {
            enabled: true,
            root_expiry_secs: e.root.as_secs(),
            targets_expiry_secs: e.targets.as_secs(),
            snapshot_expiry_secs: e.snapshot.as_secs(),
            timestamp_expiry_secs: e.timestamp.as_secs(),
        }
    }
}

impl TufSettings {
    pub fn expiry(&self) -> signet_trust::tuf::Expiry {
        use std::time::Duration;
        signet_trust::tuf::Expiry {
            root: Duration::from_secs(self.root_expiry_secs),
            targets: Duration::from_secs(self.targets_expiry_secs),
            snapshot: Duration::from_secs(self.snapshot_expiry_secs),
            timestamp: Duration::from_secs(self.timestamp_expiry_secs),
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        // A timestamp must outlive the time between two checks ([`crate::tuf`]), and each
        // role must outlive the one that names it, or clients would see expired metadata.
        const TEN_YEARS: u64 = 10 * 365 * 86_400;
        let e = [
            ("timestamp_expiry_secs", self.timestamp_expiry_secs),
            ("snapshot_expiry_secs", self.snapshot_expiry_secs),
            ("targets_expiry_secs", self.targets_expiry_secs),
            ("root_expiry_secs", self.root_expiry_secs),
        ];
        for (name, secs) in e {
            if !(4..=TEN_YEARS).contains(&secs) {
                return Err(ConfigError::Invalid(format!("tuf.{name} must be 4..={TEN_YEARS} seconds, got {secs}")));
            }
        }
        for pair in e.windows(2) {
            if pair[0].1 > pair[1].1 {
                return Err(ConfigError::Invalid(format!(
                    "tuf.{} ({}) must not be longer than tuf.{} ({}): a role must not outlive the role that names it",
                    pair[0].0, pair[0].1, pair[1].0, pair[1].1
                )));
            }
        }
        Ok(())
    }
}

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
            Some(name) => name.parse().map_err(|e: String| ConfigError::Invalid(format!("tls.source: {e}"))),
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
            (Some(_), Some(mode)) => mode.parse().map(Some).map_err(|e: String| ConfigError::Invalid(format!("tls.client_auth: {e}"))),
        }
    }

    fn validate(&self, dev: bool) -> Result<(), ConfigError> {
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

/// Identity-token issuers the CA trusts, besides the dev issuer under `--dev`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OidcSettings {
    pub issuers: Vec<IssuerSettings>,
    /// A Fulcio issuer config (JSON or YAML) whose issuers are trusted as well.
    pub fulcio_config: Option<PathBuf>,
    /// CI providers defined here, by name: Fulcio's `ci-issuer-metadata`.
    pub ci_providers: BTreeMap<String, CiProviderSettings>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IssuerSettings {
    /// The `iss` claim, exactly; or a meta-issuer pattern with `*`s.
    pub url: String,
    /// The `aud` claim tokens must carry.
    #[serde(default = "default_audience")]
    pub audience: String,
    /// Fulcio's issuer type ([`signet_ca::oidc::spec::TYPES`]); `subject` is its older name.
    #[serde(rename = "type", alias = "subject")]
    pub kind: String,
    /// `ci-provider` issuers: which provider's templates map the claims.
    #[serde(default)]
    pub ci_provider: Option<String>,
    /// `uri` issuers: the scheme and host subjects must be on; `username`: the host after `!`.
    #[serde(default)]
    pub subject_domain: Option<String>,
    /// `spiffe` issuers: the trust domain subjects must be in.
    #[serde(default)]
    pub trust_domain: Option<String>,
    /// `email` issuers that verify addresses without saying so in `email_verified`.
    #[serde(default)]
    pub skip_email_verification: bool,
    /// CI provider issuers: template defaults for this issuer only (e.g. `url`).
    #[serde(default)]
    pub ci_defaults: BTreeMap<String, String>,
    /// A JWKS file with the issuer's keys, reread when a token names an unknown key ID.
    /// Without it, the keys come from OIDC discovery at `url` (see [`crate::discovery`]).
    #[serde(default)]
    pub jwks_file: Option<PathBuf>,
    /// Discovery only: PEM CA certificates trusted for the issuer's HTTPS endpoints, for
    /// private CAs. Default: the platform's roots.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Discovery only: at least this many seconds between two fetches of the key set, however
    /// many tokens name unknown key IDs.
    #[serde(default = "default_min_refresh")]
    pub min_refresh_interval_secs: u64,
}

impl IssuerSettings {
    pub fn spec(&self) -> signet_ca::oidc::IssuerSpec {
        signet_ca::oidc::IssuerSpec {
            url: self.url.clone(),
            audience: self.audience.clone(),
            kind: self.kind.clone(),
            ci_provider: self.ci_provider.clone(),
            subject_domain: self.subject_domain.clone(),
            trust_domain: self.trust_domain.clone(),
            skip_email_verification: self.skip_email_verification,
            ci_defaults: self.ci_defaults.clone(),
        }
    }
}

/// A CI provider's templates (Fulcio's `ci-issuer-metadata` entry).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CiProviderSettings {
    #[serde(default)]
    pub defaults: BTreeMap<String, String>,
    /// Certificate field (Fulcio's name, e.g. `build-signer-uri`) → template.
    #[serde(default)]
    pub extensions: BTreeMap<String, String>,
    pub subject_alternative_name: String,
}

impl OidcSettings {
    /// The CI providers this config defines, parsed.
    pub fn providers(&self) -> Result<BTreeMap<String, signet_ca::ci::CiProvider>, ConfigError> {
        let mut out = BTreeMap::new();
        for (name, p) in &self.ci_providers {
            let provider = signet_ca::ci::CiProvider::new(
                name,
                p.defaults.iter().map(|(k, v)| (k.as_str(), v.as_str())),
                p.extensions.iter().map(|(k, v)| (k.as_str(), v.as_str())),
                &p.subject_alternative_name,
            )
            .map_err(|e| ConfigError::Invalid(format!("oidc.ci_providers: {e}")))?;
            out.insert(name.clone(), provider);
        }
        Ok(out)
    }

    /// The Fulcio config file's issuers and providers, if one is set.
    pub fn fulcio(&self) -> Result<Option<signet_ca::oidc::fulcio_config::FulcioConfig>, ConfigError> {
        self.fulcio_config.as_deref().map(signet_ca::oidc::fulcio_config::read).transpose().map_err(ConfigError::Invalid)
    }
}

fn default_audience() -> String {
    "sigstore".into()
}

fn default_min_refresh() -> u64 {
    10
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogSettings {
    /// Flush a batch once it holds this many entries...
    pub batch_max_entries: usize,
    /// ...or this many milliseconds after its first entry arrived.
    pub batch_max_delay_ms: u64,
    /// The CT log's batch delay: every certificate waits for its SCT, so keep it short.
    pub ct_batch_max_delay_ms: u64,
    /// Appends each Rekor log admits at once (parsed, verified, waiting for their batch);
    /// past it, 503 with Retry-After at once. 0 is no bound. See docs/log.md, "Overload".
    pub max_pending_appends: usize,
    /// MiB of full tiles each log keeps in memory for proofs into its older entries (16 KiB
    /// per 256 entries). The right edge of the tree is always in memory. See docs/log.md.
    pub tile_cache_mb: usize,
    /// Witnesses that cosign the Rekor v2 log's checkpoints (docs/witness.md); none by default.
    pub witnesses: crate::witnessing::LogWitnesses,
}

/// The certificate authority.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CaSettings {
    /// Curve of the intermediate that signs leaves, `p256` or `p384` (Fulcio's). It applies
    /// when the key is made; an existing key keeps its curve and must match it. Unset: the
    /// key on disk, or P-256 for a new one.
    pub intermediate_key: Option<String>,
}

impl CaSettings {
    pub fn intermediate_curve(&self) -> Result<Option<signet_ca::x509::CaCurve>, ConfigError> {
        self.intermediate_key
            .as_deref()
            .map(|s| s.parse().map_err(|e: String| ConfigError::Invalid(format!("ca.intermediate_key: {e}"))))
            .transpose()
    }
}

/// Where the signing keys are: each a file path (PKCS#8 PEM) or a PKCS#11 URI
/// (`pkcs11:token=…;object=…`, RFC 7512; docs/operations.md "Keys on a token").
#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KeyPaths {
    /// The Rekor v1 log's key; default `<data_dir>/keys/rekor-v1.pem`.
    pub rekor_v1: Option<KeySource>,
    /// The Rekor v2 log's key; default `<data_dir>/keys/rekor-v2.pem`.
    pub rekor_v2: Option<KeySource>,
    /// The CT log's key; default `<data_dir>/keys/ct.pem`.
    pub ct: Option<KeySource>,
    /// The timestamp authority's key; default `<data_dir>/keys/tsa.pem`.
    pub tsa: Option<KeySource>,
    /// The CA's intermediate key (P-256 or P-384), which signs every certificate; default
    /// `<data_dir>/keys/ca-intermediate.pem`.
    pub ca_intermediate: Option<KeySource>,
    /// The CA's root key (P-384), used only while certificates are made (the first start, a
    /// renewal); default `<data_dir>/keys/ca-root.pem`, which `signet init` can keep offline.
    pub ca_root: Option<KeySource>,
    /// The key that signs the audit log's anchors (P-256); default `<data_dir>/keys/audit.pem`.
    pub audit: Option<KeySource>,
    /// The TUF roles' Ed25519 keys; default `<data_dir>/keys/tuf-<role>.pem`. The root and
    /// targets keys are needed only to sign those roles (`signet tuf`), not to serve.
    pub tuf_root: Option<KeySource>,
    pub tuf_targets: Option<KeySource>,
    pub tuf_snapshot: Option<KeySource>,
    pub tuf_timestamp: Option<KeySource>,
    /// The PKCS#11 module for URIs that give no `module-path`.
    pub pkcs11_module: Option<PathBuf>,
    /// The tokens' user PIN for URIs that give none; better from `SIGNET_KEYS_PKCS11_PIN`.
    pub pkcs11_pin: Option<String>,
    /// Sessions each key on a token keeps open; 0: the default (4).
    pub pkcs11_sessions: usize,
}

impl std::fmt::Debug for KeyPaths {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyPaths")
            .field("rekor_v1", &self.rekor_v1)
            .field("rekor_v2", &self.rekor_v2)
            .field("ct", &self.ct)
            .field("tsa", &self.tsa)
            .field("ca_intermediate", &self.ca_intermediate)
            .field("ca_root", &self.ca_root)
            .field("audit", &self.audit)
            .field("tuf_root", &self.tuf_root)
            .field("tuf_targets", &self.tuf_targets)
            .field("tuf_snapshot", &self.tuf_snapshot)
            .field("tuf_timestamp", &self.tuf_timestamp)
            .field("pkcs11_module", &self.pkcs11_module)
            .field("pkcs11_pin", &self.pkcs11_pin.as_ref().map(|_| "<hidden>"))
            .field("pkcs11_sessions", &self.pkcs11_sessions)
            .finish()
    }
}

impl KeyPaths {
    /// What every PKCS#11 URI may leave out.
    pub fn pkcs11(&self) -> Pkcs11Settings {
        Pkcs11Settings { module: self.pkcs11_module.clone(), pin: self.pkcs11_pin.clone(), sessions: self.pkcs11_sessions }
    }

    /// Where the TUF roles' keys are: those configured, and the files of the others.
    pub fn tuf(&self, data_dir: &Path) -> signet_trust::tuf::keys::KeyPlaces {
        use signet_trust::tuf::Role;
        let configured = [(Role::Root, &self.tuf_root), (Role::Targets, &self.tuf_targets), (Role::Snapshot, &self.tuf_snapshot), (Role::Timestamp, &self.tuf_timestamp)]
            .into_iter()
            .filter_map(|(role, source)| source.clone().map(|s| (role, s)))
            .collect();
        signet_trust::tuf::keys::KeyPlaces::new(data_dir.join("keys"), configured, self.pkcs11())
    }

    /// Where the CA's keys are, and the curve of a new intermediate.
    pub fn ca(&self, ca: &CaSettings) -> Result<signet_ca::authority::CaKeys, ConfigError> {
        Ok(signet_ca::authority::CaKeys {
            intermediate_curve: ca.intermediate_curve()?,
            intermediate: self.ca_intermediate.clone(),
            root: self.ca_root.clone(),
            pkcs11: self.pkcs11(),
        })
    }
}

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
            tracing: crate::otel::TracingSettings::default(),
            witness: crate::witnessing::WitnessSettings::default(),
            monitor: crate::monitoring::MonitorSettings::default(),
            source: None,
            unknown_env: Vec::new(),
        }
    }
}

impl Default for LogSettings {
    fn default() -> Self {
        LogSettings { batch_max_entries: 256, batch_max_delay_ms: 10, ct_batch_max_delay_ms: 2, max_pending_appends: 512, tile_cache_mb: 64, witnesses: Default::default() }
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
        let unknown = env::overlay(&mut table, vars)?;
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
        self.tracing.validate().map_err(ConfigError::Invalid)?;
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
        if self.log.tile_cache_mb > 1 << 20 {
            return Err(ConfigError::Invalid(format!("log.tile_cache_mb must be at most 1048576 (1 TiB), got {}", self.log.tile_cache_mb)));
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
        self.guard.validate().map_err(ConfigError::Invalid)?;
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
                    crate::discovery::check_url(&i.url.replace('*', "0")).map_err(|why| invalid(format!("url: {why}")))?;
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
            crate::discovery::check_url(&i.spec.url.replace('*', "0")).map_err(|why| invalid(format!("url: {why}")))?;
            if i.spec.url.contains('*') {
                signet_ca::oidc::meta::MetaPattern::new(&i.spec.url).map_err(invalid)?;
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
        signet_log::storage::StorageUrl::parse(self.storage.as_deref(), &self.data_dir).map_err(ConfigError::Invalid)
    }

    pub fn batch_delay(&self) -> Duration {
        Duration::from_millis(self.log.batch_max_delay_ms)
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_are_named() {
        let err = toml::from_str::<Config>("listen = \"127.0.0.1:1\"\nlsiten = 1\n").unwrap_err();
        assert!(err.message().contains("lsiten"), "{}", err.message());
        let err = toml::from_str::<Config>("[log]\nbatch_size = 3\n").unwrap_err();
        assert!(err.message().contains("batch_size"), "{}", err.message());
    }

    #[test]
    fn metrics_and_admin_are_on_the_public_port_only_under_dev() {
        use Surface::*;
        let mut h = HttpSettings::default();
        assert_eq!(h.surfaces(true), vec![(None, vec![Public, Metrics, Admin])]);
        assert_eq!(h.surfaces(false), vec![(None, vec![Public])], "production: nowhere until given a port");
        let (m, a): (SocketAddr, SocketAddr) = ("127.0.0.1:9464".parse().unwrap(), "127.0.0.1:9465".parse().unwrap());
        h.metrics_listen = Some(m);
        assert_eq!(h.surfaces(true), vec![(None, vec![Public, Admin]), (Some(m), vec![Metrics])]);
        h.admin_listen = Some(a);
        assert_eq!(h.surfaces(false), vec![(None, vec![Public]), (Some(m), vec![Metrics]), (Some(a), vec![Admin])]);
        h.admin_listen = Some(m);
        assert_eq!(h.surfaces(false), vec![(None, vec![Public]), (Some(m), vec![Metrics, Admin])], "one port for both");
        let c = Config::with_env("", &[("SIGNET_HTTP_ADMIN_LISTEN", "127.0.0.1:9465")]).unwrap();
        assert_eq!(c.http.admin_listen, Some(a));
        assert_eq!(Surface::of("/api/admin/log/rotate"), Admin);
        assert_eq!(Surface::of("/metrics"), Metrics);
        assert_eq!(Surface::of("/api/v1/log"), Public);
    }

    #[test]
    fn env_overrides_and_errors() {
        let c = Config::with_env("", &[("SIGNET_LOG_BATCH_MAX_ENTRIES", "64")]).unwrap();
        assert_eq!(c.log.batch_max_entries, 64);
        let err = Config::with_env("", &[("SIGNET_LISTEN", "nope")]).unwrap_err();
        assert!(err.to_string().contains("SIGNET_LISTEN"));
    }

    #[test]
    fn ca_intermediate_key_parses_strictly() {
        let c: Config = toml::from_str("[ca]\nintermediate_key = \"p384\"\n").unwrap();
        assert_eq!(c.ca.intermediate_curve().unwrap(), Some(signet_ca::x509::CaCurve::P384));
        assert_eq!(Config::default().ca.intermediate_curve().unwrap(), None);
        let c = Config::with_env("dev = true\n", &[("SIGNET_CA_INTERMEDIATE_KEY", "rsa")]).unwrap();
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("ca.intermediate_key") && err.contains("expected p256 or p384"), "{err}");
    }

    #[test]
    fn hosts() {
        assert_eq!(host_of("https://Log.Example:8443/api").unwrap(), "log.example");
        assert_eq!(host_of("http://127.0.0.1:8080").unwrap(), "127.0.0.1");
        assert_eq!(host_of("http://[::1]:80/").unwrap(), "::1");
        assert!(host_of("ftp://x").is_err());
        assert!(host_of("http://").is_err());
        assert!(host_of("http://u@h/").is_err());
    }

    #[test]
    fn oidc_issuers_parse_strictly() {
        let c: Config = toml::from_str(
            "[[oidc.issuers]]\nurl = \"https://token.actions.githubusercontent.com\"\nsubject = \"github-workflow\"\njwks_file = \"/x\"\n",
        )
        .unwrap();
        assert_eq!(c.oidc.issuers[0].audience, "sigstore");
        let err = toml::from_str::<Config>("[[oidc.issuers]]\nurl = \"u\"\nsubject = \"uri\"\njwks_file = \"/x\"\njwks = 1\n").unwrap_err();
        assert!(err.message().contains("jwks"), "{}", err.message());
        let mut c = c;
        c.dev = true;
        assert!(c.validate().unwrap_err().to_string().contains("jwks_file"));
        c.oidc.issuers[0].kind = "name".into();
        assert!(c.validate().unwrap_err().to_string().contains("is not an issuer type"));
    }

    #[test]
    fn oidc_discovery_issuers() {
        let parse = |extra: &str| {
            let mut c: Config = toml::from_str(&format!("dev = true\n[[oidc.issuers]]\nsubject = \"email\"\n{extra}")).unwrap();
            c.dev = true;
            c
        };
        let c = parse("url = \"https://accounts.example\"\n");
        let i = &c.oidc.issuers[0];
        assert_eq!((i.jwks_file.as_ref(), i.ca_file.as_ref(), i.min_refresh_interval_secs), (None, None, 10));
        c.validate().unwrap();

        let err = parse("url = \"http://accounts.example\"\n").validate().unwrap_err().to_string();
        assert!(err.contains("http://accounts.example") && err.contains("plain http"), "{err}");
        for loopback in ["http://127.0.0.1:8080", "http://localhost:1/x", "http://[::1]:9"] {
            parse(&format!("url = \"{loopback}\"\n")).validate().unwrap();
        }
        let err = parse("url = \"idp.example\"\n").validate().unwrap_err().to_string();
        assert!(err.contains("https://HOST"), "{err}");

        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, "").unwrap();
        parse(&format!("url = \"https://a.example\"\nca_file = \"{}\"\n", ca.display())).validate().unwrap();
        let err = parse("url = \"https://a.example\"\nca_file = \"/nonexistent/ca.pem\"\n").validate().unwrap_err().to_string();
        assert!(err.contains("ca_file /nonexistent/ca.pem does not exist"), "{err}");
        let err = parse(&format!("url = \"https://a.example\"\nca_file = \"{0}\"\njwks_file = \"{0}\"\n", ca.display()))
            .validate()
            .unwrap_err()
            .to_string();
        assert!(err.contains("ca_file applies only to OIDC discovery"), "{err}");
        let err = parse("url = \"https://a.example\"\nmin_refresh_interval_secs = 0\n").validate().unwrap_err().to_string();
        assert!(err.contains("min_refresh_interval_secs"), "{err}");
        // A JWKS file issuer never fetches, so its URL is only the `iss` to match.
        parse(&format!("url = \"http://ci.example\"\njwks_file = \"{}\"\n", ca.display())).validate().unwrap();

        let err = toml::from_str::<Config>("[[oidc.issuers]]\nurl = \"u\"\nsubject = \"uri\"\nca_fil = \"x\"\n").unwrap_err();
        assert!(err.message().contains("ca_fil"), "{}", err.message());
    }

    #[test]
    fn tls_settings() {
        let mut c: Config = toml::from_str("dev = true\n[tls]\ncert = \"/c.pem\"\nkey = \"/k.pem\"\nbackend = \"openssl\"\n").unwrap();
        c.validate().unwrap();
        assert_eq!(c.tls.backend().unwrap(), signet_tls::Backend::Openssl);
        assert_eq!((c.scheme(), c.tls.reload_interval_secs), ("https", 5));
        c.tls.backend = Some("gnutls".into());
        assert!(c.validate().unwrap_err().to_string().contains("expected rustls or openssl"));
        c.tls.backend = None;
        c.tls.key = None;
        assert!(c.validate().unwrap_err().to_string().contains("go together"));
        c.tls.cert = None;
        c.tls.backend = Some("rustls".into());
        // Under --dev a backend without files is the issued certificate's; outside it, an error.
        c.validate().unwrap();
        assert_eq!((c.tls.mode(true), c.scheme()), (TlsMode::Issued, "https"));
        (c.dev, c.public_url) = (false, Some("https://signet.test".into()));
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("needs HTTPS"), "{err}");
        c.tls.backend = None;
        assert_eq!((c.tls.mode(false), c.scheme()), (TlsMode::Plain, "http"));
        c.tls.source = Some("issued".into());
        c.validate().unwrap();
        assert_eq!((c.tls.mode(false), c.scheme()), (TlsMode::Issued, "https"), "issued outside --dev, when asked for");
        c.dev = true;
        c.tls.source = None;
        c.tls.plain_http = true;
        c.validate().unwrap();
        assert_eq!((c.tls.mode(true), c.scheme()), (TlsMode::Plain, "http"));
        c.tls.issued_lifetime_secs = Some(60);
        assert!(c.validate().unwrap_err().to_string().contains("tls.issued_lifetime_secs is not used"));
        c.tls.plain_http = false;
        c.validate().unwrap();
        assert_eq!(c.tls.issued_lifetime(), std::time::Duration::from_secs(60));
        let err = toml::from_str::<Config>("[tls]\ncertificate = \"x\"\n").unwrap_err();
        assert!(err.message().contains("certificate"), "{}", err.message());
        let c = Config::with_env("", &[("SIGNET_TLS_CERT", "/c"), ("SIGNET_TLS_KEY", "/k"), ("SIGNET_TLS_BACKEND", "openssl")]).unwrap();
        assert_eq!((c.tls.cert.unwrap(), c.tls.backend.unwrap()), (PathBuf::from("/c"), "openssl".to_string()));
    }

    #[test]
    fn tls_sources_and_the_cache_ttl() {
        let tls = |extra: &str| toml::from_str::<Config>(&format!("dev = true\n[tls]\ncert = \"/c.pem\"\nkey = \"/k.pem\"\n{extra}")).unwrap();
        let c = tls("");
        assert_eq!(c.tls.source().unwrap(), signet_tls::SourceKind::File);
        for kind in signet_tls::SourceKind::ALL.into_iter().filter(|k| *k != signet_tls::SourceKind::Issued) {
            let c = tls(&format!("source = \"{kind}\"\n"));
            c.validate().unwrap();
            assert_eq!(c.tls.source().unwrap(), kind);
        }
        let c = tls("source = \"cached\"\n");
        assert_eq!(c.tls.cache_ttl(), std::time::Duration::from_secs(5), "report 000's default");
        let c = tls("source = \"cached\"\ncache_ttl_secs = 60\n");
        c.validate().unwrap();
        assert_eq!(c.tls.cache_ttl(), std::time::Duration::from_secs(60));

        let err = tls("source = \"uncached\"\n").validate().unwrap_err().to_string();
        assert!(err.contains("tls.source") && err.contains("expected file, watch, reload, cached or issued"), "{err}");
        let err = tls("source = \"issued\"\n").validate().unwrap_err().to_string();
        assert!(err.contains("takes no tls.cert"), "{err}");
        let err = tls("cache_ttl_secs = 5\n").validate().unwrap_err().to_string();
        assert!(err.contains("tls.cache_ttl_secs") && err.contains("the source is file"), "{err}");
        let err = tls("source = \"reload\"\ncache_ttl_secs = 5\n").validate().unwrap_err().to_string();
        assert!(err.contains("tls.cache_ttl_secs") && err.contains("the source is reload"), "{err}");
        for bad in [0, 3601, i64::MAX as u64] {
            let err = tls(&format!("source = \"cached\"\ncache_ttl_secs = {bad}\n")).validate().unwrap_err().to_string();
            assert!(err.contains("tls.cache_ttl_secs") && err.contains("1..=3600"), "{bad}: {err}");
        }

        let cached = "dev = true\n[tls]\ncert = \"/c.pem\"\nkey = \"/k.pem\"\nsource = \"cached\"\n";
        let c = Config::with_env(cached, &[("SIGNET_TLS_CACHE_TTL_SECS", "30")]).unwrap();
        assert_eq!(c.tls.cache_ttl_secs, Some(30));
        let err = Config::with_env(cached, &[("SIGNET_TLS_CACHE_TTL_SECS", "soon")]).unwrap_err().to_string();
        assert!(err.contains("SIGNET_TLS_CACHE_TTL_SECS"), "{err}");
    }

    #[test]
    fn type_errors_name_the_line_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "listen = \"127.0.0.1:1\"\n[log]\nbatch_max_entries = \"many\"\n").unwrap();
        let err = Config::load(Some(&path)).unwrap_err().to_string();
        assert!(err.contains("line 3") && err.contains("batch_max_entries"), "{err}");
        std::fs::write(&path, "[http]\nmax_conections = 5\n").unwrap();
        let err = Config::load(Some(&path)).unwrap_err().to_string();
        assert!(err.contains("line 2") && err.contains("max_conections"), "{err}");
    }

    #[test]
    fn guard_section_parses_strictly() {
        let c: Config = toml::from_str("[guard.rate_limit]\nenabled = true\nper_second = 5\nburst = 7\n[guard.auth]\nrequire = \"writes\"\n").unwrap();
        assert!(c.guard.active() && c.guard.rate_limit.burst == 7);
        let err = toml::from_str::<Config>("[guard.ban]\nmax_refusal = 3\n").unwrap_err();
        assert!(err.message().contains("max_refusal"), "{}", err.message());
        assert!(!Config::default().guard.active(), "off by default");
    }

    #[test]
    fn validation() {
        let mut c = Config::default();
        assert!(c.validate().unwrap_err().to_string().contains("public_url"));
        c.dev = true;
        c.validate().unwrap();
        c.storage = Some("mysql://x".into());
        assert!(c.storage_url().is_err());
        assert!(c.validate().unwrap_err().to_string().contains("mysql://x\" is not supported"), "config check refuses it too");
        c.storage = Some("postgres://signet@127.0.0.1:5432/signet".into());
        assert!(matches!(c.storage_url(), Ok(signet_log::storage::StorageUrl::Postgres(_))));
        // An attestation arrives inside a request, so it cannot be larger than one.
        c.limits.max_attestation_bytes = c.limits.max_body_bytes + 1;
        assert!(c.validate().unwrap_err().to_string().contains("limits.max_attestation_bytes must be at most limits.max_body_bytes"));
        c.limits.max_attestation_bytes = 0;
        c.validate().unwrap();
    }

    /// The fields a table of the config accepts, as serde names them when it refuses an
    /// unknown one.
    fn fields_of(table: &str) -> Vec<String> {
        let toml = match table {
            "" => "zz_probe = 1\n".to_string(),
            "oidc.issuers" | "witness.logs" => format!("[[{table}]]\nzz_probe = 1\n"),
            t => format!("[{t}]\nzz_probe = 1\n"),
        };
        let err = toml::from_str::<Config>(&toml).unwrap_err().to_string();
        let list = err.split("expected").nth(1).unwrap_or_else(|| panic!("[{table}]: {err}"));
        list.split('`').skip(1).step_by(2).map(str::to_string).collect()
    }

    /// The tables of the config, each of which refuses unknown keys.
    const TABLES: [&str; 21] = [
        "", "log", "ca", "keys", "limits", "http", "oidc", "oidc.issuers", "tls", "tuf", "tracing", "guard", "guard.rate_limit", "guard.ban", "guard.auth",
        "guard.audit", "guard.redis", "witness", "witness.logs", "log.witnesses", "monitor",
    ];

    #[test]
    fn the_example_names_every_key_and_parses() {
        let example = EXAMPLE;
        // Each table's keys appear in it, set or commented out, under that table's header.
        let mut missing = Vec::new();
        for table in TABLES {
            let header = match table {
                "" => None,
                "oidc.issuers" | "witness.logs" => Some(format!("[[{table}]]")),
                t => Some(format!("[{t}]")),
            };
            let section: String = match &header {
                None => example.lines().take_while(|l| !l.starts_with('[')).collect::<Vec<_>>().join("\n"),
                Some(h) => example
                    .lines()
                    // A table shown commented out (`# [[witness.logs]]`) counts.
                    .skip_while(|l| !l.trim_start_matches(['#', ' ']).starts_with(h.as_str()))
                    .skip(1)
                    .take_while(|l| !l.starts_with('['))
                    .collect::<Vec<_>>()
                    .join("\n"),
            };
            for field in fields_of(table) {
                // A table of its own ([log], [guard.audit], [[oidc.issuers]], …).
                let path = if table.is_empty() { field.clone() } else { format!("{table}.{field}") };
                if example.contains(&format!("[{path}]")) || example.contains(&format!("[[{path}]]")) {
                    continue;
                }
                let set = section.lines().any(|l| {
                    let l = l.trim_start().trim_start_matches('#').trim_start();
                    l.starts_with(&format!("{field} =")) || l.starts_with(&format!("{field}="))
                });
                if !set {
                    missing.push(format!("[{table}] {field}"));
                }
            }
        }
        assert!(missing.is_empty(), "the example lacks: {missing:?}");
        let parsed: Config = toml::from_str(example).unwrap_or_else(|e| panic!("the example does not parse: {e}"));
        assert_eq!(parsed.tuf.timestamp_expiry_secs, TufSettings::default().timestamp_expiry_secs);
        // docs/configuration.md shows the same text.
        let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/configuration.md")).unwrap();
        assert!(docs.contains(&format!("```toml\n{example}```\n")), "docs/configuration.md's example differs from config_example.toml");
    }
}
