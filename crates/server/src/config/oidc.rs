//! `[oidc]`: the identity token issuers the CA accepts, and the CI providers' templates.

use std::path::PathBuf;

use serde::Deserialize;

use super::error::ConfigError;

use std::collections::BTreeMap;

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
        self.fulcio_config.as_deref().map(signet_ca::oidc::fulcio_config::read).transpose().map_err(|e| ConfigError::Invalid(e.to_string()))
    }
}

fn default_audience() -> String {
    "sigstore".into()
}

fn default_min_refresh() -> u64 {
    10
}
