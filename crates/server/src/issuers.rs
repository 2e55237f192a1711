//! The configured OIDC issuers, and where each one's keys come from: a JWKS file, or
//! OIDC discovery over HTTPS ([`crate::discovery`]).
//!
//! Discovery is lazy: the verifier fetches an issuer's keys at the first token it sees
//! from it. A background check at startup fetches once and logs the outcome, so that an
//! unreachable issuer shows in the log early; it never stops the server from starting.
//! While an issuer is unreachable its tokens are refused (401) with the fetch error.
//!
//! A meta-issuer (a `url` with `*`) gets a key source per issuer URL it matches, made at
//! the first token from that URL; the verifier keeps a bounded number of them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use signet_ca::oidc::jwks::KeySet;
use signet_ca::oidc::meta::MetaPattern;
use signet_ca::oidc::refresh::rate_limited;
use signet_ca::oidc::error::KeySetError;
use signet_ca::oidc::verify::{KeySource, KeySourceFor};
use signet_ca::oidc::{IssuerConfig, MetaIssuerConfig, TokenVerifier};
use signet_tls::{Fetcher, Trust};

use crate::config::{ConfigError, OidcSettings};
use crate::discovery::Discovery;

/// Where one issuer's keys come from.
enum Keys {
    File(PathBuf),
    Discovery { trust: Trust, min_refresh: Duration },
}

/// The verifier for every issuer `settings` configures, in TOML and in a Fulcio config
/// file, with `extra` issuers (the dev issuer) besides.
pub fn verifier(settings: &OidcSettings, extra: Vec<IssuerConfig>) -> Result<TokenVerifier, ConfigError> {
    let providers = settings.providers()?;
    let mut entries = Vec::new();
    for i in &settings.issuers {
        let keys = match &i.jwks_file {
            Some(path) => Keys::File(path.clone()),
            None => Keys::Discovery {
                trust: i.ca_file.clone().map_or(Trust::Platform, Trust::PemFile),
                min_refresh: Duration::from_secs(i.min_refresh_interval_secs),
            },
        };
        entries.push((i.spec(), keys));
    }
    if let Some(fulcio) = settings.fulcio()? {
        for i in fulcio.issuers {
            let trust = match i.ca_pem {
                Some(pem) => Trust::Pem { name: format!("the CACert of {} in oidc.fulcio_config", i.spec.url), pem: pem.into_bytes() },
                None => Trust::Platform,
            };
            entries.push((i.spec, Keys::Discovery { trust, min_refresh: Duration::from_secs(10) }));
        }
        // The file's providers serve its own issuers; the TOML's win where both define one.
        let mut all = fulcio.providers;
        all.extend(providers);
        return build(entries, &all, extra);
    }
    build(entries, &providers, extra)
}

fn build(
    entries: Vec<(signet_ca::oidc::IssuerSpec, Keys)>,
    providers: &std::collections::BTreeMap<String, signet_ca::ci::CiProvider>,
    mut plain: Vec<IssuerConfig>,
) -> Result<TokenVerifier, ConfigError> {
    let mut meta = Vec::new();
    for (spec, keys) in entries {
        let invalid = |why: String| ConfigError::Invalid(format!("oidc issuer {}: {why}", spec.url));
        let kind = spec.kind(providers).map_err(|e| invalid(e.to_string()))?;
        if spec.url.contains('*') {
            let pattern = MetaPattern::new(&spec.url).map_err(|e| invalid(e.to_string()))?;
            let keys: KeySourceFor = match keys {
                Keys::File(path) => {
                    let source = file_source(path);
                    Arc::new(move |_: &str| source.clone())
                }
                Keys::Discovery { trust, min_refresh } => {
                    let tls = signet_tls::client_config(&trust).map_err(|e| invalid(e.to_string()))?;
                    Arc::new(move |url: &str| discovery_source(url, Fetcher::new(tls.clone()), min_refresh))
                }
            };
            meta.push(MetaIssuerConfig { pattern, audience: spec.audience.clone(), kind, keys });
            continue;
        }
        let keys = match keys {
            Keys::File(path) => file_source(path),
            Keys::Discovery { trust, min_refresh } => {
                let tls = signet_tls::client_config(&trust).map_err(|e| invalid(e.to_string()))?;
                let source = discovery_source(&spec.url, Fetcher::new(tls), min_refresh);
                startup_check(spec.url.clone(), source.clone());
                source
            }
        };
        plain.push(IssuerConfig { issuer: spec.url.clone(), audience: spec.audience.clone(), kind, keys });
    }
    Ok(TokenVerifier::with_meta(plain, meta))
}

/// A local file: rereading it costs nothing, so every unknown key ID rereads it.
fn file_source(path: std::path::PathBuf) -> KeySource {
    Arc::new(move || {
        let text = std::fs::read_to_string(&path).map_err(|e| KeySetError::Fetch { why: format!("{}: {e}", path.display()) })?;
        KeySet::from_json(&text).map_err(|source| KeySetError::JwksFrom { from: path.display().to_string(), source })
    })
}

/// Discovery, at most once per `min_refresh`, off the async runtime.
fn discovery_source(url: &str, fetcher: Fetcher, min_refresh: Duration) -> KeySource {
    let discovery = Discovery::new(url, fetcher);
    let fetch: KeySource = Arc::new(move || discovery.key_set().map_err(|e| KeySetError::Fetch { why: e.to_string() }));
    off_runtime(rate_limited(fetch, min_refresh))
}

/// The verifier calls key sources synchronously from request handlers. A network fetch
/// there must not stall the other tasks of the tokio worker it runs on.
fn off_runtime(source: KeySource) -> KeySource {
    Arc::new(move || match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(|| source())
        }
        _ => source(),
    })
}

/// Fetches once in the background and logs the outcome.
fn startup_check(issuer: String, source: KeySource) {
    let name = issuer.clone();
    let spawned = std::thread::Builder::new().name("oidc-discovery".into()).spawn(move || match source() {
        Ok(keys) => tracing::info!(issuer, keys = keys.len(), "OIDC discovery: key set fetched"),
        Err(e) => tracing::warn!(issuer, "OIDC discovery failed; tokens of this issuer are refused until it succeeds: {e}"),
    });
    if let Err(e) = spawned {
        tracing::warn!("OIDC discovery check for {name} not started: {e}");
    }
}
