//! `[guard]`: which protections are on. Everything is off by default, so that a plain
//! `signet serve` answers Sigstore clients exactly as before; admin routes need an admin
//! token whatever this says.

use serde::Deserialize;

pub use crate::error::ConfigError;
use crate::roles::Role;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GuardConfig {
    pub rate_limit: RateLimitConfig,
    pub ban: BanConfig,
    pub auth: AuthConfig,
    pub audit: AuditConfig,
    /// Rate limits and bans shared by all instances through Redis; off when `url` is empty.
    pub redis: RedisConfig,
    /// Clients are keyed by network: IPv4 addresses by this prefix (default 32)...
    pub ipv4_prefix: u8,
    /// ...and IPv6 addresses by this one (default 64: one host often holds a whole /64).
    pub ipv6_prefix: u8,
    /// Proxies whose `Forwarded` / `X-Forwarded-For` are believed (CIDR ranges); none by default.
    pub trusted_proxies: Vec<String>,
    /// Most clients tracked at once by the rate limiter and by the ban strikes; past it,
    /// untracked clients share one bucket until idle ones are swept (docs/guard.md).
    pub max_clients: usize,
    /// Custom roles: name → permission names ([`crate::roles`]). Reread on SIGHUP.
    pub roles: std::collections::BTreeMap<String, Vec<String>>,
    /// Client-certificate SANs to roles ([`crate::mtls`]), for mTLS listeners.
    pub mtls: crate::mtls::MtlsConfig,
}

impl Default for GuardConfig {
    fn default() -> Self {
        GuardConfig {
            rate_limit: RateLimitConfig::default(),
            ban: BanConfig::default(),
            auth: AuthConfig::default(),
            audit: AuditConfig::default(),
            redis: Default::default(),
            ipv4_prefix: 32,
            ipv6_prefix: 64,
            trusted_proxies: Vec::new(),
            max_clients: 100_000,
            roles: Default::default(),
            mtls: Default::default(),
        }
    }
}

/// The audit log (`audit.sqlite`), independent of the other settings. Off by default: on, it
/// changes every measured figure (docs/guard.md).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    pub enabled: bool,
    pub mode: AuditMode,
    /// How often the chain's head is anchored in the Rekor v2 log ([`crate::audit::anchor`]),
    /// and once more at shutdown; 0: never.
    pub anchor_interval_secs: u64,
    /// Retention ([`crate::audit::segment`]): at the first anchor after the live log passes
    /// this many bytes (0: no limit), its records up to that anchor move into a segment file.
    pub segment_max_bytes: u64,
    /// The same, once its oldest record is this old (0: no limit).
    pub segment_max_age_secs: u64,
    /// On PostgreSQL, this instance's chain in the shared audit tables ([`crate::audit::postgres`]);
    /// by default named after its audit key, which is the instance's own.
    pub chain: Option<String>,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            enabled: false,
            mode: AuditMode::default(),
            anchor_interval_secs: 10,
            segment_max_bytes: 256 << 20,
            segment_max_age_secs: 30 * 24 * 3600,
            chain: None,
        }
    }
}

impl AuditConfig {
    pub fn segment_policy(&self) -> crate::audit::segment::Policy {
        crate::audit::segment::Policy { max_bytes: self.segment_max_bytes, max_age_secs: self.segment_max_age_secs }
    }
}

/// What a request waits for ([`crate::audit::chain`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AuditMode {
    /// A response goes out only once its record is on disk (fsynced, a group commit shared
    /// by the requests in flight); a record that cannot be written turns it into a 503, and
    /// while the store fails nothing reaches a handler. Vault's rule.
    #[default]
    Closed,
    /// Records are written every 100 ms behind the answers; a failed write is counted and
    /// noted in the chain, and the answers go out regardless.
    BestEffort,
}

/// Token buckets per client. Reads (GET, HEAD) and writes (everything else) have their own
/// buckets, so that a burst of log reads cannot starve a client's signing.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimitConfig {
    pub enabled: bool,
    /// Sustained read requests per second per client.
    pub per_second: u32,
    /// Read requests a client may send at once above the sustained rate.
    pub burst: u32,
    /// Sustained writes per second per client; default: `per_second`.
    pub write_per_second: Option<u32>,
    /// Write burst; default: `burst`.
    pub write_burst: Option<u32>,
}

/// A client refused (429 or 401) more than `max_refusals` times within `window_secs` is
/// banned for `duration_secs`: it gets a 403 without further work until then.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BanConfig {
    pub enabled: bool,
    pub max_refusals: u32,
    pub window_secs: u64,
    pub duration_secs: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// Which public (Sigstore) routes need an API token.
    pub require: Require,
    /// An OIDC identity token (`Authorization: Bearer`, not a signet token) is a principal on
    /// the signing routes: `cert.issue` is its to use, and the CA verifies it before anything
    /// is signed ([`crate::principal`]). Off: signing needs an API token as `require` says.
    pub oidc: bool,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig { require: Require::default(), oidc: true }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Require {
    /// No public route needs a token (real Sigstore clients send none).
    #[default]
    None,
    /// Routes that need more than `read` (appends, certificates, timestamps) need a token
    /// whose role grants it; reads, search included, stay open.
    Writes,
    /// Every route but `/healthz` and `/readyz` needs a token whose role grants the route's permission.
    All,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        RateLimitConfig { enabled: false, per_second: 100, burst: 200, write_per_second: None, write_burst: None }
    }
}

impl Default for BanConfig {
    fn default() -> Self {
        BanConfig { enabled: false, max_refusals: 100, window_secs: 60, duration_secs: 600 }
    }
}

impl GuardConfig {
    /// Whether the global layers are needed at all. When not, the router has none of them
    /// and pays nothing.
    pub fn active(&self) -> bool {
        self.rate_limit.enabled || self.ban.enabled || self.auth.require != Require::None || !self.mtls.roles.is_empty()
    }

    /// How requests become client keys, from `ipv4_prefix`, `ipv6_prefix` and `trusted_proxies`.
    pub fn keying(&self) -> Result<crate::client::Keying, ConfigError> {
        let trusted_proxies = self
            .trusted_proxies
            .iter()
            .map(|c| crate::client::Cidr::parse(c).map_err(ConfigError::TrustedProxy))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(crate::client::Keying { ipv4_prefix: self.ipv4_prefix, ipv6_prefix: self.ipv6_prefix, trusted_proxies })
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(8..=32).contains(&self.ipv4_prefix) || !(16..=128).contains(&self.ipv6_prefix) {
            return Err(ConfigError::Prefixes { ipv4: self.ipv4_prefix, ipv6: self.ipv6_prefix });
        }
        if !(100..=100_000_000).contains(&self.max_clients) {
            return Err(ConfigError::MaxClients(self.max_clients));
        }
        self.keying()?;
        let roles = crate::roles::Roles::with_custom(&self.roles)?;
        for (san, role) in &self.mtls.roles {
            let known = role.parse::<Role>().map(|r| roles.defines(&r)).unwrap_or(false);
            if !known {
                return Err(ConfigError::MtlsRole { san: san.clone(), role: role.clone() });
            }
        }
        let r = &self.rate_limit;
        if r.enabled {
            let all = [r.per_second, r.burst, r.write_per_second.unwrap_or(1), r.write_burst.unwrap_or(1)];
            if all.contains(&0) {
                return Err(ConfigError::RateLimitZero);
            }
        }
        let b = &self.ban;
        if b.enabled && (b.max_refusals == 0 || b.window_secs == 0 || b.duration_secs == 0) {
            return Err(ConfigError::BanZero);
        }
        if !self.redis.url.is_empty() {
            if !r.enabled {
                return Err(ConfigError::RedisWithoutRateLimit);
            }
            crate::redis_client::client(&self.redis.url, self.redis.ca_file.as_deref())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_by_default_and_strict() {
        let c: GuardConfig = serde_json::from_str("{}").unwrap();
        assert!(!c.active());
        assert!(!c.audit.enabled);
        let c: GuardConfig = serde_json::from_str(r#"{"audit": {"enabled": true}}"#).unwrap();
        assert!(c.audit.enabled && !c.active(), "the audit log needs none of the other layers");
        assert_eq!(c.audit.mode, AuditMode::Closed, "fail-closed is the default when the audit log is on");
        let c: GuardConfig = serde_json::from_str(r#"{"audit": {"enabled": true, "mode": "best-effort"}}"#).unwrap();
        assert_eq!(c.audit.mode, AuditMode::BestEffort);
        let e = serde_json::from_str::<GuardConfig>(r#"{"audit": {"mode": "open"}}"#).unwrap_err().to_string();
        assert!(e.contains("closed") && e.contains("best-effort"), "{e}");
        let c: GuardConfig = serde_json::from_str(r#"{"auth": {"require": "writes"}}"#).unwrap();
        assert!(c.active());
        let e = serde_json::from_str::<GuardConfig>(r#"{"rate_limit": {"per_secnd": 3}}"#).unwrap_err();
        assert!(e.to_string().contains("per_secnd"), "{e}");
        let mut c = GuardConfig::default();
        c.rate_limit.enabled = true;
        c.rate_limit.burst = 0;
        assert!(c.validate().unwrap_err().to_string().contains("burst"));
        let c: GuardConfig = serde_json::from_str(r#"{"trusted_proxies": ["10.0.0.0/8", "::1"], "ipv6_prefix": 48}"#).unwrap();
        assert!(c.validate().is_ok());
        for bad in [r#"{"trusted_proxies": ["10.0.0.0/40"]}"#, r#"{"trusted_proxies": ["proxy"]}"#, r#"{"ipv6_prefix": 200}"#, r#"{"ipv4_prefix": 0}"#] {
            let c: GuardConfig = serde_json::from_str(bad).unwrap();
            assert!(c.validate().is_err(), "{bad}");
        }
    }
}

/// `[guard.redis]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RedisConfig {
    /// `redis://[user:password@]host:port[/db]`, or `rediss://…` for TLS; empty: limits and
    /// bans stay per instance.
    pub url: String,
    /// For `rediss://`: a PEM file of the CA that signed Redis's certificate, trusted instead
    /// of the system's roots (a private CA).
    pub ca_file: Option<std::path::PathBuf>,
    /// What a request gets while Redis cannot be reached: `open` (admitted) or `closed` (503).
    pub on_failure: OnFailure,
    /// How long a check may wait for Redis before it counts as a failure.
    pub timeout_ms: u64,
}

impl Default for RedisConfig {
    fn default() -> Self {
        RedisConfig { url: String::new(), ca_file: None, on_failure: OnFailure::Open, timeout_ms: 100 }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnFailure {
    Open,
    Closed,
}
